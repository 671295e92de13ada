"""The kubelet's PodSyncer: one pod worker step = fresh runtime view + CRI actions + status.

A worker never acts on a view older than its own last action (the PLEG's cache serves
when it is new enough); when the step changed something it is read again, so the status
reported reflects what was just done (a started pod is reported Running by the same
step that started it, not by the next one). In cluster mode the status goes to the
status manager, static pods get their mirror pod, and a deleted pod's API object is
removed once the pod is gone from the node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence

import attrs
import trio

from kubelet.api import ApiError, Pod, PodStatus, ResourceStatus, is_restartable_init_container
from kubelet.cri import RuntimePodStatus
from kubelet.decisions import pod_qos, resize
from kubelet.events import NORMAL, WARNING, pod_ref
from kubelet.metrics import KubeletMetrics
from kubelet.pleg import PodCache, ViewMark
from kubelet.prober import ProberManager
from kubelet.runtime import PodRuntime, all_gone, still_running
from kubelet.status import (
    DEADLINE_EXCEEDED,
    DEADLINE_EXCEEDED_MESSAGE,
    Kill,
    StatusManager,
    deadline_left,
    format_time,
    generate_pod_status,
    is_terminal_phase,
    new_terminations,
    terminated_status,
    with_container_readiness,
)
from kubelet.tracing import NO_TRACER, Attributes, Tracer

from .admission import Rejection, rejection_message
from .allocation import Allocations
from .manager import PodManager
from .mirror import MirrorClient
from .workers import SyncResult

log = logging.getLogger(__name__)


def _gated_sidecars(pod: Pod) -> bool:
    """Some sidecar has a startupProbe: the next init container waits for its success."""
    return any(
        is_restartable_init_container(c) and c.startup_probe is not None
        for c in pod.spec.init_containers
    )


@attrs.frozen(eq=False)
class _Generated:
    """What a running pod's last status was generated from, what came out, and whether
    it came out equal to the status it was given (``settled``). From the same inputs and
    that status the generator gives that status again: the clock enters only where a
    condition's status or the start time changes, which a settled status rules out. So
    a resync that finds every input as it was (the pod and the runtime view the same
    objects, the waiting reasons and the probes' verdicts equal) keeps the status rather
    than building it anew. A pod being stopped is not kept (a kill's conditions take
    the time of each generation)."""

    pod: Pod
    allocated: Pod
    resize_state: resize.ResizeState | None
    runtime: RuntimePodStatus
    waiting: dict[str, tuple[str, str]] | None
    started: Collection[str]
    ready: Collection[str]
    health: Mapping[str, tuple[ResourceStatus, ...]]
    status: PodStatus
    settled: bool

    def holds(
        self,
        pod: Pod,
        allocated: Pod,
        state: resize.ResizeState | None,
        runtime: RuntimePodStatus,
        previous: PodStatus | None,
        waiting: dict[str, tuple[str, str]] | None,
        started: Collection[str],
        ready: Collection[str],
        health: Mapping[str, tuple[ResourceStatus, ...]],
    ) -> bool:
        """Generating again from these inputs would give ``status`` again."""
        return (
            self.settled
            and previous is self.status
            and pod is self.pod
            and allocated is self.allocated
            and state == self.resize_state
            and runtime is self.runtime
            and waiting == self.waiting
            and started == self.started
            and ready == self.ready
            and health == self.health
        )


def _span(pod: Pod, update: str) -> Attributes:
    """A pod step's span attributes, upstream's."""
    meta = pod.metadata
    return {
        "k8s.pod.uid": pod.uid,
        "k8s.pod": f"{meta.namespace}/{meta.name}",
        "k8s.pod.name": meta.name,
        "k8s.pod.update_type": update,
        "k8s.namespace.name": meta.namespace,
    }


class TeardownIncomplete(RuntimeError):
    """Something of the pod is still on the runtime after a teardown pass."""


@attrs.define
class ClusterLink:
    """What a kubelet joined to a cluster adds to each pod step."""

    status: StatusManager
    mirrors: MirrorClient


class KubeletPodSyncer:
    """One pod worker step, the kubelet's way (implements ``workers.PodSyncer``).

    Upstream's ``SyncPod``/``SyncTerminatingPod``: it joins what no single part knows --
    the fresh runtime view (pod cache), the probes' verdicts, the driver's actions
    (``runtime.PodRuntime``), the generated status and, in a cluster, the status
    manager and the mirror pod -- so the workers stay generic and each part stays small.
    """

    def __init__(
        self,
        cache: PodCache,
        pod_runtime: PodRuntime,
        *,
        pods: PodManager | None = None,
        host_ips: Sequence[str] = (),
        runtime_name: str = "containerd",
        wall_clock: Callable[[], float] | None = None,
        cluster: ClusterLink | None = None,
        prober: ProberManager | None = None,
        metrics: KubeletMetrics | None = None,
        ready_to_start_condition: bool = True,
        allocations: Allocations | None = None,
        tracer: Tracer = NO_TRACER,
        resource_health: Callable[[Pod], Mapping[str, tuple[ResourceStatus, ...]]] | None = None,
    ) -> None:
        self.cache = cache
        self.resource_health = resource_health
        """Container name → its allocated devices' health (the container manager's; None:
        gate ResourceHealthStatus off, statuses carry none)."""
        self.tracer = tracer
        """A span per step ("syncPod", "syncTerminatingPod"): its CRI and API calls are
        the span's children."""
        self.allocations = allocations if allocations is not None else Allocations(cache.get)
        """Each pod's allocation: what it runs with, whatever a resize asks (``resize``)."""
        self.pod_runtime = pod_runtime
        self.pods = pods if pods is not None else PodManager()  # an empty one is falsy
        self.host_ips = tuple(host_ips)
        self.runtime_name = runtime_name
        self.wall_clock = wall_clock or pod_runtime.wall_clock
        self.cluster = cluster
        self.prober = prober
        self.metrics = metrics
        self.ready_to_start_condition = ready_to_start_condition
        """The gate PodReadyToStartContainersCondition: statuses carry that condition."""
        self.first_seen: dict[str, float] = {}
        self.started_pods: set[str] = set()
        self.waiting: dict[str, dict[str, tuple[str, str]]] = {}
        self.statuses: dict[str, PodStatus] = {}
        """The status last generated per pod (what /pods and the status manager show)."""
        self.rejections: dict[str, PodStatus] = {}
        """Pods admission refused: their Failed status outlives a teardown while desired."""
        self.acted_at: dict[str, ViewMark] = {}
        """Each pod's last action on the runtime (the mark taken before the read that
        follows it; a step that failed half-way: its end): its next step needs a runtime
        view at least as new, which its own read after acting already is, else the PLEG's
        cache when it is (``PodCache.newer_than``). A step that changed nothing leaves
        it, as only the worker acts on its pod and the PLEG reads what else changed."""
        self.kills: dict[str, Kill] = {}
        """Pods the kubelet stops itself (node shutdown, eviction, an active deadline):
        they are finished, and every status generated for them says why."""
        self._generated: dict[str, _Generated] = {}
        """Each running pod's last status generation (``_Generated``): a periodic resync
        that changed nothing reports the status it reported before."""

    async def sync_pod(self, pod: Pod) -> SyncResult:
        started = trio.current_time()
        first = pod.uid not in self.statuses
        if first and self.metrics is not None:
            seen = pod.first_seen
            since = self.wall_clock() - seen if seen is not None else None
            self.metrics.observe_worker_start(since, len(pod.spec.containers))
        update = "create" if first else "sync"
        try:
            with self.cache.in_hand(pod.uid), self.tracer.span("syncPod", _span(pod, update)):
                return await self._sync_pod(pod)
        except BaseException:
            self.acted_at[pod.uid] = self.cache.mark()  # what it did: read afresh next
            raise
        finally:
            if self.metrics is not None:
                operation = "create" if first else "sync"
                self.metrics.observe_pod_worker(operation, trio.current_time() - started)

    def finished(self, pod: Pod) -> bool:
        """The pod reached Succeeded or Failed -- as the API says (a kubelet restart, a
        runtime wiped under a finished pod) or as this kubelet found -- and so never
        runs again (upstream starts such a pod's worker terminated)."""
        if is_terminal_phase(pod.status.phase):
            return True
        if pod.uid in self.kills:
            return True
        last = self.statuses.get(pod.uid)
        return last is not None and is_terminal_phase(last.phase)

    def kill(self, pod: Pod, kill: Kill) -> None:
        """The kubelet stops ``pod`` itself (``killer.kill_pod``): from now on it is
        finished and its status says why; its worker then terminates it."""
        self.kills[pod.uid] = kill

    def evicted(self, uid: str) -> bool:
        """The pod was evicted (its kill reclaims what it holds)."""
        kill = self.kills.get(uid)
        return kill is not None and kill.reclaim

    def _deadline_left(self, pod: Pod) -> float | None:
        """Seconds before ``pod`` exhausts ``activeDeadlineSeconds`` (None: no deadline),
        counted from the start time the kubelet reported, else the API's."""
        last = self.statuses.get(pod.uid)
        start = last.start_time if last is not None else None
        return deadline_left(pod, start or pod.status.start_time, self.wall_clock())

    def _past_deadline(self, pod: Pod) -> bool:
        """The pod ran out of its active deadline: from now on it is failed and killed
        (upstream's active deadline handler, event DeadlineExceeded) with its own grace."""
        left = self._deadline_left(pod)
        if left is None or left > 0:
            return False
        log.info("pod %s: %s", pod.key, DEADLINE_EXCEEDED_MESSAGE)
        self.pod_runtime.recorder.record(
            pod_ref(pod), NORMAL, DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_MESSAGE
        )
        self.kill(pod, Kill(DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_MESSAGE))
        return True

    async def _sync_pod(self, pod: Pod) -> SyncResult:
        if self.finished(pod) or self._past_deadline(pod):
            await self._stop_finished(pod)
            await self._ensure_mirror(pod)
            return SyncResult(finished=True)
        status = await self.cache.newer_than(pod.uid, self.acted_at.get(pod.uid))
        liveness_failed: frozenset[str] = frozenset()
        startup_failed: frozenset[str] = frozenset()
        startup_succeeded: frozenset[str] | None = None
        if self.prober is not None:
            self.prober.update_pod(pod)  # its probes' workers, started when missing
            self.prober.update_pod_status(pod.uid, status)
            liveness_failed = self.prober.liveness_failed(status)
            startup_failed = self.prober.startup_failed(status)
            if _gated_sidecars(pod):
                startup_succeeded = self.prober.startup_succeeded(status)
        outcome = await self.pod_runtime.sync(
            self.allocations.allocated(pod),  # never the resources a refused resize asks
            status,
            liveness_failed=liveness_failed,
            startup_failed=startup_failed,
            startup_succeeded=startup_succeeded,
            before_acting=self.allocations.written,
        )
        self.waiting[pod.uid] = outcome.waiting
        self._track_resize(pod, outcome.resize_pending, outcome.resize_error)
        for name, (reason, message) in outcome.waiting.items():
            log.info("pod %s container %s waiting: %s: %s", pod.key, name, reason, message)
        if outcome.acted:
            status = await self._read_after_acting(pod.uid)
            if self.prober is not None:
                self.prober.update_pod_status(pod.uid, status)
        self._report(pod, status)
        await self._ensure_mirror(pod)
        error = "; ".join(outcome.errors) or None
        left = self._deadline_left(pod)  # the pod's deadline timer, re-armed every sync
        return SyncResult(
            requeue_after=outcome.requeue_after,
            error=error,
            deadline_in=None if left is None else max(left, 0.0),
        )

    async def _read_after_acting(self, uid: str) -> RuntimePodStatus:
        """The pod's view once the worker has acted on it: read now, and every later
        step may take any view at least this new."""
        self.acted_at[uid] = self.cache.mark()
        return await self.cache.refresh(uid)

    def reject(self, pod: Pod, rejection: Rejection) -> None:
        """Admission refused ``pod``: it is reported Failed and never started (upstream's
        ``rejectPod``: the QoS class is kept, the message says it was rejected)."""
        status = PodStatus(
            phase="Failed",
            reason=rejection.reason,
            message=rejection_message(rejection),
            qos_class=pod_qos(pod),
            observed_generation=pod.metadata.generation or None,
        )
        self.statuses[pod.uid] = self.rejections[pod.uid] = status
        if self.metrics is not None:
            self.metrics.observe_admission_rejection(rejection.reason)
        if self.cluster is not None:
            self.cluster.status.set(pod, status)

    async def _ensure_mirror(self, pod: Pod) -> None:
        if self.cluster is not None and pod.is_static:
            try:
                await self.cluster.mirrors.ensure(pod, self.pods.mirror_for(pod))
            except ApiError as exc:
                log.warning("mirror pod of %s not updated: %s", pod.key, exc)

    async def _stop_finished(self, pod: Pod, grace: int | None = None) -> None:
        """A finished pod (by itself, or killed by the kubelet): nothing is created or
        started; what still runs of it is stopped (containers in termination order,
        then the sandbox; ``grace``: at most, else the kill's, else the pod's own) and
        its terminal status is reported. Its exited containers stay, for their logs,
        until it goes."""
        if self.prober is not None:
            self.prober.remove_pod(pod.uid)
        kill = self.kills.get(pod.uid)
        if grace is None and kill is not None:
            grace = kill.grace
        status = await self.cache.newer_than(pod.uid, self.acted_at.get(pod.uid))
        if still_running(status):
            why = kill.message if kill is not None else "it has finished"
            log.info("stopping pod %s: %s", pod.key, why)
            await self.pod_runtime.kill(pod, status, grace)
            status = await self._read_after_acting(pod.uid)
        self.waiting.pop(pod.uid, None)
        self._report(pod, status, terminal=True, finished=True)

    def _report(
        self,
        pod: Pod,
        runtime: RuntimePodStatus,
        *,
        terminal: bool = False,
        finished: bool = False,
    ) -> PodStatus:
        previous = self.statuses.get(pod.uid)
        if previous is None and self.cluster is not None and pod.is_static:
            mirror = self.pods.mirror_for(pod)
            previous = mirror.status if mirror is not None else None
        started: Collection[str] = ()
        ready: Collection[str] = ()
        if self.prober is not None:
            probed = self.prober.probe_status(pod, runtime)
            started, ready = probed.started, probed.ready
        waiting = self.waiting.get(pod.uid)
        kill = self.kills.get(pod.uid)
        allocated = self.allocations.allocated(pod)
        state = self.allocations.state(pod.uid)
        runs_on = not terminal and kill is None
        health = self.resource_health(allocated) if self.resource_health is not None else {}
        memo = self._generated.pop(pod.uid, None)
        if (
            runs_on
            and memo is not None
            and memo.holds(
                pod, allocated, state, runtime, previous, waiting, started, ready, health
            )
        ):
            generated = memo.status
        else:
            generated = generate_pod_status(
                pod,
                runtime,
                previous=previous,
                host_ips=self.host_ips,
                runtime_name=self.runtime_name,
                waiting_reasons=waiting,
                started=started,
                ready=ready,
                pod_is_terminal=terminal,
                kill=kill,
                ready_to_start_condition=self.ready_to_start_condition,
                allocated=allocated,
                resize=state,
                resource_health=health,
                now_ns=int(self.wall_clock() * 1e9),
            )
            if previous is not None and generated == previous:
                generated = previous  # the same object: the next check is by identity
        if finished:
            generated = terminated_status(pod, generated)
        elif runs_on:
            settled = generated is previous
            self._generated[pod.uid] = _Generated(
                pod, allocated, state, runtime, waiting, started, ready, health, generated, settled
            )
        self.statuses[pod.uid] = generated
        self._observe_start(pod, generated)
        self._observe_terminations(pod, previous, generated)
        if self.cluster is not None:
            self.cluster.status.set(pod, generated)
        return generated

    def readiness_changed(self, uid: str, container_id: str, ready: bool) -> None:
        """A readiness probe's verdict changed: the pod's last status says so at once
        (upstream's ``SetContainerReadiness``), even while its worker is busy stopping
        it; its next sync, if any, builds the same from the probes."""
        last = self.statuses.get(uid)
        pod = self.pods.get(uid)
        if last is None or pod is None or is_terminal_phase(last.phase):
            return
        now = format_time(int(self.wall_clock() * 1e9))
        updated = with_container_readiness(pod, last, container_id, ready, now)
        if updated is None:
            return
        self.statuses[uid] = updated
        if self.cluster is not None:
            self.cluster.status.set(pod, updated)

    def _track_resize(self, pod: Pod, pending: bool, error: str) -> None:
        """An admitted resize is in progress until no running container differs from its
        allocation (upstream's events: ResizeError on each new failure, ResizeCompleted
        at the end)."""
        uid = pod.uid
        progress = self.allocations.in_progress.get(uid)
        allocated = self.allocations.allocated(pod)
        recorder = self.pod_runtime.recorder
        if pending:
            generation = progress[1] if progress is not None else pod.metadata.generation or None
            self.allocations.in_progress[uid] = (error, generation)
            if error and (progress is None or progress[0] != error):
                message = resize.event_message(allocated, "error", error)
                recorder.record(pod_ref(pod), WARNING, resize.EVENT_ERROR, message)
        elif progress is not None:
            del self.allocations.in_progress[uid]
            log.info("pod %s: resize completed", pod.key)
            message = resize.event_message(allocated, "completed", "")
            recorder.record(pod_ref(pod), NORMAL, resize.EVENT_COMPLETED, message)

    def _observe_start(self, pod: Pod, status: PodStatus) -> None:
        """kubelet_pod_start_duration_seconds: first seen → every container running."""
        first_seen = self.first_seen.setdefault(pod.uid, trio.current_time())
        if pod.uid in self.started_pods or not status.container_statuses:
            return
        if all(c.state is not None and c.state.running for c in status.container_statuses):
            self.started_pods.add(pod.uid)
            if self.metrics is not None:
                self.metrics.observe_pod_start(trio.current_time() - first_seen)

    def _observe_terminations(self, pod: Pod, previous: PodStatus | None, new: PodStatus) -> None:
        """kubelet_terminated_containers_total: each exit once. With no status of our own
        yet (a restarted kubelet) the API's copy is what was reported before."""
        if self.metrics is None or new is previous:
            return
        for ended in new_terminations(previous if previous is not None else pod.status, new):
            self.metrics.container_terminated(ended.container_type, ended.exit_code, ended.reason)

    async def terminate_pod(self, pod: Pod, grace: int | None) -> None:
        try:
            with (
                self.cache.in_hand(pod.uid),
                self.tracer.span("syncTerminatingPod", _span(pod, "kill")),
            ):
                await self._terminate_pod(pod, grace)
        except BaseException:
            self.acted_at[pod.uid] = self.cache.mark()  # what it did: read afresh next
            raise

    async def _terminate_pod(self, pod: Pod, grace: int | None) -> None:
        kill = self.kills.get(pod.uid)
        leaving = pod.metadata.deletion_timestamp is not None or pod.uid not in self.pods
        if kill is not None and not kill.reclaim and not leaving:
            # the kill's own termination: the pod stays desired, never runs again (its
            # status is terminal) and keeps its containers until it is deleted
            await self._stop_finished(pod, grace)
            return
        if self.prober is not None:
            self.prober.stop_liveness_and_startup(pod.uid)
        # the PLEG's view when it is new enough (only the worker starts containers, so
        # it holds every container to stop); whether all went is read afresh below
        status = await self.cache.newer_than(pod.uid, self.acted_at.get(pod.uid))
        evicted = kill is not None and kill.reclaim
        reports = (
            self.cluster is not None
            and pod.metadata.deletion_timestamp is not None
            and not pod.is_static
        )
        if not all_gone(status):
            log.info("tearing down pod %s", pod.key)
            if reports or evicted:
                # the last status says how each container ended: read between stop and removal
                await self.pod_runtime.kill(pod, status, grace)
                status = await self._read_after_acting(pod.uid)
                await self.pod_runtime.remove(status)
            else:
                await self.pod_runtime.terminate(pod, status, grace)
            after = await self._read_after_acting(pod.uid)
            if not all_gone(after):
                raise TeardownIncomplete(
                    f"pod {pod.key}: {len(after.containers)} containers and "
                    f"{len(after.sandboxes)} sandboxes still on the runtime"
                )
            log.info("pod %s torn down", pod.key)
        # volumes unmounted and files gone before the final status lets the API object
        # go, as upstream waits for the pod's volumes before it deletes the pod
        await self.pod_runtime.remove_pod_files(pod)
        final = None
        if evicted:
            final = self._report(pod, status, terminal=True, finished=True)
        if reports and self.cluster is not None:
            final = self._report(pod, status, terminal=True, finished=True)
            self.cluster.status.finished(pod, final)
        elif self.cluster is not None and pod.is_static:
            self.cluster.status.forget(pod.uid)  # a static pod restored later starts afresh
        if self.prober is not None:
            self.prober.remove_pod(pod.uid)
        self.cache.delete(pod.uid)
        self.acted_at.pop(pod.uid, None)
        self.waiting.pop(pod.uid, None)
        self.statuses.pop(pod.uid, None)
        self._generated.pop(pod.uid, None)
        rejected = self.rejections.pop(pod.uid, None)
        if rejected is not None and pod.uid in self.pods:  # stopped, still rejected
            self.statuses[pod.uid] = self.rejections[pod.uid] = rejected
        if evicted and pod.uid in self.pods and final is not None:  # stopped, still evicted
            self.statuses[pod.uid] = final
        else:
            self.kills.pop(pod.uid, None)
        self.first_seen.pop(pod.uid, None)
        self.started_pods.discard(pod.uid)
        if pod.uid not in self.pods:  # gone from the node for good: so is its allocation
            self.allocations.forget(pod.uid)
