"""The pod status the kubelet reports: phase, conditions, container statuses, IPs.

Pure: everything comes in as arguments (the pod, the runtime view, probe results, the
previously reported status, the node's IPs, the time). Conditions follow upstream's
generator: kubelet-owned conditions are appended in the order PodReadyToStartContainers,
Initialized, Ready, ContainersReady, PodScheduled after any condition someone else set,
and a condition's lastTransitionTime only moves when its status changes. Between the
two, PodResizePending while a resize waits and PodResizeInProgress while one admitted
is applied (``decisions.resize``). With the gate PodReadyToStartContainersCondition off, the
kubelet neither writes nor owns PodReadyToStartContainers (one already on the pod is
kept as someone else's).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import attrs

from kubelet.api import (
    ContainerStatus,
    Pod,
    PodCondition,
    PodIP,
    PodStatus,
    ResourceStatus,
    is_restartable_init_container,
)
from kubelet.cri import RuntimePodStatus
from kubelet.decisions import CONDITIONS as RESIZE_CONDITIONS
from kubelet.decisions import ResizeState, pod_qos, resize_conditions, sandbox_changed
from kubelet.status.killed import Kill, with_kill_conditions
from kubelet.status.phase import (
    FAILED,
    SUCCEEDED,
    convert_container_statuses,
    ephemeral_container_statuses,
    format_time,
    get_phase,
    has_any_regular_container_started,
    is_terminal_phase,
    resolve_phase,
)
from kubelet.status.podlevel import pod_level_status

READY_TO_START = "PodReadyToStartContainers"
INITIALIZED = "Initialized"
READY = "Ready"
CONTAINERS_READY = "ContainersReady"
SCHEDULED = "PodScheduled"
OWNED = (READY_TO_START, INITIALIZED, READY, CONTAINERS_READY, SCHEDULED, *RESIZE_CONDITIONS)
"""The conditions the kubelet owns (upstream's ``PodConditionByKubelet``), gate on; those
of a resize too (set only while one is refused)."""

UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"


def _go_list(names: Sequence[str]) -> str:
    """Go's %s of a []string: ``[a b]``."""
    return "[" + " ".join(names) + "]"


def _condition(ctype: str, ok: bool, reason: str = "", message: str = "") -> PodCondition:
    return PodCondition(
        type=ctype, status="True" if ok else "False", reason=reason, message=message
    )


def containers_ready(
    pod: Pod,
    statuses: Sequence[ContainerStatus] | None,
    init: Sequence[ContainerStatus],
    phase: str,
) -> PodCondition:
    if statuses is None:
        return _condition(CONTAINERS_READY, False, UNKNOWN_CONTAINER_STATUSES)
    by_name = {s.name: s for s in (*init, *statuses)}
    unknown: list[str] = []
    unready: list[str] = []
    sidecars = [c for c in pod.spec.init_containers if is_restartable_init_container(c)]
    for container in (*sidecars, *pod.spec.containers):
        status = by_name.get(container.name)
        if status is None:
            unknown.append(container.name)
        elif not status.ready:
            unready.append(container.name)
    if phase == SUCCEEDED and not unknown:
        return _condition(CONTAINERS_READY, False, POD_COMPLETED)
    if phase == FAILED:
        return _condition(CONTAINERS_READY, False, POD_FAILED)
    if not unknown and not unready:
        return _condition(CONTAINERS_READY, True)
    parts = []
    if unknown:
        parts.append(f"containers with unknown status: {_go_list(unknown)}")
    if unready:
        parts.append(f"containers with unready status: {_go_list(unready)}")
    return _condition(CONTAINERS_READY, False, CONTAINERS_NOT_READY, ", ".join(parts))


def pod_ready(pod: Pod, ready: PodCondition, conditions: Sequence[PodCondition]) -> PodCondition:
    if ready.status != "True":
        return attrs.evolve(ready, type=READY)
    by_type = {c.type: c for c in conditions}
    problems = []
    for gate in pod.spec.readiness_gates:
        found = by_type.get(gate.condition_type)
        if found is None:
            problems.append(
                f'corresponding condition of pod readiness gate "{gate.condition_type}" '
                "does not exist."
            )
        elif found.status != "True":
            problems.append(
                f'the status of pod readiness gate "{gate.condition_type}" is not "True", '
                f"but {found.status}"
            )
    if problems:
        return _condition(READY, False, READINESS_GATES_NOT_READY, ", ".join(problems))
    return _condition(READY, True)


def initialized(
    pod: Pod, init: Sequence[ContainerStatus] | None, regular: Sequence[ContainerStatus], phase: str
) -> PodCondition:
    """Upstream's order: unknown statuses, a Succeeded pod (PodCompleted, with or without
    init containers), a regular container that started, then the incomplete ones."""
    if init is None and pod.spec.init_containers:
        return _condition(INITIALIZED, False, UNKNOWN_CONTAINER_STATUSES)
    by_name = {s.name: s for s in init or ()}
    unknown: list[str] = []
    incomplete: list[str] = []
    for container in pod.spec.init_containers:
        status = by_name.get(container.name)
        if status is None:
            unknown.append(container.name)
        elif not (status.started if is_restartable_init_container(container) else status.ready):
            incomplete.append(container.name)
    if phase == SUCCEEDED and not unknown:
        return _condition(INITIALIZED, True, POD_COMPLETED)
    if has_any_regular_container_started(pod.spec, regular):
        return _condition(INITIALIZED, True)
    parts = []
    if unknown:
        parts.append(f"containers with unknown status: {_go_list(unknown)}")
    if incomplete:
        parts.append(f"containers with incomplete status: {_go_list(incomplete)}")
    if parts:
        return _condition(INITIALIZED, False, CONTAINERS_NOT_INITIALIZED, ", ".join(parts))
    return _condition(INITIALIZED, True)


def _keep_transition_times(
    new: Sequence[PodCondition], old: Sequence[PodCondition], now: str
) -> tuple[PodCondition, ...]:
    before = {c.type: c for c in old}
    out = []
    for cond in new:
        prev = before.get(cond.type)
        when = prev.last_transition_time if prev is not None and prev.status == cond.status else now
        out.append(attrs.evolve(cond, last_transition_time=when, last_probe_time=None))
    return tuple(out)


def _pod_ips(
    pod: Pod, runtime: RuntimePodStatus, host_ips: Sequence[str], old: PodStatus
) -> list[str]:
    """Host-network pods have the node's IPs; others their newest sandbox's."""
    if pod.spec.host_network:
        return list(host_ips)
    if runtime.sandboxes and runtime.sandboxes[0].ip:
        return [runtime.sandboxes[0].ip, *runtime.sandboxes[0].additional_ips]
    return [p.ip for p in old.pod_ips]


def owned_conditions(ready_to_start: bool) -> tuple[str, ...]:
    """The condition types the kubelet owns; ``ready_to_start``: the gate
    PodReadyToStartContainersCondition is on."""
    return OWNED if ready_to_start else tuple(t for t in OWNED if t != READY_TO_START)


def foreign_conditions(
    conditions: Sequence[PodCondition], owned: Collection[str] = OWNED
) -> list[PodCondition]:
    """The conditions someone else owns (readiness gates, DisruptionTarget, ...)."""
    return [c for c in conditions if c.type not in owned]


def needs_readiness_reconcile(pod: Pod) -> bool:
    """The API's Ready condition disagrees with the pod's readiness gates as they stand
    now (upstream's ``NeedToReconcilePodReadiness``): a gate condition changed, sync."""
    if not pod.spec.readiness_gates:
        return False
    status = pod.status
    current = next((c for c in status.conditions if c.type == READY), None)
    if current is None:
        return False
    init = status.init_container_statuses
    cready = containers_ready(pod, status.container_statuses, init, status.phase)
    wanted = pod_ready(pod, cready, status.conditions)
    return (current.status, current.message) != (wanted.status, wanted.message)


def _resize_conditions(
    state: ResizeState | None, old: PodStatus, phase: str, now: str
) -> tuple[PodCondition, ...]:
    """``PodResizePending`` while a resize waits, ``PodResizeInProgress`` while one
    admitted is not yet what runs (upstream puts the resize conditions after others' and
    before its own); a finished pod has none."""
    if is_terminal_phase(phase) or state is None:
        return ()
    return resize_conditions(state, old.conditions, now)


def _phase_reason(pod: Pod, phase: str, old: PodStatus, kill: Kill | None) -> tuple[str, str, str]:
    """(phase, reason, message): a pod the kubelet stops itself is Failed with why;
    otherwise the reason and message stay only while the phase does (upstream's
    generateAPIPodStatus)."""
    if kill is not None:
        return FAILED, kill.reason, kill.message
    if phase != old.phase:
        return phase, "", ""
    return phase, old.reason or pod.status.reason, old.message or pod.status.message


def _kubelet_conditions(
    pod: Pod,
    runtime: RuntimePodStatus,
    statuses: tuple[Sequence[ContainerStatus], Sequence[ContainerStatus]],
    phase: str,
    foreign: Sequence[PodCondition],
    ready_to_start: bool,
) -> list[PodCondition]:
    """The conditions the kubelet owns, in upstream's order (``statuses``: init, regular)."""
    init, regular = statuses
    needs_sandbox, _, _ = sandbox_changed(pod, runtime)
    cready = containers_ready(pod, regular, init, phase)
    return [
        *([_condition(READY_TO_START, not needs_sandbox)] if ready_to_start else []),
        initialized(pod, init, regular, phase),
        pod_ready(pod, cready, foreign),
        cready,
        _condition(SCHEDULED, True),
    ]


def _foreign_conditions(
    pod: Pod, kill: Kill | None, now: str, ready_to_start_condition: bool
) -> list[PodCondition]:
    """The conditions others own, from the API's copy; with the kubelet's kill ones."""
    foreign = foreign_conditions(pod.status.conditions, owned_conditions(ready_to_start_condition))
    return foreign if kill is None else with_kill_conditions(foreign, kill, now)


def _with_health(
    statuses: tuple[ContainerStatus, ...], health: Mapping[str, tuple[ResourceStatus, ...]] | None
) -> tuple[ContainerStatus, ...]:
    """Each container's ``allocatedResourcesStatus``: its devices' health as the
    container manager reports it (gate ResourceHealthStatus)."""
    if not health:
        return statuses
    return tuple(
        attrs.evolve(s, allocated_resources_status=health[s.name]) if s.name in health else s
        for s in statuses
    )


def _pod_conditions(
    pod: Pod,
    runtime: RuntimePodStatus,
    statuses: tuple[tuple[ContainerStatus, ...], tuple[ContainerStatus, ...]],
    phase: str,
    old: PodStatus,
    kill: Kill | None,
    resize: ResizeState | None,
    now: str,
    ready_to_start_condition: bool,
) -> tuple[PodCondition, ...]:
    """Others' conditions, the resize ones, then the kubelet's own (each with the pod's
    generation, and its transition time kept while its status stays)."""
    foreign = _foreign_conditions(pod, kill, now, ready_to_start_condition)
    generation = pod.metadata.generation or None
    owned = [
        attrs.evolve(c, observed_generation=generation)
        for c in _kubelet_conditions(
            pod, runtime, statuses, phase, foreign, ready_to_start_condition
        )
    ]
    resize_now = _resize_conditions(resize, old, phase, now)
    return (*foreign, *resize_now, *_keep_transition_times(owned, old.conditions, now))


def generate_pod_status(
    pod: Pod,
    runtime: RuntimePodStatus,
    *,
    previous: PodStatus | None = None,
    host_ips: Sequence[str] = (),
    runtime_name: str = "containerd",
    waiting_reasons: Mapping[str, tuple[str, str]] | None = None,
    started: Collection[str] = (),
    ready: Collection[str] = (),
    pod_is_terminal: bool = False,
    kill: Kill | None = None,
    ready_to_start_condition: bool = True,
    allocated: Pod | None = None,
    resize: ResizeState | None = None,
    resource_health: Mapping[str, tuple[ResourceStatus, ...]] | None = None,
    now_ns: int,
) -> PodStatus:
    """The full status for ``pod`` now (``previous``: what was last reported, if anything;
    ``kill``: why the kubelet stops the pod itself -- shutdown, eviction, a deadline;
    ``ready_to_start_condition``: the gate PodReadyToStartContainersCondition;
    ``allocated``: the pod as it runs; ``resize``: where its resize stands;
    ``resource_health``: container name → its devices' health). Conditions others own
    come from the API's copy of the pod (``pod.status``), never from what the kubelet
    reported before: a readiness gate set since counts at once."""
    old = previous or pod.status
    running = allocated or pod
    init, regular = convert_container_statuses(
        running,
        runtime,
        old,
        runtime_name=runtime_name,
        waiting_reasons=waiting_reasons,
        started=started,
        ready=ready,
    )
    init, regular = _with_health(init, resource_health), _with_health(regular, resource_health)
    ephemeral = ephemeral_container_statuses(
        running,
        runtime,
        old.ephemeral_container_statuses,
        runtime_name=runtime_name,
        waiting_reasons=waiting_reasons,
    )
    phase = resolve_phase(
        get_phase(pod, (*init, *regular), pod_is_terminal=pod_is_terminal),
        previous_phase=old.phase if previous is not None else "",
        api_phase=pod.status.phase,
    )
    phase, reason, message = _phase_reason(pod, phase, old, kill)
    now = format_time(now_ns)
    generation = pod.metadata.generation or None  # omitted when 0, as upstream (omitempty)
    conditions = _pod_conditions(
        pod, runtime, (init, regular), phase, old, kill, resize, now, ready_to_start_condition
    )
    pod_ips = _pod_ips(pod, runtime, host_ips, old)
    return PodStatus(
        observed_generation=generation,
        phase=phase,
        conditions=conditions,
        message=message,
        reason=reason,
        host_ip=host_ips[0] if host_ips else old.host_ip,
        host_ips=tuple(PodIP(ip=ip) for ip in host_ips) or old.host_ips,
        pod_ip=pod_ips[0] if pod_ips else "",
        pod_ips=tuple(PodIP(ip=ip) for ip in pod_ips),
        start_time=old.start_time or now,
        init_container_statuses=init,
        container_statuses=regular,
        ephemeral_container_statuses=ephemeral,
        qos_class=pod_qos(pod),
        extended_resource_claim_status=pod.status.extended_resource_claim_status,
        resource_claim_statuses=pod.status.resource_claim_statuses,
        resources=pod_level_status(running)[0],
        allocated_resources=pod_level_status(running)[1],
    )
