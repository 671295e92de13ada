"""In-place pod resize (``InPlacePodVerticalScaling``, GA): the allocation and what the
status and events say about a resize.

A running pod's resources can change in the API (the ``pods/resize`` subresource). The
kubelet checks that the new ones fit (``pods.resizing``), makes them the pod's
*allocation* and applies them (``runtime.resize``: the pod cgroup and
``UpdateContainerResources``). Everything that sizes a pod reads the allocation, never
the resized spec before it is admitted: the containers it (re)starts, the pod cgroup,
the requests admission counts, and the status it reports (``allocatedResources``).

A resize that waits carries ``PodResizePending`` (reason ``Deferred``: retried when
room frees up; ``Infeasible``: never on this node), with a Warning event
``ResizeDeferred``/``ResizeInfeasible`` each time a new verdict is reached. One admitted
carries ``PodResizeInProgress`` until the runtime runs it (with the error while the
runtime refuses), between the Normal events ``ResizeStarted`` and ``ResizeCompleted``.

The allocation outlives a kubelet restart in upstream's checkpoint file
(``pods.allocstate``); a tree that predates the file recorded it in two container
annotations, still read when the file has no entry for a pod: each container records
the resources it was created with (and its pod's pod-level ones), and a restarted
kubelet takes them from the newest instance of each container.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

import attrs

from kubelet.api import Container, Pod, PodCondition, Quantity, ResourceRequirements, parse_quantity
from kubelet.cri import RuntimePodStatus, labels
from kubelet.goformat import go_json

__all__ = [
    "CONDITIONS",
    "DEFERRED",
    "EVENT_COMPLETED",
    "EVENT_DEFERRED",
    "EVENT_ERROR",
    "EVENT_INFEASIBLE",
    "EVENT_STARTED",
    "INFEASIBLE",
    "IN_PROGRESS",
    "PENDING",
    "REASON_ERROR",
    "TRIGGER_PERIODIC",
    "TRIGGER_PODS_ADDED",
    "TRIGGER_PODS_REMOVED",
    "TRIGGER_POD_RESIZED",
    "TRIGGER_POD_TERMINATED",
    "TRIGGER_POD_UPDATED",
    "Allocation",
    "ResizeState",
    "allocated_pod",
    "allocation_from_spec",
    "allocation_of",
    "decode_resources",
    "encode_resources",
    "event_message",
    "in_progress_condition",
    "pending_condition",
    "resize_conditions",
    "resize_requested",
    "same_resources",
]

PENDING = "PodResizePending"
IN_PROGRESS = "PodResizeInProgress"
CONDITIONS = (PENDING, IN_PROGRESS)
"""The resize conditions: the kubelet's own (upstream's ``PodConditionByKubelet``)."""
INFEASIBLE = "Infeasible"
DEFERRED = "Deferred"
REASON_ERROR = "Error"
"""PodResizeInProgress's reason while the runtime refuses the new resources"""
TRIGGER_POD_RESIZED = "pod_resized"
TRIGGER_POD_UPDATED = "pod_updated"
TRIGGER_PODS_ADDED = "pods_added"
TRIGGER_PODS_REMOVED = "pods_removed"
TRIGGER_POD_TERMINATED = "pod_terminated"
TRIGGER_PERIODIC = "periodic_retry"
"""why Deferred resizes are judged again: upstream's ``retry_trigger`` label values"""

EVENT_INFEASIBLE = "ResizeInfeasible"
EVENT_DEFERRED = "ResizeDeferred"
EVENT_STARTED = "ResizeStarted"
EVENT_COMPLETED = "ResizeCompleted"
EVENT_ERROR = "ResizeError"


# -- the record on the runtime ---------------------------------------------------------------


def encode_resources(resources: ResourceRequirements | None) -> str:
    """The annotation text of ``resources``: limits and requests as JSON (claims never
    change, so they are not recorded)."""
    body: dict[str, Any] = {}
    if resources is not None and resources.limits:
        body["limits"] = dict(resources.limits)
    if resources is not None and resources.requests:
        body["requests"] = dict(resources.requests)
    return go_json(body, sort_keys=True)


