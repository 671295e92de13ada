"""The pod lifecycle component: the syncLoop, the pod workers and housekeeping.

``run_pod_lifecycle`` is its entry. It makes the pod syncer (one worker step: runtime
view, driver, status, mirror pod), the workers (one task per pod UID) and the syncLoop,
whose inbox takes the config updates, the PLEG's events, the probes' changed results
and the workers' own results; then it runs them, with housekeeping's mirror deletions,
in one nursery and hands back a ``PodLifecycle``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import attrs
import trio

from kubelet.api import Pod
from kubelet.boundedio import RunSync, in_state_thread
from kubelet.cm import ContainerManager
from kubelet.config import POD_READY_TO_START_CONTAINERS_CONDITION, Options, features
from kubelet.decisions import SysctlAllowlist, apparmor_host_error, kernel_version
from kubelet.events import WARNING, EventRecorder, pod_ref
from kubelet.eviction import NodePressure
from kubelet.malloc import heap_trimmer
from kubelet.metrics import KubeletMetrics
from kubelet.node import NodeIdentity, declared_features
from kubelet.node.shutdown import KillRequest
from kubelet.pleg import PlegHandle
from kubelet.prober import ProberManager
from kubelet.runtime import PodRuntime, RuntimeInfo
from kubelet.sources import PodConfig
from kubelet.status import StatusManager
from kubelet.tracing import NO_TRACER, Tracer

from .admission import AdmissionFacts, Rejection, ResizeAdmission, ResourceAdmission
from .allocation import Allocations
from .allocstate import AllocationCheckpoint
from .evict import PodEvictor, PodGcView
from .fit import NodeInfo
from .housekeeping import RuntimeHousekeeper
from .killer import PodKiller
from .manager import PodManager
from .mirror import MirrorClient
from .preemption import Preemptor
from .syncer import ClusterLink, KubeletPodSyncer
from .syncloop import HealthUpdate, SyncLoop, SyncLoopParts
from .workers import PodWorkers, WorkerResult

if TYPE_CHECKING:
    from kubelet.api import ApiClient


@attrs.frozen
class PodLifecycle:
    """The running pod machinery as others read it (server, console, tests)."""

    pods: PodManager
    workers: PodWorkers
    syncer: KubeletPodSyncer
    syncloop: SyncLoop

    @property
    def evictor(self) -> PodEvictor:
        """The eviction manager's hold on the pods (active pods, the kill path)."""
        return PodEvictor(self.workers, self.syncer, self.syncloop.rejected, self.pods)

    @property
    def gc_view(self) -> PodGcView:
        """The garbage collectors' question: may a pod's dead containers go."""
        return PodGcView(self.pods, self.workers, self.syncer)


def node_admission(
    options: Options,
    runtime_info: RuntimeInfo,
    node_info: Callable[[], NodeInfo],
    *,
    runtime_classes: bool,
    shutdown: Callable[[], tuple[bool, str, str]] | None = None,
    pressure: NodePressure | None = None,
    resources: ResourceAdmission | None = None,
    resize: ResizeAdmission | None = None,
) -> Callable[[], AdmissionFacts]:
    """Admission's view of this node: read once at start-up, except the runtime's
    features, which CRI Status may change, and the Node (``nodeinfo.node_info_source``)."""
    cfg = options.config
    sysctls = SysctlAllowlist.for_node(cfg.allowed_unsafe_sysctls, kernel_version())
    apparmor_error = apparmor_host_error()
    gates = options.features
    declared = (
        declared_features(gates, cpu_manager_policy=cfg.cpu_manager_policy)
        if gates.enabled(features.NODE_DECLARED_FEATURES)
        else None
    )

    def facts() -> AdmissionFacts:
        admitted, reason, message = shutdown() if shutdown is not None else (True, "", "")
        return AdmissionFacts(
            max_pods=cfg.max_pods,
            node=node_info(),
            pod_level_resources=gates.enabled(features.POD_LEVEL_RESOURCES),
            dra_extended_resource=gates.enabled(features.DRA_EXTENDED_RESOURCE),
            taint_comparison_operators=gates.enabled(
                features.TAINT_TOLERATION_COMPARISON_OPERATORS
            ),
            sysctls=sysctls,
            apparmor_error=apparmor_error,
            supplemental_groups_policy=runtime_info.features.supplemental_groups_policy,
            runtime_classes=runtime_classes,
            node_shutdown=None if admitted else (reason, message),
            pressure=pressure.conditions if pressure is not None else (),
            declared_features=declared,
            resource_allocation=resources,
            resize_admission=resize,
        )

    return facts


@attrs.frozen
class Rejecter:
    """Upstream's ``rejectPod``: a Warning event with the reason, the pod reported Failed."""

    recorder: EventRecorder
    syncer: KubeletPodSyncer

    def __call__(self, pod: Pod, rejection: Rejection) -> None:
        self.recorder.record(pod_ref(pod), WARNING, rejection.reason, rejection.message)
        self.syncer.reject(pod, rejection)


@attrs.frozen(kw_only=True)
class LifecycleParts:
    """What the pod lifecycle component is made from (``agent`` builds it)."""

    options: Options
    node: NodeIdentity
    desired: PodManager
    """the pods the sources want (the status manager reads their mirror pods too)"""
    config: PodConfig
    """the updates, and whether every source has been seen"""
    pleg: PlegHandle
    prober: ProberManager
    pod_runtime: PodRuntime
    api: ApiClient | None
    status: StatusManager | None
    recorder: EventRecorder
    metrics: KubeletMetrics
    runtime_name: str
    wall_clock: Callable[[], float]
    node_info: Callable[[], NodeInfo]
    """the Node as admission reads it"""
    pressure: NodePressure | None = None
    kill_requests: trio.MemoryReceiveChannel[KillRequest] | None = None
    """graceful node shutdown's requests to stop pods (None: no shutdown manager)"""
    shutdown_admission: Callable[[], tuple[bool, str, str]] | None = None
    tracer: Tracer = NO_TRACER
    """spans of the pod workers' steps"""
    state_io: RunSync = in_state_thread
    """the allocation checkpoint's writes and the heap trim (a thread of their own)"""


