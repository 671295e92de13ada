"""Pod phase and API container statuses, derived from what the runtime reports.

Pure functions after upstream ``getPhase`` and ``convertToAPIContainerStatuses``
(kubelet_pods.go), plus the part of the prober manager that sets ``started`` and
``ready``. Times come from the runtime in nanoseconds and are written as the API writes
them: RFC 3339, whole seconds, UTC. As upstream, a container that exited without ever
starting shows ``startedAt: 1970-01-01T00:00:00Z``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TypeVar

import attrs

from kubelet.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    ContainerUser,
    LinuxContainerUser,
    Pod,
    PodSpec,
    PodStatus,
    Quantity,
    ResourceRequirements,
    VolumeMountStatus,
    is_restartable_init_container,
    to_bytes,
    to_millicores,
)
from kubelet.cgroups import milli_cpu_to_shares
from kubelet.cri import ContainerInfo, ContainerRunState, RunningResources, RuntimePodStatus
from kubelet.decisions import container_should_restart, should_container_be_restarted
from kubelet.goformat import rfc3339

__all__ = [
    "CONTAINER_CREATING",
    "CONTAINER_STATUS_UNKNOWN",
    "FAILED",
    "PENDING",
    "POD_INITIALIZING",
    "RUNNING",
    "SUCCEEDED",
    "TERMINAL_PHASES",
    "api_container_statuses",
    "apply_probe_results",
    "container_id",
    "convert_container_statuses",
    "ephemeral_container_statuses",
    "format_time",
    "get_phase",
    "has_any_regular_container_started",
    "is_terminal_phase",
    "resolve_phase",
]

PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"

CONTAINER_CREATING = "ContainerCreating"
POD_INITIALIZING = "PodInitializing"
CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"
_UNKNOWN_EXIT_CODE = 137
_MSG_NOT_LOCATED = "The container could not be located when the pod was terminated"
_MSG_DELETED = (
    "The container could not be located when the pod was deleted.  The container used to be Running"
)


T = TypeVar("T")


def _status_of(statuses: Sequence[ContainerStatus], name: str) -> ContainerStatus | None:
    return next((s for s in statuses if s.name == name), None)


def _state(status: ContainerStatus) -> ContainerState:
    return status.state or ContainerState()


def _last_terminated(status: ContainerStatus) -> ContainerStateTerminated | None:
    return status.last_state.terminated if status.last_state else None


def has_any_regular_container_started(spec: PodSpec, statuses: Sequence[ContainerStatus]) -> bool:
    """Some regular container is running or has terminated: initialization happened."""
    names = {c.name for c in spec.containers}
    return any(
        s.name in names and (_state(s).running is not None or _state(s).terminated is not None)
        for s in statuses
    )


@attrs.define
class _Counts:
    """What ``getPhase`` counts over a pod's containers."""

    pending_init: int = 0
    failed_init: int = 0
    """Plain init containers that failed and that their rules and policies do not restart."""
    unknown: int = 0
    running: int = 0
    waiting: int = 0
    stopped: int = 0
    stopped_for_good: int = 0
    """Stopped regular containers that their rules and policies do not restart."""
    succeeded: int = 0


def _count_init(counts: _Counts, spec: PodSpec, statuses: Sequence[ContainerStatus]) -> None:
    """Plain init containers: pending until they exit; a non-zero exit failed, for good
    when the container's rules and policies do not restart it."""
    for container in spec.init_containers:
        if is_restartable_init_container(container):
            continue
        status = _status_of(statuses, container.name)
        if status is None:
            counts.pending_init += 1
            continue
        state = _state(status)
        ended = state.terminated
        if state.running is not None:
            counts.pending_init += 1
        elif state.waiting is not None:
            ended = _last_terminated(status)
            if ended is None:
                counts.pending_init += 1
        elif ended is None:
            counts.pending_init += 1
        if ended is None or ended.exit_code == 0:
            continue
        if not container_should_restart(container, spec, ended.exit_code):
            counts.failed_init += 1