def decode_resources(text: str) -> ResourceRequirements | None:
    """``encode_resources``' text read back; None when it is not that (never trusted)."""
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if not isinstance(body, dict) or not set(body) <= {"limits", "requests"}:
        return None
    parts: dict[str, dict[str, Quantity]] = {}
    for key in ("limits", "requests"):
        values = body.get(key, {})
        if not isinstance(values, dict):
            return None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
            return None
        parts[key] = {k: Quantity(v) for k, v in values.items()}
    return ResourceRequirements(limits=parts["limits"], requests=parts["requests"])


# -- the allocation ----------------------------------------------------------------------------


@attrs.frozen
class Allocation:
    """The resources a pod runs with: each container's (init and regular, by name) and
    the pod-level ones."""

    containers: Mapping[str, ResourceRequirements | None]
    pod: ResourceRequirements | None = None


def _resizable(pod: Pod) -> Iterator[Container]:
    """The containers whose resources a resize may change (ephemeral ones have none)."""
    yield from pod.spec.init_containers
    yield from pod.spec.containers


def allocation_from_spec(pod: Pod) -> Allocation:
    """``pod``'s spec as its allocation (admitted, or a resize admitted)."""
    return Allocation({c.name: c.resources for c in _resizable(pod)}, pod.spec.resources)


def allocation_of(pod: Pod, runtime: RuntimePodStatus | None = None) -> Allocation:
    """What ``pod`` runs with, decided when the kubelet first meets it: its spec's
    resources, except where ``runtime`` already holds containers of it created with
    others (a restarted kubelet, the spec resized meanwhile): the newest instance of each
    container says, and the newest recording container says for the pod level."""
    containers = {c.name: c.resources for c in _resizable(pod)}
    pod_level = pod.spec.resources
    if runtime is None:
        return Allocation(containers, pod_level)
    seen: set[str] = set()
    newest = True
    for info in runtime.containers:  # newest first
        recorded = decode_resources(info.annotations.get(labels.CONTAINER_RESOURCES, ""))
        if recorded is None:
            continue  # created by another kubelet: the spec is all there is
        if newest:
            newest = False
            text = info.annotations.get(labels.POD_RESOURCES)
            pod_level = None if text is None else decode_resources(text) or pod_level
        if info.name in containers and info.name not in seen:
            seen.add(info.name)
            containers[info.name] = recorded
    return Allocation(containers, pod_level)


def _amounts(values: Mapping[str, str]) -> dict[str, Fraction | str]:
    out: dict[str, Fraction | str] = {}
    for name, text in values.items():
        try:
            out[name] = parse_quantity(text).amount
        except ValueError:  # not a quantity: compared as written
            out[name] = text
    return out


def same_resources(a: ResourceRequirements | None, b: ResourceRequirements | None) -> bool:
    """Equal limits and requests, quantities by value ("1" is "1000m"); none is empty."""
    a, b = a or ResourceRequirements(), b or ResourceRequirements()
    if a.limits == b.limits and a.requests == b.requests:
        return True  # as written: no parsing (every pod object met is compared)
    return _amounts(a.limits) == _amounts(b.limits) and _amounts(a.requests) == _amounts(b.requests)


def _allocated(container: Container, allocation: Allocation) -> tuple[Container, bool]:
    if container.name not in allocation.containers:
        return container, False
    wanted = allocation.containers[container.name]
    if same_resources(container.resources, wanted):
        return container, False
    claims = container.resources.claims if container.resources is not None else ()
    wanted = wanted or ResourceRequirements()
    resources = attrs.evolve(wanted, claims=claims)
    return attrs.evolve(container, resources=resources), True


def _containers(
    containers: tuple[Container, ...], allocation: Allocation
) -> tuple[tuple[Container, ...], bool]:
    results = [_allocated(c, allocation) for c in containers]
    return tuple(c for c, _ in results), any(changed for _, changed in results)


def allocated_pod(pod: Pod, allocation: Allocation) -> Pod:
    """``pod`` with its allocation's resources in its spec: what is started, sized,
    counted and reported. ``pod`` itself when they are its spec's."""
    spec = pod.spec
    init, init_changed = _containers(spec.init_containers, allocation)
    regular, regular_changed = _containers(spec.containers, allocation)
    pod_changed = not same_resources(spec.resources, allocation.pod)
    if not (init_changed or regular_changed or pod_changed):
        return pod
    return attrs.evolve(
        pod,
        spec=attrs.evolve(
            spec,
            init_containers=init,
            containers=regular,
            resources=allocation.pod if pod_changed else spec.resources,
        ),
    )


