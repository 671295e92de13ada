"""Container GC's policy from the deprecated flags, checked as upstream's NewContainerGC."""

from __future__ import annotations

import pytest

from kubelet.config import resolve
from kubelet.errors import ConfigError
from kubelet.gc.containers import GCPolicy
from kubelet.gc.run import container_gc_policy


def _policy(*argv: str) -> GCPolicy:
    return container_gc_policy(resolve(list(argv), hostname=lambda: "n"))


def test_container_gc_policy_from_the_deprecated_flags() -> None:
    assert _policy(
        "--minimum-container-ttl-duration=30s",
        "--maximum-dead-containers-per-container=2",
        "--maximum-dead-containers=5",
    ) == GCPolicy(min_age=30.0, max_per_pod_container=2, max_containers=5)
    assert _policy() == GCPolicy()  # upstream's defaults: 0s, 1, -1


def test_a_negative_minimum_age_stops_start_up() -> None:
    with pytest.raises(ConfigError, match="invalid minimum garbage collection age: -1s"):
        _policy("--minimum-container-ttl-duration=-1s")