def _count_sidecars(counts: _Counts, spec: PodSpec, statuses: Sequence[ContainerStatus]) -> None:
    """Sidecars (restartable init containers): running ones count, stopped ones do not."""
    for container in spec.init_containers:
        if not is_restartable_init_container(container):
            continue
        status = _status_of(statuses, container.name)
        if status is None:
            counts.unknown += 1
            continue
        state = _state(status)
        if state.running is not None:
            if not status.started:
                counts.pending_init += 1
            counts.running += 1
        elif state.terminated is not None:
            pass  # a stopped sidecar does not decide the phase
        elif state.waiting is not None:
            if _last_terminated(status) is None:
                counts.pending_init += 1
                counts.waiting += 1
        else:
            counts.pending_init += 1
            counts.unknown += 1


def _count_regular(counts: _Counts, spec: PodSpec, statuses: Sequence[ContainerStatus]) -> None:
    for container in spec.containers:
        status = _status_of(statuses, container.name)
        if status is None:
            counts.unknown += 1
            continue
        state = _state(status)
        if state.running is not None:
            counts.running += 1
        elif state.terminated is not None:
            _count_stopped(counts, container, spec, state.terminated.exit_code)
            if state.terminated.exit_code == 0:
                counts.succeeded += 1
        elif state.waiting is not None:
            last = _last_terminated(status)
            if last is not None:
                _count_stopped(counts, container, spec, last.exit_code)
            else:
                counts.waiting += 1
        else:
            counts.unknown += 1


def _count_stopped(counts: _Counts, container: Container, spec: PodSpec, exit_code: int) -> None:
    counts.stopped += 1
    if not container_should_restart(container, spec, exit_code):
        counts.stopped_for_good += 1


def get_phase(
    pod: Pod,
    statuses: Sequence[ContainerStatus],
    *,
    pod_is_terminal: bool = False,
    pod_has_initialized: bool | None = None,
) -> str:
    """The pod phase from init and regular container statuses (``getPhase``).

    ``statuses`` holds both kinds, matched by name. ``pod_is_terminal``: the pod worker
    decided the pod is finished, so Always/OnFailure no longer mean "restarting".
    ``pod_has_initialized`` defaults to "some regular container has started".
    """
    spec = pod.spec
    c = _Counts()
    _count_init(c, spec, statuses)
    _count_sidecars(c, spec, statuses)
    _count_regular(c, spec, statuses)
    if c.failed_init > 0:
        return FAILED
    if pod_has_initialized is None:
        pod_has_initialized = has_any_regular_container_started(spec, statuses)
    if (c.pending_init > 0 and not pod_has_initialized) or c.waiting > 0:
        return PENDING
    if c.running > 0 and c.unknown == 0:
        return RUNNING
    if c.running == 0 and c.stopped > 0 and c.unknown == 0:
        if pod_is_terminal and not pod.is_static:
            return SUCCEEDED if c.stopped == c.succeeded else FAILED
        if c.stopped != c.stopped_for_good:
            return RUNNING  # some container is to be restarted
        return SUCCEEDED if c.stopped == c.succeeded else FAILED
    return PENDING


TERMINAL_PHASES = frozenset({SUCCEEDED, FAILED})


def is_terminal_phase(phase: str) -> bool:
    """Succeeded or Failed: the pod is finished and never runs again."""
    return phase in TERMINAL_PHASES


def resolve_phase(computed: str, *, previous_phase: str = "", api_phase: str = "") -> str:
    """A terminal phase is final: the kubelet never moves a pod out of it."""
    if is_terminal_phase(api_phase):
        return api_phase
    if is_terminal_phase(computed):
        return computed
    if is_terminal_phase(previous_phase):
        return previous_phase
    return computed


