"""Pod workers: one Trio task per pod UID; a pod's life is that task's life.

The syncLoop calls ``update`` (never blocks). Each worker runs syncs one at a time;
updates that arrive while it is busy coalesce (the newest pod spec wins, none is lost:
the worker syncs again with it as soon as the current sync ends). A pod moves
syncing → terminating → terminated. A termination request cancels a sync in flight; a
shorter grace period cancels a termination in flight and restarts it with the new grace
(every step is idempotent). A failed sync is reported to the syncLoop (which backs off
that pod alone) and never touches other pods.

Static pods that share a full name (an edited manifest gives the pod a new UID) never
run side by side: the new one waits until the old one has terminated.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs
import trio

from kubelet.api import Pod
from kubelet.cri import trace
from kubelet.status import is_terminal_phase

log = logging.getLogger(__name__)


class PodPhase(enum.Enum):
    """Where a pod worker is in the pod's life (not the API pod phase)."""

    SYNCING = "syncing"
    TERMINATING = "terminating"
    TERMINATED = "terminated"


@attrs.frozen
class SyncResult:
    """What one sync achieved. ``requeue_after``: seconds until the pod needs another
    sync (a back-off expiring), None for the normal resync period. ``error``: why the
    sync failed, None when it succeeded (a pod in back-off is not a failure). ``finished``:
    the pod is Succeeded or Failed and holds no resources of the node any more."""

    requeue_after: float | None = None
    error: str | None = None
    finished: bool = False
    deadline_in: float | None = None
    """Seconds until the pod's active deadline runs out: it is synced then at the latest."""


@attrs.frozen
class WorkerResult:
    """A worker finished a step of pod ``uid`` (a sync, or a termination that failed)."""

    uid: str
    result: SyncResult


class PodSyncer(Protocol):
    """What the workers drive (``syncer.KubeletPodSyncer`` over the CRI; fakes in tests)."""

    async def sync_pod(self, pod: Pod) -> SyncResult: ...

    async def terminate_pod(self, pod: Pod, grace: int | None) -> None: ...


@attrs.define
class PodWorker:
    """One pod's worker state. Read-only outside this module (the debug console shows it)."""

    uid: str
    pod: Pod
    phase: PodPhase = PodPhase.SYNCING
    wake: trio.Event = attrs.field(factory=trio.Event)
    pending: bool = False
    terminate_requested: bool = False
    remove_when_terminated: bool = False
    restart_after_termination: bool = False
    grace: int | None = None
    syncs: int = 0
    last_result: SyncResult | None = None
    finished: bool = False
    """The last sync found the pod finished (Succeeded or Failed)."""
    last_error: str | None = None
    last_sync_end: float | None = None
    busy: bool = False
    scope: trio.CancelScope | None = None
    terminated: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)

    @property
    def static(self) -> bool:
        return self.pod.is_static


def shorter_grace(current: int | None, new: int | None) -> int | None:
    """Grace can only shrink, as upstream's pod workers: keep the smaller of two known values."""
    if current is None:
        return new
    if new is None:
        return current
    return min(current, new)


