"""In-place pod resize (``InPlacePodVerticalScaling``, GA): refused, and said so.

A running pod's resources can change in the API (the ``pods/resize`` subresource).
Upstream's kubelet then checks that the new ones fit, makes them the pod's *allocation*
and applies them (``UpdateContainerResources``, the pod cgroup). This kubelet applies no
resize: a pod keeps the allocation it was admitted with, and everything that sizes the
pod reads that allocation, never the resized spec -- the containers it (re)starts, the
pod cgroup, the requests admission counts, and the status it reports
(``allocatedResources`` and ``resources``, which upstream fills from the allocation and
from what runs). While the spec asks for other resources, the pod carries upstream's
condition for a resize it will not do: ``PodResizePending``, reason ``Infeasible``, with
a Warning event ``ResizeInfeasible`` (upstream's message shape) each time a new request
is refused. Undoing the resize clears it; deleting and recreating the pod changes them.

The allocation outlives a kubelet restart on the runtime: each container records the
resources it was created with (and its pod's pod-level ones) in annotations, and a
restarted kubelet takes them from the newest instance of each container before it
admits its pods again.
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
    "EVENT_INFEASIBLE",
    "INFEASIBLE",
    "IN_PROGRESS",
    "NOT_SUPPORTED",
    "PENDING",
    "Allocation",
    "allocated_pod",
    "allocation_of",
    "announced",
    "decode_resources",
    "encode_resources",
    "event_message",
    "pending_condition",
    "resize_requested",
    "same_resources",
]

PENDING = "PodResizePending"
IN_PROGRESS = "PodResizeInProgress"
CONDITIONS = (PENDING, IN_PROGRESS)
"""The resize conditions: the kubelet's own (upstream's ``PodConditionByKubelet``)."""
INFEASIBLE = "Infeasible"
EVENT_INFEASIBLE = "ResizeInfeasible"
NOT_SUPPORTED = (
    "In-place resize is not supported by this kubelet: the containers keep the resources "
    "they were started with"
)


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


def pending_condition(
    pod: Pod, allocated: Pod, old: PodCondition | None, now: str
) -> PodCondition | None:
    """``PodResizePending`` (Infeasible) while ``pod``'s spec asks for other resources
    than it runs with; None otherwise. ``old``: the condition last reported. As upstream
    sets it once per request, it is kept as it was while the request stands; a new one (a
    later generation) takes the time now as its probe time, and its transition time moves
    only when the reason does."""
    if not resize_requested(pod, allocated):
        return None
    generation = pod.metadata.generation or None
    if old is not None and (old.status, old.reason) == ("True", INFEASIBLE):
        if (old.message, old.observed_generation) == (NOT_SUPPORTED, generation):
            return old
        transition = old.last_transition_time
    else:
        transition = now
    return PodCondition(
        type=PENDING,
        status="True",
        observed_generation=generation,
        last_probe_time=now,
        last_transition_time=transition,
        reason=INFEASIBLE,
        message=NOT_SUPPORTED,
    )


def announced(old: PodCondition | None, new: PodCondition | None) -> bool:
    """``new`` is a refusal not reported before (upstream's event goes with each)."""
    if new is None:
        return False
    if old is None:
        return True
    return (old.reason, old.message, old.observed_generation) != (
        new.reason,
        new.message,
        new.observed_generation,
    )


def _summary(container: Container) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if container.resources is not None and container.resources.limits:
        resources["limits"] = dict(sorted(container.resources.limits.items()))
    if container.resources is not None and container.resources.requests:
        resources["requests"] = dict(sorted(container.resources.requests.items()))
    return {"name": container.name, "resources": resources}


def event_message(pod: Pod, reason: str, message: str) -> str:
    """The ``Resize<reason>`` event's text, upstream's: ``Pod resize <reason>: `` and the
    JSON of the resources the spec asks for, its generation and why."""
    body: dict[str, Any] = {}
    if pod.spec.init_containers:
        body["initContainers"] = [_summary(c) for c in pod.spec.init_containers]
    if pod.spec.containers:
        body["containers"] = [_summary(c) for c in pod.spec.containers]
    body["generation"] = pod.metadata.generation or 0
    if message:
        body["error"] = message
    return f"Pod resize {reason}: {go_json(body)}"
