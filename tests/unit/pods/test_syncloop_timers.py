"""When the syncLoop syncs a pod next: the periodic resync, a back-off, an error, and at
the latest the pod's active deadline (its timer)."""

from __future__ import annotations

import random

import pytest
import trio

from kubelet.pleg.generator import PodLifecycleEvent
from kubelet.pods.manager import PodManager
from kubelet.pods.syncloop import SYNC_ERROR_BACKOFF, SyncLoop
from kubelet.pods.workers import PodWorkers, SyncResult
from kubelet.sources.podconfig import PodUpdate


class _Syncer:
    async def sync_pod(self, pod: object) -> SyncResult:
        return SyncResult()

    async def terminate_pod(self, pod: object, grace: int | None) -> None:
        return None


class _Housekeeper:
    pass


def make_loop() -> SyncLoop:
    _, updates = trio.open_memory_channel[PodUpdate](0)
    _, events = trio.open_memory_channel[PodLifecycleEvent](0)
    return SyncLoop(
        updates=updates,
        pleg_events=events,
        pods=PodManager(),
        workers=PodWorkers(_Syncer()),
        housekeeper=_Housekeeper(),  # type: ignore[arg-type]
        sources_ready=lambda: True,
        sync_frequency=60.0,
        rng=random.Random(0),
    )


@pytest.mark.parametrize(
    ("result", "low", "high"),
    [
        (SyncResult(), 60.0, 90.0),
        (SyncResult(deadline_in=3600.0), 60.0, 90.0),  # a far deadline keeps the resync
        (SyncResult(deadline_in=7.5), 7.5, 7.5),
        (SyncResult(requeue_after=20.0, deadline_in=3.0), 3.0, 3.0),
        (SyncResult(requeue_after=20.0, deadline_in=30.0), 20.0, 20.0),
        (SyncResult(error="boom", deadline_in=1.0), 1.0, 1.0),
        (SyncResult(error="boom"), SYNC_ERROR_BACKOFF, SYNC_ERROR_BACKOFF),
    ],
)
async def test_next_sync(
    result: SyncResult, low: float, high: float, autojump_clock: trio.abc.Clock
) -> None:
    loop = make_loop()
    now = trio.current_time()
    loop.on_result("uid", result)
    due = loop.queue.due_at("uid")
    assert due is not None and low <= due - now <= high
