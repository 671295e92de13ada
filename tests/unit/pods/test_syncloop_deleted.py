"""The syncLoop and pods it first hears of already being deleted (a restarted kubelet)."""

from __future__ import annotations

import random

import attrs
import trio

from kubelet.api import Pod
from kubelet.goformat import parse_time
from kubelet.pleg import PodLifecycleEvent
from kubelet.pods import PodManager, PodWorkers
from kubelet.pods.syncloop import SyncLoop, SyncLoopParts
from kubelet.pods.workers import SyncResult
from kubelet.sources import PodOperation, PodUpdate
from kubelet.testing.builders import make_container, make_pod

DEADLINE = "2027-01-15T08:00:05Z"


class _Syncer:
    async def sync_pod(self, pod: object) -> SyncResult:
        return SyncResult()

    async def terminate_pod(self, pod: object, grace: int | None) -> None:
        return None


class _Workers(PodWorkers):
    def __init__(self) -> None:
        super().__init__(_Syncer())
        self.asked: list[tuple[str, str, int | None]] = []

    def terminate(self, pod: Pod, grace: int | None = None, *, remove: bool = False) -> None:
        self.asked.append(("terminate", pod.uid, grace))

    def sync(self, pod: Pod) -> None:
        self.asked.append(("sync", pod.uid, None))


def loop_at(now: float) -> SyncLoop:
    """A loop that admits no pod at all (max pods 0), its wall clock at ``now``."""
    _, updates = trio.open_memory_channel[PodUpdate](0)
    _, events = trio.open_memory_channel[PodLifecycleEvent](0)
    return SyncLoop(
        SyncLoopParts(
            updates=updates,
            pleg_events=events,
            pods=PodManager(),
            workers=_Workers(),  # type: ignore[arg-type]
            housekeeper=object(),  # type: ignore[arg-type]
            sources_ready=lambda seen: True,
            max_pods=0,
            rng=random.Random(0),
            wall_clock=lambda: now,
        )
    )


def deleted(uid: str) -> Pod:
    pod = make_pod(make_container(), name=uid, uid=uid)
    meta = attrs.evolve(pod.metadata, deletion_timestamp=DEADLINE, deletion_grace_period_seconds=30)
    return attrs.evolve(pod, metadata=meta)


async def test_a_pod_added_while_being_deleted_is_terminated_with_what_is_left() -> None:
    """Neither admitted (it would be refused here) nor synced: terminated with the grace
    left before its deletionTimestamp."""
    deadline = parse_time(DEADLINE)
    assert deadline is not None
    loop = loop_at(deadline - 2.5)
    await loop._handle_update(PodUpdate(PodOperation.ADD, "api", (deleted("gone"),)))
    assert loop.workers.asked == [("terminate", "gone", 3)]  # type: ignore[attr-defined]
    assert loop.rejected == {}
    assert "gone" in loop.pods