def format_time(ns: int) -> str:
    """Nanoseconds since the epoch as the API writes times (RFC 3339, seconds, UTC)."""
    return rfc3339(ns // 1_000_000_000)


def container_id(runtime_name: str, raw_id: str) -> str:
    """``<runtime>://<id>``, the API's containerID form."""
    return f"{runtime_name}://{raw_id}"


def _raw_id(api_id: str) -> str:
    return api_id.split("://", 1)[-1]


def volume_mount_statuses(container: Container) -> tuple[VolumeMountStatus, ...]:
    """``volumeMounts`` of a container status: the spec's mounts (the runtime does not
    know volume names); a read-only one says whether it is recursively read-only
    (never here: the kubelet mounts read-only volumes non-recursively)."""
    return tuple(
        VolumeMountStatus(
            name=m.name,
            mount_path=m.mount_path,
            read_only=True if m.read_only else None,
            recursive_read_only="Disabled" if m.read_only else None,
        )
        for m in container.volume_mounts
    )


def _user(info: ContainerInfo) -> ContainerUser | None:
    if info.user is None:
        return None
    return ContainerUser(
        linux=LinuxContainerUser(
            uid=info.user.uid,
            gid=info.user.gid,
            supplemental_groups=info.user.supplemental_groups,
        )
    )


def _with_runtime_fields(
    status: ContainerStatus,
    info: ContainerInfo,
    container: Container,
    old: ContainerStatus | None,
) -> ContainerStatus:
    """What upstream adds to a container the runtime knows: the resources it runs with
    (``container`` is the pod's as it runs, its allocation, read back from the runtime
    where it reports other values -- a resize not yet applied; ``resources: {}`` without
    any), the allocation's requests as ``allocatedResources``, the process's user, and
    the volume mounts (kept from before: they never change)."""
    resources = container.resources or ResourceRequirements()
    mounts = old.volume_mounts if old is not None else volume_mount_statuses(container)
    return attrs.evolve(
        status,
        resources=_running(resources, info.resources),
        allocated_resources=dict(resources.requests),
        user=_user(info),
        volume_mounts=mounts,
    )


def _milli(milli: int) -> Quantity:
    return Quantity(str(milli // 1000) if milli % 1000 == 0 else f"{milli}m")


def _binary(value: int) -> Quantity:
    for suffix, size in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if value % size == 0:
            return Quantity(f"{value // size}{suffix}")
    return Quantity(str(value))


def _running(
    allocated: ResourceRequirements, running: RunningResources | None
) -> ResourceRequirements:
    """The allocation's limits and requests, each CPU limit, CPU request and memory limit
    the runtime reports otherwise replaced by what it reports (upstream keeps the
    allocation's quantity where the runtime's value is the same)."""
    limits, requests = dict(allocated.limits), dict(allocated.requests)
    if running is None:
        return ResourceRequirements(limits=limits, requests=requests)
    quota, period, shares = running.cpu_quota, running.cpu_period, running.cpu_shares
    if "cpu" in limits and quota > 0 and period > 0:
        milli = quota * 1000 // period
        if to_millicores(limits["cpu"]) != milli:
            limits["cpu"] = _milli(milli)
    cpu_request = to_millicores(requests.get("cpu"))
    if "cpu" in requests and shares > 0 and milli_cpu_to_shares(cpu_request) != shares:
        requests["cpu"] = _milli(shares * 1000 // 1024)
    memory = running.memory_limit
    if "memory" in limits and memory > 0 and to_bytes(limits["memory"]) != memory:
        limits["memory"] = _binary(memory)
    return ResourceRequirements(limits=limits, requests=requests)


def _convert_one(
    info: ContainerInfo, old: ContainerStatus | None, runtime_name: str
) -> ContainerStatus:
    cid = container_id(runtime_name, info.id)
    restart_count = info.restart_count
    state: ContainerState
    if info.state is ContainerRunState.RUNNING:
        state = ContainerState(
            running=ContainerStateRunning(started_at=format_time(info.started_at)),
        )
    elif info.state is ContainerRunState.CREATED:
        state = ContainerState(waiting=ContainerStateWaiting())
    elif info.state is ContainerRunState.EXITED:
        state = ContainerState(
            terminated=ContainerStateTerminated(
                exit_code=info.exit_code,
                reason=info.reason,
                message=info.message,
                started_at=format_time(info.started_at),
                finished_at=format_time(info.finished_at),
                container_id=cid,
            ),
        )
    elif old is not None and _state(old).running is not None:
        # It ran and can no longer be found: it stopped, we do not know how. Say so,
        # rather than "waiting", so a run-once pod is not run twice.
        state = ContainerState(
            terminated=ContainerStateTerminated(
                exit_code=_UNKNOWN_EXIT_CODE,
                reason=CONTAINER_STATUS_UNKNOWN,
                message=_MSG_NOT_LOCATED,
            ),
        )
        restart_count = old.restart_count + 1
    else:
        state = ContainerState(waiting=ContainerStateWaiting())
    return ContainerStatus(
        name=info.name,
        state=state,
        restart_count=restart_count,
        image=info.image,
        image_id=info.image_ref,
        container_id=cid,
    )


def api_container_statuses(
    pod: Pod,
    runtime: RuntimePodStatus,
    previous: Sequence[ContainerStatus],
    containers: Sequence[Container],
    *,
    is_init: bool,
    runtime_name: str = "containerd",
    waiting_reasons: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[ContainerStatus, ...]:
    """API statuses for ``containers`` (one kind: init or regular), as upstream builds them.

    ``previous``: the statuses last reported for this kind. ``waiting_reasons``: the
    last sync error per container name, ``(reason, message)`` such as
    ``("CrashLoopBackOff", "back-off 10s restarting failed container=...")``; it is
    shown as Waiting for a container that is due to be (re)started.
    """
    default_reason = POD_INITIALIZING if pod.spec.init_containers else CONTAINER_CREATING
    old_by_name = {s.name: s for s in previous}
    statuses = _starting_statuses(containers, old_by_name, default_reason)
    _mark_vanished(pod, runtime, containers, old_by_name, statuses, default_reason)
    seen: dict[str, int] = {}
    specs = {c.name: c for c in containers}
    newest_first = sorted(runtime.containers, key=lambda c: c.created_at, reverse=True)
    for info in newest_first:
        if info.name not in statuses or seen.get(info.name, 0) >= 2:
            continue
        old = old_by_name.get(info.name)
        converted = _convert_one(info, old, runtime_name)
        converted = _with_runtime_fields(converted, info, specs[info.name], old)
        if seen.get(info.name, 0) == 0:
            statuses[info.name] = converted
        else:
            statuses[info.name] = attrs.evolve(statuses[info.name], last_state=converted.state)
        seen[info.name] = seen.get(info.name, 0) + 1
    _show_waiting(pod, runtime, containers, statuses, waiting_reasons or {}, is_init=is_init)
    if is_init:
        return tuple(statuses[c.name] for c in containers)
    return tuple(sorted(statuses.values(), key=lambda s: s.name))


def _starting_statuses(
    containers: Sequence[Container],
    old_by_name: Mapping[str, ContainerStatus],
    default_reason: str,
) -> dict[str, ContainerStatus]:
    """Every container Waiting with the default reason; a terminated one as it was
    reported, the others keeping their restart count and last state."""
    statuses: dict[str, ContainerStatus] = {}
    for container in containers:
        status = ContainerStatus(
            name=container.name,
            image=container.image,
            state=ContainerState(waiting=ContainerStateWaiting(reason=default_reason)),
            volume_mounts=volume_mount_statuses(container),
        )
        old = old_by_name.get(container.name)
        if old is not None:
            if _state(old).terminated is not None:
                status = old
            else:
                status = attrs.evolve(
                    status, restart_count=old.restart_count, last_state=old.last_state
                )
        statuses[container.name] = status
    return statuses


def _mark_vanished(
    pod: Pod,
    runtime: RuntimePodStatus,
    containers: Sequence[Container],
    old_by_name: Mapping[str, ContainerStatus],
    statuses: dict[str, ContainerStatus],
    default_reason: str,
) -> None:
    """A container that used to run and has vanished from the runtime: record that it
    stopped, so the pod does not fall back to Pending."""
    runtime_names = {c.name for c in runtime.containers}
    for container in containers:
        if container.name in runtime_names:
            continue
        old = old_by_name.get(container.name)
        if old is None or _state(old).terminated is not None or _state(old).running is None:
            continue
        status = statuses[container.name]
        waiting = _state(status).waiting
        if waiting is None or waiting.reason != default_reason or _last_terminated(status):
            continue
        statuses[container.name] = attrs.evolve(
            status,
            last_state=ContainerState(
                terminated=ContainerStateTerminated(
                    exit_code=_UNKNOWN_EXIT_CODE,
                    reason=CONTAINER_STATUS_UNKNOWN,
                    message=_MSG_DELETED,
                ),
            ),
            restart_count=status.restart_count
            + (1 if pod.metadata.deletion_timestamp is None else 0),
        )


def _show_waiting(
    pod: Pod,
    runtime: RuntimePodStatus,
    containers: Sequence[Container],
    statuses: dict[str, ContainerStatus],
    reasons: Mapping[str, tuple[str, str]],
    *,
    is_init: bool,
) -> None:
    """The last sync's error as Waiting, for a container due to be (re)started."""
    for container in containers:
        if is_init:
            current = runtime.current(container.name)
            if (
                current is not None
                and current.state is ContainerRunState.EXITED
                and current.exit_code == 0
            ):
                continue  # a completed init container is never shown waiting again
        if not should_container_be_restarted(container, pod, runtime):
            continue
        if container.name not in reasons:
            continue
        reason, message = reasons[container.name]
        status = statuses[container.name]
        last = status.state if _state(status).terminated is not None else status.last_state
        statuses[container.name] = attrs.evolve(
            status,
            last_state=last,
            state=ContainerState(waiting=ContainerStateWaiting(reason=reason, message=message)),
        )


def apply_probe_results(
    pod: Pod,
    statuses: Sequence[ContainerStatus],
    *,
    is_init: bool,
    started: Collection[str] = (),
    ready: Collection[str] = (),
) -> tuple[ContainerStatus, ...]:
    """Set ``started`` and ``ready`` as the prober manager does.

    ``started`` / ``ready``: runtime IDs (with or without the ``<runtime>://`` prefix)
    whose startup / readiness probe last succeeded. A running container without that
    probe counts as started / ready. A plain init container is ready once it exited 0.
    """
    started_ids = {_raw_id(i) for i in started}
    ready_ids = {_raw_id(i) for i in ready}
    specs = {c.name: c for c in (pod.spec.init_containers if is_init else pod.spec.containers)}
    result = []
    for status in statuses:
        spec = specs.get(status.name)
        state = _state(status)
        raw = _raw_id(status.container_id)
        is_started = state.running is not None and (
            spec is None or spec.startup_probe is None or raw in started_ids
        )
        if is_init and spec is not None and not is_restartable_init_container(spec):
            is_ready = state.terminated is not None and state.terminated.exit_code == 0
        else:
            is_ready = is_started and (
                spec is None or spec.readiness_probe is None or raw in ready_ids
            )
        result.append(attrs.evolve(status, started=is_started, ready=is_ready))
    return tuple(result)


def convert_container_statuses(
    pod: Pod,
    runtime: RuntimePodStatus,
    previous: PodStatus | None = None,
    *,
    runtime_name: str = "containerd",
    waiting_reasons: Mapping[str, tuple[str, str]] | None = None,
    started: Collection[str] = (),
    ready: Collection[str] = (),
) -> tuple[tuple[ContainerStatus, ...], tuple[ContainerStatus, ...]]:
    """(init container statuses, container statuses), probe results applied.

    ``previous``: the pod status last reported (status manager, else the API's).
    """
    init = api_container_statuses(
        pod,
        runtime,
        previous.init_container_statuses if previous else (),
        pod.spec.init_containers,
        is_init=True,
        runtime_name=runtime_name,
        waiting_reasons=waiting_reasons,
    )
    regular = api_container_statuses(
        pod,
        runtime,
        previous.container_statuses if previous else (),
        pod.spec.containers,
        is_init=False,
        runtime_name=runtime_name,
        waiting_reasons=waiting_reasons,
    )
    return (
        apply_probe_results(pod, init, is_init=True, started=started, ready=ready),
        apply_probe_results(pod, regular, is_init=False, started=started, ready=ready),
    )


def ephemeral_container_statuses(
    pod: Pod,
    runtime: RuntimePodStatus,
    previous: Sequence[ContainerStatus],
    *,
    runtime_name: str = "containerd",
    waiting_reasons: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[ContainerStatus, ...]:
    """``ephemeralContainerStatuses``: built as the regular ones (sorted by name); no
    probe ever looks at them, so ``started`` stays unset and ``ready`` false."""
    return api_container_statuses(
        pod,
        runtime,
        previous,
        pod.spec.ephemeral_containers,
        is_init=False,
        runtime_name=runtime_name,
        waiting_reasons=waiting_reasons,
    )
