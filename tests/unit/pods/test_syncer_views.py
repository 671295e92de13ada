"""KubeletPodSyncer: which runtime view each step acts on, and how many reads that costs."""

from __future__ import annotations

import time
from typing import Any, cast

import pytest
import trio

from kubelet.api import Container, Pod
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    RuntimePodStatus,
    SandboxInfo,
    SandboxState,
)
from kubelet.events import EventRecorder
from kubelet.pleg import PodCache
from kubelet.pods import KubeletPodSyncer
from kubelet.runtime import PodRuntime
from kubelet.runtime.podruntime import SyncOutcome
from kubelet.testing.builders import make_pod

RUNNING = RuntimePodStatus(
    uid="u",
    sandboxes=(SandboxInfo(id="s", state=SandboxState.READY),),
    containers=(ContainerInfo(id="c", name="app", state=ContainerRunState.RUNNING),),
)


class StubRuntime:
    """What the syncer asks of ``PodRuntime``: each sync acts when told to."""

    wall_clock = staticmethod(time.time)

    def __init__(self) -> None:
        self.recorder = EventRecorder("")
        self.acts: list[bool] = []
        self.fail = False
        self.seen: list[RuntimePodStatus] = []

    async def sync(self, pod: Pod, status: RuntimePodStatus, **_: Any) -> SyncOutcome:
        self.seen.append(status)
        if self.fail:
            raise RuntimeError("runtime down")
        return SyncOutcome(acted=self.acts.pop(0) if self.acts else False)

    async def terminate(self, pod: Pod, status: RuntimePodStatus, grace: int | None) -> None:
        self.seen.append(status)

    async def remove_pod_files(self, pod: Pod) -> None:
        pass


def make() -> tuple[KubeletPodSyncer, StubRuntime, list[str], dict[str, RuntimePodStatus]]:
    fetched: list[str] = []
    views: dict[str, RuntimePodStatus] = {}

    async def fetch(uid: str) -> RuntimePodStatus:
        fetched.append(uid)
        return views.get(uid, RuntimePodStatus(uid=uid))

    stub = StubRuntime()
    syncer = KubeletPodSyncer(PodCache(fetch), cast(PodRuntime, stub))
    return syncer, stub, fetched, views


POD = make_pod(Container(name="app", image="busybox"), uid="u")


async def test_the_read_after_acting_serves_the_next_step_and_the_teardown(
    autojump_clock: trio.abc.Clock,
) -> None:
    """No relist in between: a step's own read after it acted is as new as the next
    step (a PLEG event's sync) and the teardown need; neither reads again. Only the
    check that everything went reads."""
    syncer, stub, fetched, views = make()
    stub.acts = [True]
    views["u"] = RUNNING
    await syncer.sync_pod(POD)  # first sync: reads (no relist behind it), acts, reads
    assert fetched == ["u", "u"]
    stub.seen.clear()
    views["u"] = RuntimePodStatus(uid="u")  # what the check after the teardown finds
    await trio.sleep(1)
    await syncer.sync_pod(POD)
    assert fetched == ["u", "u"]
    await syncer.terminate_pod(POD, None)
    assert fetched == ["u", "u", "u"]  # the check that all went
    assert len(stub.seen) == 2 and stub.seen[0] is stub.seen[1]


async def test_a_step_that_failed_half_way_reads_afresh_next(
    autojump_clock: trio.abc.Clock,
) -> None:
    syncer, stub, fetched, _ = make()
    stub.acts = [True]
    await syncer.sync_pod(POD)
    stub.fail = True
    with pytest.raises(RuntimeError):
        await syncer.sync_pod(POD)  # served from the read after acting
    assert fetched == ["u", "u"]
    stub.fail = False
    await syncer.sync_pod(POD)  # what the failed step did is unknown: read
    assert fetched == ["u", "u", "u"]


async def test_a_step_that_changed_nothing_needs_no_newer_view(
    autojump_clock: trio.abc.Clock,
) -> None:
    syncer, stub, fetched, _ = make()
    stub.acts = [True, False, False]
    for _ in range(3):
        await syncer.sync_pod(POD)
        await trio.sleep(10)
    assert fetched == ["u", "u"]


async def test_the_pod_is_in_hand_during_each_step(autojump_clock: trio.abc.Clock) -> None:
    """The PLEG leaves a pod to its worker while a sync or teardown is at work on it."""
    syncer, stub, _, views = make()
    held: list[bool] = []
    sync, terminate = stub.sync, stub.terminate

    async def sync_holding(pod: Pod, status: RuntimePodStatus, **kw: Any) -> SyncOutcome:
        held.append(syncer.cache.held(pod.uid) is not None)
        return await sync(pod, status, **kw)

    async def terminate_holding(pod: Pod, status: RuntimePodStatus, grace: int | None) -> None:
        held.append(syncer.cache.held(pod.uid) is not None)
        views["u"] = RuntimePodStatus(uid="u")
        await terminate(pod, status, grace)

    stub.sync = sync_holding  # type: ignore[method-assign]
    stub.terminate = terminate_holding  # type: ignore[method-assign]
    views["u"] = RUNNING
    await syncer.sync_pod(POD)
    assert syncer.cache.held("u") is None
    await syncer.terminate_pod(POD, None)
    assert held == [True, True] and syncer.cache.held("u") is None
