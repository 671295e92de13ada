"""The pod lifecycle component: the syncLoop, the pod workers and housekeeping.

``run_pod_lifecycle`` is its entry. It makes the pod syncer (one worker step: runtime
view, driver, status, mirror pod), the workers (one task per pod UID) and the syncLoop,
whose inbox takes the config updates, the PLEG's events, the probes' changed results
and the workers' own results; then it runs them, with housekeeping's mirror deletions,
in one nursery and hands back a ``PodLifecycle``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs
import trio

from kubelet.api.client import ApiClient
from kubelet.api.pod import Pod
from kubelet.config import Options, features
from kubelet.config.features import POD_READY_TO_START_CONTAINERS_CONDITION
from kubelet.decisions.security import apparmor_host_error
from kubelet.decisions.sysctls import SysctlAllowlist, kernel_version
from kubelet.events.recorder import WARNING, EventRecorder, pod_ref
from kubelet.eviction.run import NodePressure
from kubelet.metrics import KubeletMetrics
from kubelet.node.declared import declared_features
from kubelet.node.identity import NodeIdentity
from kubelet.node.shutdown.handoff import KillRequest
from kubelet.pleg import PlegHandle
from kubelet.prober.manager import ProberManager
from kubelet.runtime.podruntime import PodRuntime
from kubelet.runtime.runtimeinfo import RuntimeInfo
from kubelet.sources.podconfig import PodConfig
from kubelet.status.manager import StatusManager

from .admission import AdmissionFacts, Rejection
from .evict import PodEvictor, PodGcView
from .fit import NodeInfo
from .housekeeping import RuntimeHousekeeper
from .killer import PodKiller
from .manager import PodManager
from .mirror import MirrorClient
from .preemption import Preemptor
from .syncer import ClusterLink, KubeletPodSyncer
from .syncloop import SyncLoop
from .workers import PodWorkers, WorkerResult


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
        return PodEvictor(self.workers, self.syncer, self.syncloop.rejected)

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
) -> Callable[[], AdmissionFacts]:
    """Admission's view of this node: read once at start-up, except the runtime's
    features, which CRI Status may change, and the Node (``nodeinfo.node_info_source``)."""
    cfg = options.config
    sysctls = SysctlAllowlist.for_node(cfg.allowed_unsafe_sysctls, kernel_version())
    apparmor_error = apparmor_host_error()
    gates = options.features
    declared = declared_features(gates) if gates.enabled(features.NODE_DECLARED_FEATURES) else None

    def facts() -> AdmissionFacts:
        admitted, reason, message = shutdown() if shutdown is not None else (True, "", "")
        return AdmissionFacts(
            max_pods=cfg.max_pods,
            node=node_info(),
            pod_level_resources=gates.enabled(features.POD_LEVEL_RESOURCES),
            dra_extended_resource=gates.enabled(features.DRA_EXTENDED_RESOURCE),
            taint_comparison_operators=gates.enabled(features.TAINT_TOLERATION_COMPARISON_OPERATORS),
            sysctls=sysctls,
            apparmor_error=apparmor_error,
            supplemental_groups_policy=runtime_info.features.supplemental_groups_policy,
            runtime_classes=runtime_classes,
            node_shutdown=None if admitted else (reason, message),
            pressure=pressure.conditions if pressure is not None else (),
            declared_features=declared,
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


async def run_pod_lifecycle(
    options: Options,
    node: NodeIdentity,
    desired: PodManager,
    config: PodConfig,
    pleg: PlegHandle,
    prober: ProberManager,
    pod_runtime: PodRuntime,
    api: ApiClient | None,
    status: StatusManager | None,
    recorder: EventRecorder,
    metrics: KubeletMetrics,
    runtime_name: str,
    wall_clock: Callable[[], float],
    node_info: Callable[[], NodeInfo],
    pressure: NodePressure | None = None,
    *,
    kill_requests: trio.MemoryReceiveChannel[KillRequest] | None = None,
    shutdown_admission: Callable[[], tuple[bool, str, str]] | None = None,
    task_status: trio.TaskStatus[PodLifecycle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the syncLoop and the pod workers until cancelled (pods keep running).

    ``desired`` is the pods the sources want (the status manager reads their mirror pods
    too); ``config`` gives the updates and tells when every source has been seen;
    ``node_info`` is the Node as admission reads it."""
    mirrors = MirrorClient(api, node.name, node.owner_uid) if api is not None else None
    link = ClusterLink(status, mirrors) if status is not None and mirrors is not None else None
    syncer = KubeletPodSyncer(
        pleg.cache,
        pod_runtime,
        pods=desired,
        host_ips=node.ips,
        runtime_name=runtime_name,
        wall_clock=wall_clock,
        cluster=link,
        prober=prober,
        metrics=metrics,
        ready_to_start_condition=options.features.enabled(POD_READY_TO_START_CONTAINERS_CONDITION),
    )
    results_send, results = trio.open_memory_channel[WorkerResult](math.inf)
    workers = PodWorkers(syncer, results=results_send, on_restart=metrics.pod_restarted)
    housekeeper = RuntimeHousekeeper(
        pleg.view, pod_runtime.backoffs, mirrors, pod_runtime.volumes, pod_runtime.cgroups
    )
    syncloop = SyncLoop(
        updates=config.updates,
        pleg_events=pleg.events,
        pods=desired,
        workers=workers,
        housekeeper=housekeeper,
        sources_ready=config.seen_all_sources,
        sync_frequency=options.config.sync_frequency,
        admission_facts=node_admission(
            options,
            pod_runtime.isolation.runtime_info,
            node_info,
            runtime_classes=api is not None,
            shutdown=shutdown_admission,
            pressure=pressure,
        ),
        on_reject=Rejecter(recorder, syncer),
        probe_updates=(
            prober.liveness_results.updates,
            prober.readiness_results.updates,
            prober.startup_results.updates,
        ),
        results=results,
        preemptor=Preemptor(recorder, workers, syncer, wall_clock, metrics.pod_preempted),
        on_orphan=metrics.orphaned_runtime_pod,
        allocations=syncer.allocations,  # one record: what admission counts, what runs
        on_readiness=syncer.readiness_changed,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(workers.run)
        await nursery.start(housekeeper.run)
        await nursery.start(syncloop.run)
        if kill_requests is not None:  # graceful node shutdown: pods the node stops
            await nursery.start(PodKiller(desired, workers, syncer).run, kill_requests)
        task_status.started(PodLifecycle(desired, workers, syncer, syncloop))
