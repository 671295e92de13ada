"""The syncLoop: the one consumer of config updates, PLEG events and timers.

It never does slow work itself. It turns what it hears into requests to the pod workers
(sync, terminate) and keeps the work queue: the loop wakes at the earliest pod whose work
is due (a back-off expiring, the periodic resync) or for housekeeping, whichever comes
first, so a back-off ends on time. (Upstream also ticks every second to look for due
pods; the queue's own due time already wakes the loop for each, so a tick would find
nothing.) Every 2 s it does housekeeping: pods the runtime still holds but no source
wants are torn down — only once every source has been seen, so a restarted kubelet never
kills a pod just because the API server (or a manifest directory) has not answered yet.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import Any, Protocol

import attrs
import trio

from kubelet.api import Pod
from kubelet.decisions import is_critical_pod, remaining_deletion_grace, resize
from kubelet.events import NORMAL, WARNING, EventRecorder, pod_ref
from kubelet.pleg import EventType, PodLifecycleEvent
from kubelet.prober import ProbeKind, Result, ResultUpdate
from kubelet.sources import PodOperation, PodUpdate
from kubelet.status import is_terminal_phase, needs_readiness_reconcile

from . import fit
from .admission import AdmissionFacts, Rejection, admit
from .allocation import Allocations, Pending
from .manager import PodManager
from .preemption import Preemptor
from .resizing import judge_resize
from .workers import PodWorkers, SyncResult, WorkerResult
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

HOUSEKEEPING_PERIOD = 2.0
TRIM_AT_LATEST = 60.0
"""Seconds after pods came or went by which the heap is trimmed even if some worker is
still busy."""
SYNC_ERROR_BACKOFF = 10.0
RESYNC_JITTER = 0.5


@attrs.frozen
class HealthUpdate:
    """The pods whose allocated devices changed health: their status is generated again
    (upstream's container manager updates)."""

    pod_uids: frozenset[str]


Message = PodUpdate | PodLifecycleEvent | ResultUpdate | WorkerResult | HealthUpdate
"""What reaches the syncLoop's inbox, tagged by its type: a config update, a PLEG
event, a probe result that changed, a pod worker's finished step."""


@attrs.frozen
class OrphanPod:
    """A pod the runtime runs that no source wants: enough to tear it down."""

    uid: str
    name: str
    namespace: str


class Housekeeper(Protocol):
    """What housekeeping needs from the runtime (``housekeeping.RuntimeHousekeeper``
    over the CRI; fakes in tests). The clean-ups default to doing nothing."""

    def listed_uids(self) -> Collection[str] | None:
        """The uids of the pods in the PLEG's last listing, when it is recent enough to
        stand for the runtime (None: not recent, list afresh)."""

    async def runtime_pods(self) -> Iterable[OrphanPod]:
        """The pods the runtime holds, listed now."""

    def orphan_as_pod(self, orphan: OrphanPod) -> Pod: ...

    def tidy(self) -> None:
        """Cheap periodic clean-up of in-memory state (expired back-off entries)."""

    def orphan_pod_dirs(self, in_use: set[str]) -> None:
        """Remove pod directories on disk of pods nobody knows any more (a kubelet that
        was down while its pods were deleted leaves them behind)."""

    def orphan_mirror(self, mirror: Pod) -> None:
        """A mirror pod whose static pod is gone: delete it (without blocking the loop)."""

    def orphan_pod_cgroups(self, known: Callable[[str], bool]) -> None:
        """Remove the pod cgroups of pods nobody knows (without blocking the loop);
        ``known`` is asked about each UID just before its cgroup goes."""


@attrs.frozen(kw_only=True)
class SyncLoopParts:
    """What the syncLoop is made from: its inbox's sources, the pods and workers it
    drives, housekeeping, admission and its timing."""

    updates: trio.MemoryReceiveChannel[PodUpdate]
    pleg_events: trio.MemoryReceiveChannel[PodLifecycleEvent]
    pods: PodManager
    workers: PodWorkers
    housekeeper: Housekeeper
    sources_ready: Callable[[Collection[str]], bool]
    sync_frequency: float = 60.0
    max_pods: int = 110
    admission_facts: Callable[[], AdmissionFacts] | None = None
    on_reject: Callable[[Pod, Rejection], None] | None = None
    rng: random.Random | None = None
    probe_updates: Sequence[trio.MemoryReceiveChannel[ResultUpdate]] = ()
    results: trio.MemoryReceiveChannel[WorkerResult] | None = None
    preemptor: Preemptor | None = None
    on_orphan: Callable[[], None] | None = None
    allocations: Allocations | None = None
    on_readiness: Callable[[str, str, bool], None] | None = None
    recorder: EventRecorder | None = None
    """where a resize's verdict is announced (ResizeStarted, -Deferred, -Infeasible)"""
    on_infeasible_resize: Callable[[str], None] | None = None
    """each Infeasible verdict, by its reason detail (``kubelet_pod_infeasible_resizes``)"""
    on_deferred_accepted: Callable[[str], None] | None = None
    """a Deferred resize admitted on a retry, by its trigger"""
    health_updates: trio.MemoryReceiveChannel[HealthUpdate] | None = None
    """the container manager's word that pods' devices changed health"""
    wall_clock: Callable[[], float] | None = None
    """Reads a deleted pod's deadline (``deletionTimestamp``); None: a pod first seen
    already deleted gets its whole deletion grace period."""
    trim_heap: Callable[[], Awaitable[object]] | None = None
    """Hands the heap's free pages back (glibc's ``malloc_trim``, ``kubelet/malloc.py``,
    off the loop): at the first housekeeping with every worker idle after pods came or
    went (``TRIM_AT_LATEST`` at the latest). None: never."""


class SyncLoop:
    """The one place that decides what each pod worker does next.

    Upstream's ``syncLoopIteration``: every source of change (config, PLEG, probes, the
    workers' own results, due times) arrives in one inbox, so their order is the order
    of decisions and no two of them race over a pod. It never waits on slow work: it
    only asks the workers (which never block it) and keeps the work queue.
    """

    def __init__(self, parts: SyncLoopParts) -> None:
        p = parts
        self._wall_clock = p.wall_clock
        self._on_readiness = p.on_readiness
        """``(pod UID, container ID, ready)`` for every readiness change, before the sync
        it asks for: the status follows even while the pod's worker is busy."""
        self._preemptor = p.preemptor
        self._recorder = p.recorder
        self._on_infeasible = p.on_infeasible_resize
        self._on_deferred_accepted = p.on_deferred_accepted
        self.allocations = p.allocations if p.allocations is not None else Allocations()
        """What each pod runs with: admission counts it, never a resize's new spec."""
        self._trim_heap = p.trim_heap
        self._unsettled: float | None = None
        """when pods first came or went since the last heap trim"""
        self._trimming = False
        self._on_orphan = p.on_orphan
        """Called per runtime pod no worker knew, as housekeeping stops it
        (``kubelet_orphaned_runtime_pods_total``)."""
        self._probe_updates = tuple(p.probe_updates)
        self._results = p.results
        self._health_updates = p.health_updates
        self._updates = p.updates
        self._pleg_events = p.pleg_events
        self.pods = p.pods
        self.workers = workers = p.workers
        self.queue = WorkQueue()
        self.housekeeper = p.housekeeper
        self._sources_ready = p.sources_ready
        """upstream's SeenAllSources, asked about the sources whose updates this loop has
        handled: a source that has SET in the config but whose pods are still on their way
        here is not ready, or housekeeping would take its running pods for orphans"""
        self.handled_sources: set[str] = set()
        self._sync_frequency = p.sync_frequency
        max_pods = p.max_pods
        self._admission_facts = p.admission_facts or (lambda: AdmissionFacts(max_pods=max_pods))
        self._on_reject = p.on_reject
        self._rng = p.rng or random.Random(0)
        self.last_iteration: float | None = None
        self.iterations = 0
        self.rejected: dict[str, str] = {}
        self._active = fit.RequestSum()
        """The pods admission counts (active, not rejected), kept as workers change."""
        workers.on_change = self._update_active
        for uid in workers.workers:
            self._update_active(uid)

    def on_result(self, uid: str, result: SyncResult) -> None:
        """Pod workers report here; decides when the pod is synced next (at the latest
        when its active deadline runs out: the pod's deadline timer)."""
        if result.error is not None:
            delay = SYNC_ERROR_BACKOFF
        elif result.requeue_after is not None:
            delay = result.requeue_after
        else:
            delay = self._sync_frequency * (1.0 + self._rng.random() * RESYNC_JITTER)
        if result.deadline_in is not None:
            delay = min(delay, result.deadline_in)
        self.queue.enqueue(uid, delay)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        inbox_send, inbox = trio.open_memory_channel[Message](0)
        sources: list[trio.MemoryReceiveChannel[Any]] = [self._updates, self._pleg_events]
        sources += self._probe_updates
        if self._results is not None:
            sources.append(self._results)
        if self._health_updates is not None:
            sources.append(self._health_updates)
        async with trio.open_nursery() as nursery:
            for source in sources:
                nursery.start_soon(self._forward, source, inbox_send.clone())
            inbox_send.close()
            task_status.started()
            next_housekeeping = trio.current_time() + HOUSEKEEPING_PERIOD
            while True:
                now = trio.current_time()
                self.last_iteration = now
                self.iterations += 1
                wake_at = min(self.queue.next_due(), next_housekeeping)
                message: Message | None = None
                with trio.move_on_at(wake_at):  # the wait alone: a preemption runs to its end
                    message = await inbox.receive()
                if message is not None:
                    await self._handle(message)
                for uid in self.queue.pop_due():
                    self.workers.requeue(uid)
                if trio.current_time() >= next_housekeeping:
                    await self.housekeeping()
                    self._settle_heap(nursery)
                    next_housekeeping = trio.current_time() + HOUSEKEEPING_PERIOD

    @staticmethod
    async def _forward(
        source: trio.MemoryReceiveChannel[Message], inbox: trio.MemorySendChannel[Message]
    ) -> None:
        async with inbox:
            async for message in source:
                await inbox.send(message)

    async def _handle(self, message: Message) -> None:
        match message:
            case PodUpdate():
                await self._handle_update(message)
            case PodLifecycleEvent():
                self._handle_pleg(message)
            case ResultUpdate():
                self._handle_probe(message)
            case WorkerResult(uid=uid, result=result):
                self.on_result(uid, result)
            case HealthUpdate(pod_uids=uids):
                for uid in sorted(uids):
                    if uid in self.pods and uid not in self.rejected:
                        self.workers.requeue(uid)

    # -- config updates ------------------------------------------------------------------

    async def _handle_update(self, update: PodUpdate) -> None:
        self.handled_sources.add(update.source)
        op = update.op
        if (op is PodOperation.ADD or op is PodOperation.REMOVE) and self._unsettled is None:
            self._unsettled = trio.current_time()
        pods = update.pods
        if op is PodOperation.ADD:  # admitted oldest first, as upstream's HandlePodAdditions
            pods = tuple(sorted(pods, key=lambda p: p.metadata.creation_timestamp or ""))
        with self.allocations.batch():  # one checkpoint write for the update's pods
            for pod in pods:
                if pod.is_mirror:
                    self._handle_mirror(op, pod)
                elif op is PodOperation.ADD:
                    await self._add(pod)
                elif op is PodOperation.UPDATE:
                    self.pods.upsert(pod)
                    if pod.metadata.deletion_timestamp:
                        self.workers.terminate(pod, pod.metadata.deletion_grace_period_seconds)
                        self.retry_deferred_resizes(resize.TRIGGER_POD_UPDATED)
                    elif pod.uid not in self.rejected:
                        if self._judge_resize(pod):
                            self.retry_deferred_resizes(resize.TRIGGER_POD_RESIZED)  # may shrink
                        self.workers.sync(pod)
                elif op is PodOperation.DELETE:  # upstream handles it as an update
                    self.pods.upsert(pod)
                    self.workers.terminate(pod, pod.metadata.deletion_grace_period_seconds)
                    self.retry_deferred_resizes(resize.TRIGGER_POD_UPDATED)
                elif op is PodOperation.REMOVE:
                    self.pods.remove(pod.uid)
                    self.queue.forget(pod.uid)
                    self.rejected.pop(pod.uid, None)
                    # a pod already torn down (a graceful API delete) is synced no more: its
                    # allocation goes now (the syncer drops it after a teardown still running)
                    self.allocations.forget(pod.uid)
                    self._update_active(pod.uid)
                    self.workers.terminate(pod, None, remove=True)
                    self.retry_deferred_resizes(resize.TRIGGER_PODS_REMOVED)
                elif op is PodOperation.RECONCILE:
                    self._reconcile(pod)

    def _reconcile(self, pod: Pod) -> None:
        """Only the API's status changed: keep it (others' conditions live there), and
        sync when a readiness gate's condition no longer matches Ready (upstream's
        ``HandlePodReconcile``). A pod whose phase turns terminal here has released
        what it held: Deferred resizes are judged again (``pod_terminated``)."""
        before = self.pods.get(pod.uid)
        self.pods.upsert(pod)
        self.workers.refresh(pod)
        if (
            before is not None
            and not is_terminal_phase(before.status.phase)
            and is_terminal_phase(pod.status.phase)
        ):
            self.retry_deferred_resizes(resize.TRIGGER_POD_TERMINATED)
        known = self.workers.is_known(pod.uid) and pod.uid not in self.rejected
        if known and needs_readiness_reconcile(pod):
            self.workers.sync(pod)

    def _handle_mirror(self, op: PodOperation, mirror: Pod) -> None:
        """Mirror pods are never run: remember them, and let the static pod react."""
        if op is PodOperation.REMOVE:
            self.pods.remove_mirror(mirror)
        else:
            self.pods.set_mirror(mirror)
        for pod in self.pods.by_full_name(mirror.full_name):
            if pod.uid not in self.rejected:
                self.workers.requeue(pod.uid)

    async def _add(self, pod: Pod) -> None:
        self.pods.upsert(pod)
        if pod.metadata.deletion_timestamp is not None:
            self._add_deleted(pod)
            return
        # admitted with its allocation: the spec's resources, or (a restarted kubelet)
        # those its containers run with when a resize asks for others (upstream too)
        allocated = self.allocations.allocated(pod)
        rejection = self._admission_failure(allocated)
        if rejection is not None and self._preemptor is not None and is_critical_pod(pod):
            self.allocations.flush()  # admitted before: handed to the writer before they act
            rejection = await self._preempt(allocated, rejection)
        if rejection is not None:
            self.allocations.forget(pod.uid)
            self.rejected[pod.uid] = f"{rejection.reason}: {rejection.message}"
            self._update_active(pod.uid)
            self.pods.set_rejected(pod.uid)
            log.warning("pod %s rejected: %s: %s", pod.key, rejection.reason, rejection.message)
            if self._on_reject is not None:
                self._on_reject(pod, rejection)
            return
        self._judge_resize(pod)  # a restarted kubelet: the spec resized meanwhile
        self.workers.sync(pod)

    # -- in-place resize -------------------------------------------------------------------

    def _judge_resize(self, pod: Pod) -> bool:
        """A resize the spec asks for becomes the allocation when it fits (``resizing``),
        else waits, Deferred or Infeasible; each new verdict is announced. True: the
        allocation changed."""
        allocated = self.allocations.allocated(pod)
        if not resize.resize_requested(pod, allocated):
            self.allocations.pending.pop(pod.uid, None)
            return False
        if is_terminal_phase(pod.status.phase) or pod.metadata.deletion_timestamp:
            return False
        verdict = judge_resize(pod, allocated, self._listed_others(pod), self._admission_facts())
        generation = pod.metadata.generation or None
        if verdict is None:
            log.info("pod %s: resize admitted (generation %s)", pod.key, generation)
            self.allocations.resize(pod)
            self._update_active(pod.uid)
            self._announce(pod, NORMAL, resize.EVENT_STARTED, "started", "")
            return True
        if verdict.reason == resize.INFEASIBLE and self._on_infeasible is not None:
            self._on_infeasible(verdict.detail)
        before = self.allocations.pending.get(pod.uid)
        now = Pending(verdict.reason, verdict.message, generation)
        self.allocations.pending[pod.uid] = now
        if before != now:
            log.info("pod %s: resize %s: %s", pod.key, verdict.reason, verdict.message)
            reason = (
                resize.EVENT_INFEASIBLE
                if verdict.reason == resize.INFEASIBLE
                else resize.EVENT_DEFERRED
            )
            self._announce(pod, WARNING, reason, verdict.reason, verdict.message)
        return False

    def _announce(self, pod: Pod, kind: str, reason: str, word: str, message: str) -> None:
        if self._recorder is not None:
            text = resize.event_message(pod, word, message)
            self._recorder.record(pod_ref(pod), kind, reason, text)

    def retry_deferred_resizes(self, trigger: str) -> None:
        """Deferred resizes judged again (pods left, or shrank; ``trigger`` says which,
        upstream's ``retry_trigger``): those that fit now are admitted and their pods
        synced."""
        for uid, pending in list(self.allocations.pending.items()):
            pod = self.pods.get(uid)
            if pending.reason != resize.DEFERRED or pod is None or uid in self.rejected:
                continue
            if self._judge_resize(pod):
                if self._on_deferred_accepted is not None:
                    self._on_deferred_accepted(trigger)
                self.workers.sync(pod)

    def _add_deleted(self, pod: Pod) -> None:
        """A pod already being deleted when this kubelet first hears of it (it was down,
        or restarted in the middle of the pod's teardown): it is never admitted nor
        started, only stopped with what is left of its grace period, and its API object
        deleted once it is gone (upstream's pod workers start such a pod terminating)."""
        grace = pod.metadata.deletion_grace_period_seconds
        if self._wall_clock is not None and not self.workers.is_known(pod.uid):
            grace = remaining_deletion_grace(pod, self._wall_clock())
        self.workers.terminate(pod, grace)

    def _admission_failure(self, pod: Pod) -> Rejection | None:
        """``admission.admit`` against the active pods admitted before (a known pod is not
        admitted again). A finished pod (Succeeded or Failed) is admitted without checks
        and does not count: it never runs again."""
        if self.workers.is_known(pod.uid) or is_terminal_phase(pod.status.phase):
            return None
        return admit(pod, self._others(pod), self._admission_facts())

    def _others(self, pod: Pod) -> Sequence[Pod]:
        if pod.uid in self._active:  # never for a pod not yet admitted: the slow way
            return self._listed_others(pod)
        return fit.ActivePods(self._active, lambda: self._listed_others(pod))

    def _listed_others(self, pod: Pod) -> list[Pod]:
        return [
            self.allocations.allocated(w.pod)
            for uid, w in self.workers.workers.items()
            if uid != pod.uid and self._counts(uid)
        ]

    def _counts(self, uid: str) -> bool:
        """Whether ``uid`` holds node resources for admission and resize feasibility:
        upstream's active pods, the pods a source still wants (its pod manager's) that
        were not rejected and whose worker has not finished them. A pod removed from its
        source (deleted from the API, a static manifest gone) stops counting at once,
        while its containers are still being stopped."""
        return uid in self.pods and uid not in self.rejected and self.workers.is_active(uid)

    def _update_active(self, uid: str) -> None:
        """Whether ``uid`` counts for admission now, with its current pod."""
        worker = self.workers.workers.get(uid)
        if worker is not None and self._counts(uid):
            self._active.put(uid, self.allocations.allocated(worker.pod))
        else:
            self._active.discard(uid)

    async def _preempt(self, pod: Pod, rejection: Rejection) -> Rejection | None:
        """Upstream's critical pod admission handler: a critical pod refused by the
        predicates only for resources stops the pods ``preemption`` chooses, then is
        admitted (the later handlers still run)."""
        assert self._preemptor is not None
        facts = self._admission_facts()
        others = self._others(pod)
        if facts.node is None:
            return rejection
        try:
            failures = fit.filter_failures(
                pod,
                others,
                facts.node,
                pod_level_resources=facts.pod_level_resources,
                dra_extended_resource=facts.dra_extended_resource,
                comparison_operators=facts.taint_comparison_operators,
            )
        except ValueError:
            return rejection
        if rejection.reason not in {failure.reason for failure in failures}:
            return rejection  # refused before the predicates' resource check
        plan = self._preemptor.plan(pod, others, failures)
        if plan is None or isinstance(plan, Rejection):
            return plan or rejection
        short = [f.resource for f in failures if isinstance(f, fit.InsufficientResource)]
        await self._preemptor.preempt(pod, plan, short[0] if short else "")
        return self._admission_failure(pod)

    # -- PLEG ------------------------------------------------------------------------------

    def _handle_pleg(self, event: PodLifecycleEvent) -> None:
        if event.type is EventType.CONTAINER_REMOVED:
            return
        pod = self.pods.get(event.uid)
        if pod is not None and event.uid not in self.rejected:
            self.workers.requeue(event.uid)
        # pods no source wants are handled by housekeeping

    def _handle_probe(self, update: ResultUpdate) -> None:
        """A probe result changed: liveness/startup failures make the pod's sync kill and
        restart the container, readiness changes its status. Either way: sync it."""
        uid = update.pod_uid
        if uid in self.pods and uid not in self.rejected:
            if update.kind is ProbeKind.READINESS and self._on_readiness is not None:
                self._on_readiness(uid, update.container_id, update.result is Result.SUCCESS)
            self.workers.requeue(uid)

    # -- housekeeping ----------------------------------------------------------------------

    def _orphaned(self, uid: str) -> bool:
        """On the runtime, but no source wants it and no worker has it. (A rejected pod
        found running, admitted by an earlier run, counts: it goes.)"""
        wanted = uid in self.pods and uid not in self.rejected
        return not wanted and not self.workers.is_known(uid)

    def sources_seen(self) -> bool:
        """Every source has spoken and this loop has handled what it said (upstream's
        ``sourcesReady.AllReady``): what housekeeping and the garbage collectors wait for
        before they take a pod nobody wants for gone."""
        return self._sources_ready(self.handled_sources)

    def _settle_heap(self, nursery: trio.Nursery) -> None:
        """Once the pods that came or went are started or torn down (every worker idle),
        what their starts freed goes back to the system, once per such burst; at the
        latest ``TRIM_AT_LATEST`` after the first of them (a node of many pods is seldom
        all idle). The trim runs beside the loop, which never waits for it."""
        since = self._unsettled
        if self._trim_heap is None or since is None or self._trimming:
            return
        if self.workers.busy() and trio.current_time() - since < TRIM_AT_LATEST:
            return
        self._unsettled = None
        self._trimming = True
        nursery.start_soon(self._trim)

    async def _trim(self) -> None:
        assert self._trim_heap is not None
        try:
            await self._trim_heap()
        finally:
            self._trimming = False

    async def housekeeping(self) -> None:
        """Tear down runtime pods nobody wants, once every source has been seen; then the
        pod directories and pod cgroups of pods nobody knows.

        At rest the PLEG's last listing answers (its uids, nothing built); an orphan in
        it, or no recent listing, and the runtime is listed now: an orphan is acted on
        only when a fresh listing shows it."""
        self.housekeeper.tidy()
        if not self.sources_seen():
            return
        self.allocations.drop_orphans(lambda uid: uid in self.pods)
        self.retry_deferred_resizes(resize.TRIGGER_PERIODIC)
        listed = self.housekeeper.listed_uids()
        running: list[OrphanPod] = []
        if listed is None or any(self._orphaned(uid) for uid in listed):
            try:
                running = list(await self.housekeeper.runtime_pods())
            except Exception as exc:
                log.warning("housekeeping: cannot list runtime pods: %s", exc)
                return
            listed = {p.uid for p in running}
        for orphan in running:
            if not self._orphaned(orphan.uid):
                continue
            log.info("removing orphaned pod %s/%s (%s)", orphan.namespace, orphan.name, orphan.uid)
            if self._on_orphan is not None:
                self._on_orphan()
            self.workers.terminate(self.housekeeper.orphan_as_pod(orphan), None, remove=True)
        for mirror in self.pods.mirrors():
            if not self.pods.by_full_name(mirror.full_name):
                self.housekeeper.orphan_mirror(mirror)
        in_use = self.pods.uids() | set(self.workers.workers) | set(listed)
        self.housekeeper.orphan_pod_dirs(in_use)
        self.housekeeper.orphan_pod_cgroups(
            lambda uid: uid in in_use or uid in self.pods or self.workers.is_known(uid)
        )
