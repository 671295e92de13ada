"""The node startup figures: set once, only by the kubelet that created the Node."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from kubelet.node.startup import NodeStartup


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def ready(status: str = "True") -> dict[str, Any]:
    return {"status": {"conditions": [{"type": "Ready", "status": status}]}}


def values(registry: CollectorRegistry) -> dict[str, float]:
    prefix = "kubelet_node_startup_"
    return {
        s.name[len(prefix) :]: s.value
        for family in registry.collect()
        for s in family.samples
        if s.name.startswith(prefix)
    }


def test_boot_start_attempt_creation_ready() -> None:
    clock, registry = Clock(), CollectorRegistry()
    startup = NodeStartup(registry, clock, started=100.0, boot=40.0)
    clock.now = 103.0
    startup.attempt()
    clock.now = 104.0
    startup.attempt()  # a retry: the first attempt counts
    clock.now = 110.0
    startup.created()
    clock.now = 111.0
    startup.reported(ready("False"))
    clock.now = 115.0
    startup.reported(ready())
    clock.now = 130.0
    startup.reported(ready())  # once
    assert values(registry) == {
        "pre_kubelet_duration_seconds": 60.0,
        "pre_registration_duration_seconds": 3.0,
        "registration_duration_seconds": 7.0,
        "post_registration_duration_seconds": 5.0,
        "duration_seconds": 75.0,
    }


def test_an_adopted_node_sets_nothing() -> None:
    clock, registry = Clock(), CollectorRegistry()
    startup = NodeStartup(registry, clock, started=100.0, boot=None)
    startup.attempt()  # the Node already existed: never created()
    startup.reported(ready())
    assert set(values(registry).values()) == {0.0}