async def run_pod_lifecycle(
    parts: LifecycleParts,
    *,
    task_status: trio.TaskStatus[PodLifecycle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the syncLoop and the pod workers until cancelled (pods keep running)."""
    p = parts
    mirrors = MirrorClient(p.api, p.node.name, p.node.owner_uid) if p.api is not None else None
    link = ClusterLink(p.status, mirrors) if p.status is not None and mirrors is not None else None
    checkpoint = AllocationCheckpoint(p.pod_runtime.root_dir)
    saved = await checkpoint.load(p.pod_runtime.log_io)
    syncer = KubeletPodSyncer(
        p.pleg.cache,
        p.pod_runtime,
        pods=p.desired,
        host_ips=p.node.ips,
        runtime_name=p.runtime_name,
        wall_clock=p.wall_clock,
        cluster=link,
        prober=p.prober,
        metrics=p.metrics,
        ready_to_start_condition=p.options.features.enabled(
            POD_READY_TO_START_CONTAINERS_CONDITION
        ),
        allocations=Allocations(p.pleg.cache.get, checkpoint, saved),
        tracer=p.tracer,
        resource_health=(
            p.pod_runtime.cm.resource_health
            if p.options.features.enabled(features.RESOURCE_HEALTH_STATUS)
            else None
        ),
    )
    p.desired.allocated = syncer.allocations.allocated  # the QoS cgroups size what runs
    results_send, results = trio.open_memory_channel[WorkerResult](math.inf)
    workers = PodWorkers(syncer, results=results_send, on_restart=p.metrics.pod_restarted)
    housekeeper = RuntimeHousekeeper(
        p.pleg.view,
        p.pod_runtime.backoffs,
        mirrors,
        p.pod_runtime.volumes,
        p.pod_runtime.cm.cgroups,
    )
    syncloop = SyncLoop(_loop_parts(p, syncer, workers, housekeeper, results))
    p.metrics.watch_resizes(syncloop.allocations.counts)
    async with trio.open_nursery() as nursery:
        await nursery.start(syncer.allocations.run, p.state_io)
        await nursery.start(workers.run)
        await nursery.start(housekeeper.run)
        await nursery.start(syncloop.run)
        if p.kill_requests is not None:  # graceful node shutdown: pods the node stops
            await nursery.start(PodKiller(p.desired, workers, syncer).run, p.kill_requests)
        task_status.started(PodLifecycle(p.desired, workers, syncer, syncloop))


def _heap_trim(io: RunSync) -> Callable[[], Awaitable[object]] | None:
    """glibc's heap trim through ``io`` (the state thread; fake-clock tests: inline)."""
    trim = heap_trimmer()
    if trim is None:
        return None

    async def trim_off_the_loop() -> object:
        return await io(trim)

    return trim_off_the_loop


def _loop_parts(
    p: LifecycleParts,
    syncer: KubeletPodSyncer,
    workers: PodWorkers,
    housekeeper: RuntimeHousekeeper,
    results: trio.MemoryReceiveChannel[WorkerResult],
) -> SyncLoopParts:
    """The syncLoop's inbox (config, PLEG, probes, worker results), admission, timing."""
    prober = p.prober
    return SyncLoopParts(
        updates=p.config.updates,
        pleg_events=p.pleg.events,
        pods=p.desired,
        workers=workers,
        housekeeper=housekeeper,
        sources_ready=p.config.seen_all_sources,
        sync_frequency=p.options.config.sync_frequency,
        admission_facts=node_admission(
            p.options,
            p.pod_runtime.isolation.runtime_info,
            p.node_info,
            runtime_classes=p.api is not None,
            shutdown=p.shutdown_admission,
            pressure=p.pressure,
            resources=p.pod_runtime.cm.admit,
            resize=p.pod_runtime.cm.admit_resize,
        ),
        on_reject=Rejecter(p.recorder, syncer),
        probe_updates=(
            prober.liveness_results.updates,
            prober.readiness_results.updates,
            prober.startup_results.updates,
        ),
        results=results,
        preemptor=Preemptor(p.recorder, workers, syncer, p.wall_clock, p.metrics.pod_preempted),
        on_orphan=p.metrics.orphaned_runtime_pod,
        allocations=syncer.allocations,  # one record: what admission counts, what runs
        recorder=p.recorder,
        on_infeasible_resize=p.metrics.resize_infeasible,
        on_deferred_accepted=p.metrics.deferred_resize_accepted,
        wall_clock=p.wall_clock,
        on_readiness=syncer.readiness_changed,
        health_updates=_health_updates(p.pod_runtime.cm),
        trim_heap=_heap_trim(p.state_io),
    )


def _health_updates(cm: ContainerManager) -> trio.MemoryReceiveChannel[HealthUpdate]:
    """The container manager's health changes as syncLoop messages (never blocking the
    manager that tells them)."""
    send, receive = trio.open_memory_channel[HealthUpdate](math.inf)
    cm.health_changed.subscribe(lambda uids: send.send_nowait(HealthUpdate(uids)))
    return receive