class PodWorkers:
    """The pod-workers nursery and the map uid → worker (``run`` in the pod lifecycle's
    nursery); each step's result goes to ``results``, the syncLoop's inbox."""

    def __init__(
        self,
        syncer: PodSyncer,
        results: trio.MemorySendChannel[WorkerResult] | None = None,
        on_terminated: Callable[[str], Awaitable[None] | None] | None = None,
        on_restart: Callable[[Pod], None] | None = None,
    ) -> None:
        self._syncer = syncer
        self._on_restart = on_restart
        """Called when a pod runs again after its termination because its UID came back
        (``kubelet_restarted_pods_total``)."""
        self._results = results
        """Where each step's result goes (the syncLoop's inbox; unbounded: never blocks)."""
        self._on_terminated = on_terminated
        self._nursery: trio.Nursery | None = None
        self.workers: dict[str, PodWorker] = {}
        self.on_change: Callable[[str], None] | None = None
        """Called with a pod's UID after anything ``is_active`` reads of it may have
        changed (admission keeps its running sum of active pods' requests by it)."""
        self._static_by_name: dict[str, dict[str, PodWorker]] = {}
        """full name → uid → worker, static pods only (edited manifests share a name)."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own every pod task; returns only when cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    # -- requests from the syncLoop -----------------------------------------------------

    def sync(self, pod: Pod) -> None:
        """Drive ``pod`` toward its spec (start its worker if it has none). A pod being
        deleted is only ever terminated: never started, whoever asks."""
        if pod.metadata.deletion_timestamp is not None:
            self.terminate(pod, pod.metadata.deletion_grace_period_seconds)
            return
        worker = self.workers.get(pod.uid)
        if worker is None:
            self._start(PodWorker(pod.uid, pod))
            return
        worker.pod = pod
        self._changed(pod.uid)
        if worker.terminate_requested:
            if worker.remove_when_terminated:
                # the same UID came back (e.g. a static manifest restored): run it again
                # once the old instance is fully gone
                worker.restart_after_termination = True
                worker.remove_when_terminated = False
            return
        self._poke(worker)

    def refresh(self, pod: Pod) -> None:
        """The API's status of ``pod`` changed (a RECONCILE): the next step reads it (the
        conditions others own), without a sync of its own."""
        worker = self.workers.get(pod.uid)
        if worker is not None:
            worker.pod = pod
            self._changed(pod.uid)

    def terminate(self, pod: Pod, grace: int | None = None, *, remove: bool = False) -> None:
        """Stop ``pod`` (with at most ``grace`` seconds); ``remove`` forgets it afterwards."""
        worker = self.workers.get(pod.uid)
        if worker is None:
            self._start(
                PodWorker(
                    pod.uid,
                    pod,
                    terminate_requested=True,
                    grace=grace,
                    remove_when_terminated=remove,
                )
            )
            return
        worker.pod = pod
        worker.remove_when_terminated = worker.remove_when_terminated or remove
        worker.restart_after_termination = False
        new_grace = shorter_grace(worker.grace, grace)
        shrunk = worker.terminate_requested and new_grace != worker.grace
        worker.grace = new_grace
        if not worker.terminate_requested:
            worker.terminate_requested = True
            if worker.scope is not None and worker.phase is PodPhase.SYNCING:
                worker.scope.cancel()  # a sync in flight gives way to termination
        elif shrunk and worker.scope is not None and worker.phase is PodPhase.TERMINATING:
            worker.scope.cancel()  # restart termination with the shorter grace
        self._changed(pod.uid)
        self._poke(worker)

    def requeue(self, uid: str) -> None:
        """Run the pod's pending work again (a sync, or a termination that failed)."""
        worker = self.workers.get(uid)
        if worker is not None and worker.phase is not PodPhase.TERMINATED:
            self._poke(worker)

    def forget(self, uid: str) -> None:
        """Drop a terminated worker that was not marked for removal."""
        worker = self.workers.get(uid)
        if worker is not None and worker.phase is PodPhase.TERMINATED:
            worker.remove_when_terminated = True
            self._poke(worker)

    # -- queries -------------------------------------------------------------------------

    def _changed(self, uid: str) -> None:
        if self.on_change is not None:
            self.on_change(uid)

    def phase(self, uid: str) -> PodPhase | None:
        worker = self.workers.get(uid)
        return None if worker is None else worker.phase

    def busy(self) -> bool:
        """Some pod's worker is syncing or terminating its pod right now."""
        return any(w.busy or w.phase is PodPhase.TERMINATING for w in self.workers.values())

    def is_known(self, uid: str) -> bool:
        return uid in self.workers

    def is_active(self, uid: str) -> bool:
        """The pod holds (or will hold) the node's resources: upstream's
        ``filterOutInactivePods``. A finished pod (Succeeded or Failed, by the API or by
        its last sync) is inactive unless it is being terminated; a terminated one too."""
        worker = self.workers.get(uid)
        if worker is None or worker.phase is PodPhase.TERMINATED:
            return False
        if worker.terminate_requested:
            return True
        return not (worker.finished or is_terminal_phase(worker.pod.status.phase))

    async def wait_terminated(self, uid: str) -> None:
        worker = self.workers.get(uid)
        if worker is not None:
            await worker.terminated.wait()

    # -- the per-pod task ------------------------------------------------------------------

    def _start(self, worker: PodWorker) -> None:
        if self._nursery is None:
            raise RuntimeError("PodWorkers.run has not started")
        self.workers[worker.uid] = worker
        self._changed(worker.uid)
        if worker.static:
            self._static_by_name.setdefault(worker.pod.full_name, {})[worker.uid] = worker
        worker.pending = True
        worker.wake.set()
        self._nursery.start_soon(self._pod_task, worker, name=f"pod-worker {worker.pod.key}")

    def _poke(self, worker: PodWorker) -> None:
        worker.pending = True
        worker.wake.set()

    async def _wait_for_static_predecessor(self, worker: PodWorker) -> None:
        """An edited static pod waits for the old UID of the same full name to stop."""
        while worker.static and not worker.terminate_requested:
            same_name = self._static_by_name.get(worker.pod.full_name, {})
            blocking = [
                other
                for other in same_name.values()
                if other is not worker and other.phase is not PodPhase.TERMINATED
            ]
            if not blocking:
                return
            log.info(
                "static pod %s waits for its previous instance %s to terminate",
                worker.pod.key,
                blocking[0].uid,
            )
            await blocking[0].terminated.wait()

    async def _pod_task(self, worker: PodWorker) -> None:
        trace.POD.set(worker.pod.full_name)  # names this pod's CRI calls in a timing trace
        try:
            await self._wait_for_static_predecessor(worker)
            while True:
                await worker.wake.wait()
                worker.wake = trio.Event()
                worker.pending = False
                if worker.phase is PodPhase.TERMINATED:
                    if worker.remove_when_terminated:
                        return
                    if worker.restart_after_termination:
                        self._restart(worker)
                    else:
                        continue
                if worker.terminate_requested:
                    await self._terminate(worker)
                    if worker.phase is PodPhase.TERMINATED:
                        if worker.remove_when_terminated:
                            return
                        if worker.restart_after_termination:
                            self._restart(worker)
                            worker.wake.set()
                    continue
                await self._sync(worker)
        finally:
            worker.done.set()
            if self.workers.get(worker.uid) is worker and worker.remove_when_terminated:
                del self.workers[worker.uid]
                self._changed(worker.uid)
                same_name = self._static_by_name.get(worker.pod.full_name, {})
                same_name.pop(worker.uid, None)
                if not same_name:
                    self._static_by_name.pop(worker.pod.full_name, None)

    def _restart(self, worker: PodWorker) -> None:
        if self._on_restart is not None:
            self._on_restart(worker.pod)
        self._reset(worker)

    def _reset(self, worker: PodWorker) -> None:
        worker.phase = PodPhase.SYNCING
        worker.terminate_requested = False
        worker.restart_after_termination = False
        worker.grace = None
        worker.terminated = trio.Event()
        worker.pending = True
        self._changed(worker.uid)

    async def _sync(self, worker: PodWorker) -> None:
        result: SyncResult | None = None
        with trio.CancelScope() as scope:
            worker.scope = scope
            worker.busy = True
            try:
                result = await self._syncer.sync_pod(worker.pod)
            except Exception as exc:
                log.exception("sync of pod %s failed", worker.pod.key)
                result = SyncResult(error=f"{type(exc).__name__}: {exc}")
            finally:
                worker.scope = None
                worker.busy = False
        worker.syncs += 1
        worker.last_sync_end = trio.current_time()
        if result is None:  # cancelled by a termination request: loop around
            worker.wake.set()
            return
        worker.last_result = result
        worker.last_error = result.error
        worker.finished = result.finished
        self._changed(worker.uid)
        self._report(worker.uid, result)

    def _report(self, uid: str, result: SyncResult) -> None:
        if self._results is None:
            return
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            self._results.send_nowait(WorkerResult(uid, result))  # the loop is gone: shutdown

    async def _terminate(self, worker: PodWorker) -> None:
        worker.phase = PodPhase.TERMINATING
        with trio.CancelScope() as scope:
            worker.scope = scope
            worker.busy = True
            try:
                await self._syncer.terminate_pod(worker.pod, worker.grace)
            except Exception as exc:
                log.exception("termination of pod %s failed; will retry", worker.pod.key)
                worker.last_error = f"{type(exc).__name__}: {exc}"
                self._report(worker.uid, SyncResult(error=worker.last_error))
                return
            finally:
                worker.scope = None
                worker.busy = False
        if scope.cancelled_caught:
            worker.wake.set()  # grace shrank: terminate again with the new grace
            return
        worker.phase = PodPhase.TERMINATED
        self._changed(worker.uid)
        worker.last_error = None
        worker.terminated.set()
        if self._on_terminated is not None:
            outcome = self._on_terminated(worker.uid)
            if outcome is not None:
                await outcome
