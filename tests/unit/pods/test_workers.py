"""Pod workers: coalescing, termination, grace shrink, static-pod gating (fake clock)."""

from __future__ import annotations

import math

import attrs
import pytest
import trio
import trio.testing

from kubelet.api import Pod
from kubelet.pods import PodWorkers
from kubelet.pods.workers import PodPhase, PodSyncer, SyncResult, WorkerResult, shorter_grace
from kubelet.pods.workqueue import WorkQueue
from kubelet.testing.builders import make_pod


def pod(uid: str = "u1", name: str = "web", *, version: str = "1", static: bool = False) -> Pod:
    annotations = {"v": version}
    if static:
        annotations["kubernetes.io/config.source"] = "file"
    return make_pod(name=name, uid=uid, annotations=annotations)


@attrs.define
class RecordingSyncer(PodSyncer):
    sync_takes: float = 0.0
    terminate_takes: float = 0.0
    fail_uids: set[str] = attrs.field(factory=set)
    log: list[tuple[float, str, str, object]] = attrs.field(factory=list)

    async def sync_pod(self, pod: Pod) -> SyncResult:
        self.log.append((trio.current_time(), "sync-start", pod.uid, pod.metadata.annotations["v"]))
        await trio.sleep(self.sync_takes)
        if pod.uid in self.fail_uids:
            raise RuntimeError("boom")
        self.log.append((trio.current_time(), "sync-end", pod.uid, pod.metadata.annotations["v"]))
        return SyncResult()

    async def terminate_pod(self, pod: Pod, grace: int | None) -> None:
        self.log.append((trio.current_time(), "term-start", pod.uid, grace))
        await trio.sleep(self.terminate_takes)
        self.log.append((trio.current_time(), "term-end", pod.uid, grace))

    def events(self, kind: str) -> list[tuple[float, str, str, object]]:
        return [e for e in self.log if e[1] == kind]


async def with_workers(
    syncer: RecordingSyncer, nursery: trio.Nursery, restarted: list[Pod] | None = None
) -> PodWorkers:
    send, receive = trio.open_memory_channel[WorkerResult](math.inf)
    on_restart = restarted.append if restarted is not None else None
    workers = PodWorkers(syncer, results=send, on_restart=on_restart)
    workers.results = receive  # type: ignore[attr-defined]
    await nursery.start(workers.run)
    return workers


async def test_updates_to_a_busy_pod_coalesce(autojump_clock: trio.abc.Clock) -> None:
    syncer = RecordingSyncer(sync_takes=5)
    async with trio.open_nursery() as nursery:
        workers = await with_workers(syncer, nursery)
        workers.sync(pod(version="1"))
        await trio.sleep(1)
        for v in ("2", "3", "4"):
            workers.sync(pod(version=v))
        await trio.sleep(20)
        nursery.cancel_scope.cancel()
    assert [(e[0], e[3]) for e in syncer.events("sync-start")] == [(0, "1"), (5, "4")]


async def test_terminate_cancels_sync_then_removes(autojump_clock: trio.abc.Clock) -> None:
    syncer = RecordingSyncer(sync_takes=100, terminate_takes=3)
    async with trio.open_nursery() as nursery:
        workers = await with_workers(syncer, nursery)
        p = pod()
        workers.sync(p)
        await trio.sleep(1)
        workers.terminate(p, 30, remove=True)
        await trio.testing.wait_all_tasks_blocked()
        assert workers.phase("u1") is PodPhase.TERMINATING
        await trio.sleep(10)
        assert not workers.is_known("u1")
        nursery.cancel_scope.cancel()
    assert syncer.events("sync-end") == []
    assert [(e[0], e[3]) for e in syncer.events("term-end")] == [(4, 30)]


