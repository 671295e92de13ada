"""The status manager against FakeApiServer (fake clock): a terminal phase is final."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from kubelet.api import ApiClient, Pod, PodCondition, PodStatus, from_wire, load_kubeconfig
from kubelet.status import StatusManager, owned_conditions
from kubelet.testing import FakeApiServer

from .kubelet_harness import EPOCH, NODE


@pytest.fixture
async def api(aio_loop: None, short_tmp: Path) -> AsyncIterator[tuple[FakeApiServer, ApiClient]]:
    server = FakeApiServer(epoch=EPOCH)
    async with server.serve():
        path = server.kubeconfig(short_tmp / "kubelet.conf", user=f"system:node:{NODE}")
        async with ApiClient.open(load_kubeconfig(str(path))) as client:
            yield server, client


def make_pod(server: FakeApiServer, name: str, phase: str | None) -> Pod:
    server.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "busybox"}]},
        }
    )
    if phase is not None:
        server.update_status("pods", "default", name, {"phase": phase})
    obj = server.get("pods", "default", name)
    assert obj is not None
    return from_wire(Pod, obj)


def sent_phases(server: FakeApiServer, name: str) -> list[str]:
    out = []
    for request in server.requests_of("patch", "pods/status", name=name):
        body: dict[str, Any] = json.loads(request.body)
        if "phase" in body.get("status", {}):
            out.append(body["status"]["phase"])
    return out


async def test_a_terminal_phase_is_never_patched_back(
    api: tuple[FakeApiServer, ApiClient], autojump_clock: trio.abc.Clock
) -> None:
    server, client = api
    manager = StatusManager(client, mirror_for=lambda pod: None)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        # the API already says Failed; the kubelet's view (a stale pod object) says Running
        failed = make_pod(server, "failed", "Failed")
        stale = attrs.evolve(failed, status=PodStatus(phase="Running"))
        manager.set(stale, PodStatus(phase="Running", message="m"))
        # the kubelet itself reported Succeeded, then (a bug, a race) Pending
        done = make_pod(server, "done", None)
        manager.set(done, PodStatus(phase="Succeeded"))
        await trio.sleep(1)
        manager.set(done, PodStatus(phase="Pending", message="again"))
        await trio.sleep(1)
        manager.set(done, PodStatus(phase="Running", message="and again"))
        await trio.sleep(12)  # and the periodic pass
        nursery.cancel_scope.cancel()
    failed_obj, done_obj = (
        server.get("pods", "default", "failed"),
        server.get("pods", "default", "done"),
    )
    assert failed_obj is not None and done_obj is not None
    assert failed_obj["status"]["phase"] == "Failed"
    assert failed_obj["status"].get("message") == "m"  # the rest of the status still goes
    assert done_obj["status"]["phase"] == "Succeeded"
    assert done_obj["status"].get("message") == "and again"
    assert set(sent_phases(server, "failed")) <= {"Failed"}
    assert sent_phases(server, "done") == ["Succeeded"]


async def test_conditions_others_own_are_never_written(
    api: tuple[FakeApiServer, ApiClient], autojump_clock: trio.abc.Clock
) -> None:
    """A controller's condition in the status handed over (a stale copy) is not sent:
    the API's own value stays, and the kubelet's conditions still go out."""
    server, client = api
    manager = StatusManager(client, mirror_for=lambda pod: None)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        pod = make_pod(server, "gated", "Running")
        server.update_status(
            "pods",
            "default",
            "gated",
            lambda s: s.update(conditions=[{"type": "example.com/lb", "status": "False"}]),
        )
        pod = from_wire(Pod, server.get("pods", "default", "gated"))
        stale = PodStatus(
            phase="Running",
            conditions=(
                PodCondition(type="example.com/lb", status="True"),
                PodCondition(type="Ready", status="False", reason="ReadinessGatesNotReady"),
            ),
        )
        manager.set(pod, stale)
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    obj = server.get("pods", "default", "gated")
    assert obj is not None
    conditions = {c["type"]: c for c in obj["status"]["conditions"]}
    assert conditions["example.com/lb"]["status"] == "False"
    assert conditions["Ready"]["reason"] == "ReadinessGatesNotReady"
    for request in server.requests_of("patch", "pods/status", name="gated"):
        body: dict[str, Any] = json.loads(request.body)
        sent = body.get("status", {}).get("conditions", [])
        assert all(c.get("type") != "example.com/lb" for c in sent)


@pytest.mark.parametrize(("gate", "in_api"), [(True, "False"), (False, "True")])
async def test_ready_to_start_is_the_kubelets_only_with_its_gate(
    api: tuple[FakeApiServer, ApiClient], autojump_clock: trio.abc.Clock, gate: bool, in_api: str
) -> None:
    """PodReadyToStartContainersCondition off: the condition is someone else's, so the
    API's value stays whatever the status handed in says."""
    server, client = api
    manager = StatusManager(client, mirror_for=lambda pod: None, owned=owned_conditions(gate))
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        make_pod(server, "sandboxed", "Running")
        server.update_status(
            "pods",
            "default",
            "sandboxed",
            lambda s: s.update(
                conditions=[{"type": "PodReadyToStartContainers", "status": "True"}]
            ),
        )
        pod = from_wire(Pod, server.get("pods", "default", "sandboxed"))
        ready = PodCondition(type="Ready", status="True")
        mine = PodCondition(type="PodReadyToStartContainers", status="False")
        manager.set(pod, PodStatus(phase="Running", conditions=(mine, ready)))
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    obj = server.get("pods", "default", "sandboxed")
    assert obj is not None
    conditions = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
    assert conditions == {"PodReadyToStartContainers": in_api, "Ready": "True"}


async def test_a_status_handed_in_during_a_write_is_written_next(
    api: tuple[FakeApiServer, ApiClient], autojump_clock: trio.abc.Clock
) -> None:
    """A status handed in while the previous one's PATCH is out is written right after it
    (it was lost until the pod's next change), and kubelet_pod_status_sync_duration_seconds
    counts each from when it was handed in; a failed write (500) is counted when the retry
    lands."""
    server, client = api
    synced: list[float] = []
    manager = StatusManager(client, mirror_for=lambda pod: None, on_synced=synced.append)
    server.faults.delay("patch", "pods/status", 3, times=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        pod = make_pod(server, "web", None)
        manager.set(pod, PodStatus(phase="Pending", message="one"))
        await trio.sleep(1)
        manager.set(pod, PodStatus(phase="Pending", message="two"))  # while the first waits
        await trio.sleep(10)
        assert (server.get("pods", "default", "web") or {})["status"]["message"] == "two"
        assert len(synced) == 2  # the slow write (3 s), then "two" from when it came
        assert synced[0] == pytest.approx(3, abs=0.1)
        assert synced[1] == pytest.approx(2, abs=0.1)  # handed in at 1, written at 3 +
        server.faults.fail_next("patch", "pods/status", 1)
        manager.set(pod, PodStatus(phase="Running"))
        await trio.sleep(20)
        nursery.cancel_scope.cancel()
    assert len(synced) == 3 and synced[2] > 0
