"""When the syncLoop syncs a pod next (the periodic resync, a back-off, an error, and at
the latest the pod's active deadline), when it wakes, and what housekeeping reads."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Collection

import pytest
import trio

from kubelet.api import Pod
from kubelet.pleg import PodLifecycleEvent, pod_from_runtime
from kubelet.pods import PodManager, PodWorkers
from kubelet.pods.syncloop import (
    HOUSEKEEPING_PERIOD,
    SYNC_ERROR_BACKOFF,
    TRIM_AT_LATEST,
    OrphanPod,
    SyncLoop,
    SyncLoopParts,
)
from kubelet.pods.workers import SyncResult, WorkerResult
from kubelet.sources import PodOperation, PodStorage, PodUpdate


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
        SyncLoopParts(
            updates=updates,
            pleg_events=events,
            pods=PodManager(),
            workers=PodWorkers(_Syncer()),
            housekeeper=_Housekeeper(),  # type: ignore[arg-type]
            sources_ready=lambda seen: True,
            sync_frequency=60.0,
            rng=random.Random(0),
        )
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


class _CountingHousekeeper:
    """Housekeeping over a scripted runtime: the PLEG's last listing (``listed``, None
    when not recent) and what a fresh listing would show (``fresh``)."""

    def __init__(self, listed: set[str] | None, fresh: list[OrphanPod]) -> None:
        self.listed = listed
        self.fresh = fresh
        self.passes = 0
        self.listings = 0
        self.in_use: list[set[str]] = []

    def tidy(self) -> None:
        self.passes += 1

    def listed_uids(self) -> set[str] | None:
        return self.listed

    async def runtime_pods(self) -> list[OrphanPod]:
        self.listings += 1
        return self.fresh

    def orphan_as_pod(self, orphan: OrphanPod) -> Pod:
        return pod_from_runtime(orphan.uid, orphan.namespace, orphan.name)

    def orphan_pod_dirs(self, in_use: set[str]) -> None:
        self.in_use.append(in_use)

    def orphan_mirror(self, mirror: Pod) -> None:
        raise AssertionError("no mirror pods here")

    def orphan_pod_cgroups(self, known: Callable[[str], bool]) -> None:
        pass


class _RecordingWorkers(PodWorkers):
    def __init__(self) -> None:
        super().__init__(_Syncer())
        self.terminated: list[str] = []
        self.synced: list[str] = []

    def terminate(self, pod: Pod, grace: int | None = None, *, remove: bool = False) -> None:
        self.terminated.append(pod.uid)

    def sync(self, pod: Pod) -> None:
        self.synced.append(pod.uid)


def housekeeping_loop(
    keeper: _CountingHousekeeper,
    wanted: set[str],
    results: trio.MemoryReceiveChannel[WorkerResult] | None = None,
    ready: Callable[[Collection[str]], bool] = lambda seen: True,
    trim_heap: Callable[[], Awaitable[object]] | None = None,
    updates: trio.MemoryReceiveChannel[PodUpdate] | None = None,
) -> SyncLoop:
    if updates is None:
        _, updates = trio.open_memory_channel[PodUpdate](0)
    _, events = trio.open_memory_channel[PodLifecycleEvent](0)
    pods = PodManager()
    for uid in wanted:
        pods.upsert(pod_from_runtime(uid, "default", uid))
    return SyncLoop(
        SyncLoopParts(
            updates=updates,
            pleg_events=events,
            pods=pods,
            workers=_RecordingWorkers(),
            housekeeper=keeper,
            sources_ready=ready,
            results=results,
            trim_heap=trim_heap,
        )
    )


async def test_the_loop_wakes_only_when_work_is_due(autojump_clock: trio.abc.Clock) -> None:
    """Nothing queued: the loop wakes for housekeeping alone (every 2 s), not every
    second; a pod's result queues it, and the loop wakes at its due time, between two
    housekeeping passes."""
    keeper = _CountingHousekeeper({"a"}, [])
    send, results = trio.open_memory_channel[WorkerResult](1)
    loop = housekeeping_loop(keeper, {"a"}, results)
    requeued: list[float] = []
    loop.workers.requeue = lambda uid: requeued.append(trio.current_time())  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        await nursery.start(loop.run)
        await trio.sleep(20.5)
        assert keeper.passes == 10
        assert loop.iterations == 11  # the first, then one per housekeeping pass
        await send.send(WorkerResult("a", SyncResult(requeue_after=0.7)))
        await trio.sleep(2)
        assert requeued == [pytest.approx(start + 21.2)]
        assert loop.iterations == 14  # the result, the due pod, one housekeeping pass
        nursery.cancel_scope.cancel()


async def test_housekeeping_at_rest_takes_the_pleg_listing_as_it_is() -> None:
    keeper = _CountingHousekeeper({"a", "b"}, [OrphanPod("zz", "x", "default")])
    loop = housekeeping_loop(keeper, {"a", "b", "c"})
    await loop.housekeeping()
    assert keeper.listings == 0 and loop.workers.terminated == []  # type: ignore[attr-defined]
    assert keeper.in_use == [{"a", "b", "c"}]


async def test_housekeeping_acts_on_an_orphan_only_when_a_fresh_listing_shows_it() -> None:
    """An orphan in the PLEG's listing makes housekeeping list the runtime now; only the
    orphans of that listing go (here "gone" was removed meanwhile, "ghost" stays)."""
    ghost = OrphanPod("ghost", "ghost", "default")
    keeper = _CountingHousekeeper({"a", "gone", "ghost"}, [OrphanPod("a", "a", "default"), ghost])
    loop = housekeeping_loop(keeper, {"a"})
    await loop.housekeeping()
    assert keeper.listings == 1
    assert loop.workers.terminated == ["ghost"]  # type: ignore[attr-defined]
    assert keeper.in_use == [{"a", "ghost"}]


async def test_housekeeping_lists_the_runtime_when_the_pleg_listing_is_old() -> None:
    keeper = _CountingHousekeeper(None, [OrphanPod("a", "a", "default")])
    loop = housekeeping_loop(keeper, {"a"})
    await loop.housekeeping()
    assert keeper.listings == 1 and loop.workers.terminated == []  # type: ignore[attr-defined]


async def test_a_source_is_ready_once_the_loop_handled_its_pods() -> None:
    """A restarted kubelet: the file source has SET (the config knows its pods) but the
    update carrying them has not reached the loop yet. Housekeeping must not take the
    pod the runtime runs for an orphan; upstream marks a source seen only as its syncLoop
    handles the source's update."""
    storage = PodStorage(["file"], clock=lambda: "2026-01-01T00:00:00Z")
    running = pod_from_runtime("keep", "default", "keep")
    pending = storage.merge("file", PodOperation.SET, [running])
    assert storage.sources_ready()  # the config has seen the file source
    keeper = _CountingHousekeeper({"keep", "ghost"}, [OrphanPod("keep", "keep", "default")])
    loop = housekeeping_loop(keeper, set(), ready=storage.seen_all_sources)
    await loop.housekeeping()
    assert keeper.listings == 0 and loop.workers.terminated == []  # type: ignore[attr-defined]
    for update in pending:
        await loop._handle_update(update)
    assert loop.workers.synced == ["keep"]  # type: ignore[attr-defined]
    keeper.fresh = [OrphanPod("keep", "keep", "default"), OrphanPod("ghost", "g", "default")]
    await loop.housekeeping()
    assert loop.workers.terminated == ["ghost"]  # type: ignore[attr-defined]


