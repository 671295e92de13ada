"""Graceful node shutdown through the whole kubelet: a private dbus-daemon with a fake
logind, FakeApiServer and FakeRuntime.

The clock is fake but jumps only after 20 ms without anything to do, so that the
dbus-daemon (another process) answers before time moves on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from kubelet.testing import ContainerBehaviour, FakeApiServer, FakeRuntime, private_bus
from kubelet.testing.fakelogind import FakeLogind

from .cluster_harness import Cluster, start_cluster_kubelet
from .kubelet_harness import EPOCH, KUBELET_IMAGES, NODE

SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
CONFIG = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
shutdownGracePeriodByPodPriority:
- {priority: 0, shutdownGracePeriodSeconds: 10}
- {priority: 100000, shutdownGracePeriodSeconds: 20}
- {priority: 2000000000, shutdownGracePeriodSeconds: 30}
"""


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


@pytest.fixture
def patient_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0.02)


@pytest.fixture
async def system_bus(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    async with private_bus(short_tmp / "dbus") as address:
        monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", address)
        yield address


def ready(api: FakeApiServer) -> dict[str, Any]:
    node = api.get("nodes", "", NODE) or {}
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


async def test_shutdown_stops_pods_by_priority_then_releases_the_lock(
    fake: FakeRuntime,
    short_tmp: Path,
    system_bus: str,
    patient_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake.behave(ContainerBehaviour(stop_takes=3), container="app")
    logind = FakeLogind(system_bus, short_tmp / "logind.conf.d", inhibit_delay_max=120)
    config = short_tmp / "kubelet.yaml"
    config.write_text(CONFIG)
    api = FakeApiServer(epoch=EPOCH)
    with caplog.at_level(logging.INFO), trio.fail_after(600):
        async with api.serve(), trio.open_nursery() as nursery:
            await nursery.start(logind.serve)
            c = Cluster(api, fake, short_tmp, nursery)
            await start_cluster_kubelet(c, extra=[f"--config={config}"])
            c.create_pod("web", priority=0)
            c.create_pod("db", priority=100000, terminationGracePeriodSeconds=5)
            c.create_pod("dns", priority=2000000000, priorityClassName="system-cluster-critical")
            await c.wait_for(
                lambda: (
                    all(c.phase(p) == "Running" for p in ("web", "db", "dns"))
                    and ready(api).get("status") == "True"
                )
            )
            [lock] = logind.held()
            assert lock.mode == "delay" and lock.what == "shutdown"

            await logind.prepare_for_shutdown(True)
            with trio.fail_after(120):
                await lock.released.wait()
            stops = {r.args["container_id"]: r.time for r in fake.calls if r.rpc == "StopContainer"}
            when = {
                pod: min(
                    stops[ct.id]
                    for ct in fake.containers.values()
                    if ct.config.labels["io.kubernetes.pod.name"] == pod
                )
                for pod in ("web", "db", "dns")
            }
            # lowest priority first; each group waited for (3 s to stop) before the next
            assert when["web"] + 3 <= when["db"] and when["db"] + 3 <= when["dns"]
            await c.wait_for(lambda: all(c.phase(p) == "Failed" for p in ("web", "db", "dns")))
            for name in ("web", "db", "dns"):
                status = (c.pod(name) or {})["status"]
                assert status["reason"] == "Terminated"
                assert status["message"] == SHUTDOWN_MESSAGE
                [target] = [x for x in status["conditions"] if x["type"] == "DisruptionTarget"]
                assert (target["status"], target["reason"], target["message"]) == (
                    "True",
                    "TerminationByKubelet",
                    SHUTDOWN_MESSAGE,
                )
            condition = ready(api)
            assert (condition["status"], condition["reason"]) == ("False", "KubeletNotReady")
            assert condition["message"] == "node is shutting down"
            events = api.objects("Event").values()
            assert any(e["reason"] == "NodeShutdown" for e in events)
            assert "Shutdown manager killing pod default/db with gracePeriod 5s" in caplog.text
            # upstream's record of the last shutdown: the state file and two gauges
            assert c.components is not None
            registry = c.components.metrics.registry
            start = registry.get_sample_value("kubelet_graceful_shutdown_start_time_seconds")
            end = registry.get_sample_value("kubelet_graceful_shutdown_end_time_seconds")
            assert start is not None and end is not None and EPOCH < start < end
            state = json.loads((short_tmp / "root" / "graceful_node_shutdown_state").read_text())
            assert set(state) == {"startTime", "endTime"}
            # a pod arriving now is refused, as upstream's admit handler does
            c.create_pod("late")
            await c.wait_for(lambda: c.phase("late") == "Failed")
            late = (c.pod("late") or {})["status"]
            assert late["reason"] == "NodeShutdown"
            assert late["message"] == (
                "Pod was rejected: Pod was rejected as the node is shutting down."
            )
            nursery.cancel_scope.cancel()


async def test_a_pod_stopped_for_shutdown_is_deleted_when_the_api_deletes_it(
    fake: FakeRuntime,
    short_tmp: Path,
    system_bus: str,
    patient_clock: trio.testing.MockClock,
) -> None:
    """The kill leaves the pod stopped with its containers; a later deletion (the
    shutdown was cancelled, a controller deletes the Failed pod) tears it down and
    finishes its API object, as for an evicted pod."""
    logind = FakeLogind(system_bus, short_tmp / "logind.conf.d", inhibit_delay_max=120)
    config = short_tmp / "kubelet.yaml"
    config.write_text(CONFIG)
    api = FakeApiServer(epoch=EPOCH)
    with trio.fail_after(600):
        async with api.serve(), trio.open_nursery() as nursery:
            await nursery.start(logind.serve)
            c = Cluster(api, fake, short_tmp, nursery)
            await start_cluster_kubelet(c, extra=[f"--config={config}"])
            c.create_pod("web", priority=0)
            await c.wait_for(lambda: c.phase("web") == "Running")
            [lock] = logind.held()
            await logind.prepare_for_shutdown(True)
            with trio.fail_after(120):
                await lock.released.wait()
            await c.wait_for(lambda: c.phase("web") == "Failed")
            assert fake.containers  # stopped, kept for their logs
            await logind.prepare_for_shutdown(False)
            c.api.delete("pods", "default", "web", grace=30)
            deleted = trio.current_time()
            await c.wait_for(lambda: c.pod("web") is None and not fake.sandboxes, timeout=60)
            assert trio.current_time() - deleted < 5
            nursery.cancel_scope.cancel()


async def test_without_logind_the_kubelet_says_so_once_and_runs(
    fake: FakeRuntime,
    short_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={short_tmp}/no-bus.sock")
    config = short_tmp / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "shutdownGracePeriod: 30s\nshutdownGracePeriodCriticalPods: 10s\n"
    )
    api = FakeApiServer(epoch=EPOCH)
    with caplog.at_level(logging.INFO):
        async with api.serve(), trio.open_nursery() as nursery:
            c = Cluster(api, fake, short_tmp, nursery)
            await start_cluster_kubelet(c, extra=[f"--config={config}"])
            c.create_pod("web")
            await c.wait_for(lambda: c.phase("web") == "Running")
            await trio.sleep(60)
            assert c.phase("web") == "Running"
            nursery.cancel_scope.cancel()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    unavailable = [w for w in warnings if "Graceful node shutdown is not available" in w]
    assert len(unavailable) == 1, warnings
    assert "cannot connect to the system bus" in unavailable[0]