def resize_requested(pod: Pod, allocated: Pod) -> bool:
    """``pod``'s spec asks for other resources than it runs with (``allocated``)."""
    if allocated is pod:
        return False  # the allocation is the spec itself (no resize): nothing to compare
    if not same_resources(pod.spec.resources, allocated.spec.resources):
        return True
    running = {c.name: c.resources for c in _resizable(allocated)}
    return any(
        c.name in running and not same_resources(c.resources, running[c.name])
        for c in _resizable(pod)
    )


# -- what the pod's status and events say ----------------------------------------------------


@attrs.frozen
class ResizeState:
    """Where a pod's resize stands, as its status says: ``pending`` (reason, message,
    generation) while one waits, ``in_progress`` (error or "", generation) while an
    admitted one is not yet what runs."""

    pending: tuple[str, str, int | None] | None = None
    in_progress: tuple[str, int | None] | None = None


def resize_conditions(
    state: ResizeState, old: tuple[PodCondition, ...], now: str
) -> tuple[PodCondition, ...]:
    """The resize conditions ``state`` gives (``old``: the conditions last reported)."""
    before = {c.type: c for c in old if c.type in CONDITIONS}
    out = []
    if state.pending is not None:
        reason, message, generation = state.pending
        out.append(pending_condition(reason, message, generation, before.get(PENDING), now))
    if state.in_progress is not None:
        error, generation = state.in_progress
        out.append(in_progress_condition(error, generation, before.get(IN_PROGRESS), now))
    return tuple(out)


def pending_condition(
    reason: str, message: str, generation: int | None, old: PodCondition | None, now: str
) -> PodCondition:
    """``PodResizePending`` for a resize that waits (``reason``: Deferred or
    Infeasible). ``old``: the condition last reported; kept as it was while the verdict
    stands, its transition time moving only when its reason does."""
    if old is not None and (old.reason, old.message, old.observed_generation) == (
        reason,
        message,
        generation,
    ):
        return old
    transition = old.last_transition_time if old is not None and old.reason == reason else now
    return PodCondition(
        type=PENDING,
        status="True",
        observed_generation=generation,
        last_probe_time=now,
        last_transition_time=transition,
        reason=reason,
        message=message,
    )


def in_progress_condition(
    error: str, generation: int | None, old: PodCondition | None, now: str
) -> PodCondition:
    """``PodResizeInProgress`` while an admitted resize is not yet what runs; ``error``:
    why the runtime refused it last ("" none), reason ``Error`` with it."""
    reason = REASON_ERROR if error else ""
    if old is not None and (old.reason, old.message, old.observed_generation) == (
        reason,
        error,
        generation,
    ):
        return old
    transition = old.last_transition_time if old is not None else now
    return PodCondition(
        type=IN_PROGRESS,
        status="True",
        observed_generation=generation,
        last_probe_time=now,
        last_transition_time=transition,
        reason=reason,
        message=error,
    )


def _summary(container: Container) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if container.resources is not None and container.resources.limits:
        resources["limits"] = dict(sorted(container.resources.limits.items()))
    if container.resources is not None and container.resources.requests:
        resources["requests"] = dict(sorted(container.resources.requests.items()))
    return {"name": container.name, "resources": resources}


def event_message(pod: Pod, reason: str, message: str) -> str:
    """The ``Resize<reason>`` event's text, upstream's: ``Pod resize <reason>: `` (the
    reason as written: ``Deferred``, ``started``, ``completed``, ``error``) and the JSON
    of ``pod``'s resources, its generation and why."""
    body: dict[str, Any] = {}
    if pod.spec.init_containers:
        body["initContainers"] = [_summary(c) for c in pod.spec.init_containers]
    if pod.spec.containers:
        body["containers"] = [_summary(c) for c in pod.spec.containers]
    body["generation"] = pod.metadata.generation or 0
    if message:
        body["error"] = message
    return f"Pod resize {reason}: {go_json(body)}"