async def test_the_heap_is_trimmed_once_pods_that_came_have_started(
    autojump_clock: trio.abc.Clock,
) -> None:
    """No pod came or went: housekeeping never trims. Pods came: the first housekeeping
    with every worker idle trims the heap, once; one busy worker puts it off."""
    trims: list[float] = []

    async def trim() -> None:
        trims.append(trio.current_time())

    keeper = _CountingHousekeeper(set(), [])
    send, updates = trio.open_memory_channel[PodUpdate](0)
    loop = housekeeping_loop(keeper, set(), trim_heap=trim, updates=updates)
    busy = [False]
    loop.workers.busy = lambda: busy[0]  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        await nursery.start(loop.run)
        await trio.sleep(10.5)  # housekeeping at 2, 4, ... 10 s
        assert keeper.passes == 5 and trims == []
        busy[0] = True  # the new pods' workers start them
        await send.send(
            PodUpdate(PodOperation.ADD, "file", (pod_from_runtime("p", "default", "p"),))
        )
        await trio.sleep(5)
        assert trims == []
        busy[0] = False
        await trio.sleep(2)
        assert trims == [pytest.approx(start + 16)]
        await trio.sleep(10)
        assert len(trims) == 1  # nothing came or went since
        busy[0] = True  # a worker that stays busy puts it off a minute at the most
        await send.send(
            PodUpdate(PodOperation.REMOVE, "file", (pod_from_runtime("p", "default", "p"),))
        )
        removed = trio.current_time()
        await trio.sleep(TRIM_AT_LATEST + HOUSEKEEPING_PERIOD + 0.5)
        assert len(trims) == 2
        assert TRIM_AT_LATEST <= trims[1] - removed <= TRIM_AT_LATEST + HOUSEKEEPING_PERIOD
        nursery.cancel_scope.cancel()


async def test_a_message_that_takes_long_is_handled_to_its_end(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Handling one message may take longer than the loop's next wake-up (a critical
    pod's preemption waits for its victims to stop): only the wait for the next message
    has the wake-up's deadline, so the handling is never cut short."""
    keeper = _CountingHousekeeper(set(), [])
    send, updates = trio.open_memory_channel[PodUpdate](0)
    loop = housekeeping_loop(keeper, set(), updates=updates)
    handled: list[float] = []

    async def slow_update(update: PodUpdate) -> None:
        await trio.sleep(30)  # a victim's grace period
        handled.append(trio.current_time())

    loop._handle_update = slow_update  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        await nursery.start(loop.run)
        await send.send(PodUpdate(PodOperation.ADD, "file", ()))
        await trio.sleep(40)
        assert handled == [pytest.approx(start + 30)]
        nursery.cancel_scope.cancel()