async def test_a_pod_being_deleted_is_terminated_never_synced(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A sync asked for a pod with a deletion timestamp (a restarted kubelet's first look
    at a pod deleted meanwhile) terminates it with its deletion grace, as upstream's
    UpdatePod does; a later sync of it starts nothing either."""
    syncer = RecordingSyncer()
    deleted = attrs.evolve(
        pod(),
        metadata=attrs.evolve(
            pod().metadata,
            deletion_timestamp="2027-01-15T08:00:05Z",
            deletion_grace_period_seconds=5,
        ),
    )
    async with trio.open_nursery() as nursery:
        workers = await with_workers(syncer, nursery)
        workers.sync(deleted)
        await trio.sleep(1)
        assert workers.phase("u1") is PodPhase.TERMINATED
        workers.sync(deleted)
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert syncer.events("sync-start") == []
    assert [(e[2], e[3]) for e in syncer.events("term-end")] == [("u1", 5)]


async def test_shorter_grace_restarts_termination(autojump_clock: trio.abc.Clock) -> None:
    syncer = RecordingSyncer(terminate_takes=30)
    async with trio.open_nursery() as nursery:
        workers = await with_workers(syncer, nursery)
        p = pod()
        workers.terminate(p, 30)
        await trio.sleep(5)
        workers.terminate(p, 60)  # longer: ignored
        await trio.sleep(1)
        workers.terminate(p, 10)  # shorter: restart with 10
        await trio.sleep(100)
        nursery.cancel_scope.cancel()
    assert [(e[0], e[3]) for e in syncer.events("term-start")] == [(0, 30), (6, 10)]
    assert [(e[0], e[3]) for e in syncer.events("term-end")] == [(36, 10)]


def test_grace_only_shrinks() -> None:
    assert shorter_grace(None, 30) == 30
    assert shorter_grace(30, None) == 30
    assert shorter_grace(30, 60) == 30
    assert shorter_grace(30, 10) == 10


async def test_failed_sync_reports_and_others_continue(autojump_clock: trio.abc.Clock) -> None:
    syncer = RecordingSyncer(sync_takes=1, fail_uids={"bad"})
    async with trio.open_nursery() as nursery:
        workers = await with_workers(syncer, nursery)
        workers.sync(pod("bad", "bad"))
        workers.sync(pod("good", "good"))
        await trio.sleep(2)
        nursery.cancel_scope.cancel()
    results = {}
    while True:
        try:
            done = workers.results.receive_nowait()  # type: ignore[attr-defined]
        except trio.WouldBlock:
            break
        results[done.uid] = done.result
    assert results["bad"].error == "RuntimeError: boom"
    assert results["good"].error is None
    assert workers.workers["bad"].last_error == "RuntimeError: boom"


async def test_edited_static_pod_waits_for_its_predecessor(autojump_clock: trio.abc.Clock) -> None:
    syncer = RecordingSyncer(terminate_takes=7)
    async with trio.open_nursery() as nursery:
        workers = await with_workers(syncer, nursery)
        old = pod("old", "etcd-node1", static=True)
        workers.sync(old)
        await trio.sleep(1)
        workers.terminate(old, None, remove=True)
        workers.sync(pod("new", "etcd-node1", static=True))
        await trio.sleep(20)
        nursery.cancel_scope.cancel()
    new_start = next(e for e in syncer.events("sync-start") if e[2] == "new")
    old_end = next(e for e in syncer.events("term-end") if e[2] == "old")
    assert new_start[0] >= old_end[0] == 8


async def test_same_uid_coming_back_restarts_after_termination(
    autojump_clock: trio.abc.Clock,
) -> None:
    syncer = RecordingSyncer(terminate_takes=5)
    restarted: list[Pod] = []
    async with trio.open_nursery() as nursery:
        workers = await with_workers(syncer, nursery, restarted)
        p = pod()
        workers.sync(p)
        await trio.sleep(1)
        workers.terminate(p, None, remove=True)
        await trio.sleep(1)
        workers.sync(pod(version="2"))
        await trio.sleep(10)
        assert workers.phase("u1") is PodPhase.SYNCING
        nursery.cancel_scope.cancel()
    assert [e[0] for e in syncer.events("sync-start")] == [0, 6]
    assert [r.metadata.annotations["v"] for r in restarted] == ["2"]  # counted once


async def test_requeue_reruns_the_sync(autojump_clock: trio.abc.Clock) -> None:
    syncer = RecordingSyncer()
    async with trio.open_nursery() as nursery:
        workers = await with_workers(syncer, nursery)
        workers.sync(pod())
        await trio.sleep(1)
        workers.requeue("u1")
        workers.requeue("unknown")
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert len(syncer.events("sync-start")) == 2


async def test_workqueue_orders_and_replaces(autojump_clock: trio.abc.Clock) -> None:
    q = WorkQueue()
    q.enqueue("a", 5)
    q.enqueue("b", 2)
    q.enqueue("a", 1)  # replaces a's 5 s
    assert q.next_due() == pytest.approx(1)
    await trio.sleep(1.5)
    assert q.pop_due() == ["a"]
    assert q.next_due() == pytest.approx(2)
    q.forget("b")
    assert q.next_due() == float("inf")
    assert len(q) == 0


@attrs.define
class FinishingSyncer(RecordingSyncer):
    finished_uids: set[str] = attrs.field(factory=set)

    async def sync_pod(self, pod: Pod) -> SyncResult:
        await super().sync_pod(pod)
        return SyncResult(finished=pod.uid in self.finished_uids)


async def test_finished_pods_are_not_active(autojump_clock: trio.abc.Clock) -> None:
    """filterOutInactivePods: a pod Succeeded/Failed (API or last sync) or terminated
    does not hold the node's resources; one being terminated still does."""
    from kubelet.api import PodStatus

    syncer = FinishingSyncer(finished_uids={"u2"})
    async with trio.open_nursery() as nursery:
        workers = await with_workers(syncer, nursery)
        terminal = attrs.evolve(pod("u3", "c"), status=PodStatus(phase="Failed"))
        for p in (pod("u1", "a"), pod("u2", "b"), terminal):
            workers.sync(p)
        await trio.sleep(1)
        assert [workers.is_active(u) for u in ("u1", "u2", "u3", "nope")] == [
            True,
            False,
            False,
            False,
        ]
        workers.terminate(pod("u2", "b"), 30)
        assert workers.is_active("u2")
        await trio.sleep(1)
        assert workers.phase("u2") is PodPhase.TERMINATED
        assert not workers.is_active("u2")
        nursery.cancel_scope.cancel()


async def test_busy_while_a_pod_is_synced_or_terminated(autojump_clock: trio.abc.Clock) -> None:
    syncer = RecordingSyncer(sync_takes=2.0, terminate_takes=3.0)
    async with trio.open_nursery() as nursery:
        workers = await with_workers(syncer, nursery)
        assert not workers.busy()
        workers.sync(pod())
        await trio.sleep(1)
        assert workers.busy()  # syncing
        await trio.sleep(2)
        assert not workers.busy()
        workers.terminate(pod(), 30)
        await trio.sleep(1)
        assert workers.busy()  # terminating
        await trio.sleep(3)
        assert not workers.busy()
        nursery.cancel_scope.cancel()
