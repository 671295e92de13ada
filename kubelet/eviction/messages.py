"""What an evicted pod and its event say: upstream's exact words and annotations.

Users grep for these: the status reason ``Evicted``, messages such as
"The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.
Container app was using 300Mi, request is 100Mi, has larger consumption of memory. "
(each sentence ends in a space, as upstream's), and the event annotations
``offending_containers``, ``offending_containers_usage`` and ``starved_resource``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import attrs

from kubelet.api import Format, Pod, format_quantity, parse_quantity
from kubelet.cgroups import is_pod_level_resources_set
from kubelet.stats import PodUsage

from .observations import Observations
from .thresholds import EPHEMERAL_STORAGE, MEMORY, SIGNAL_RESOURCE, Threshold, is_count_signal

__all__ = [
    "DISRUPTION_TARGET",
    "OFFENDING_CONTAINERS",
    "OFFENDING_CONTAINERS_USAGE",
    "OFFENDING_POD",
    "OFFENDING_POD_USAGE",
    "REASON",
    "STARVED_RESOURCE",
    "TERMINATION_BY_KUBELET",
    "Message",
    "container_storage_limit_message",
    "empty_dir_limit_message",
    "eviction_message",
    "node_condition_message",
    "pod_storage_limit_message",
]

REASON = "Evicted"
OFFENDING_CONTAINERS = "offending_containers"
OFFENDING_CONTAINERS_USAGE = "offending_containers_usage"
OFFENDING_POD = "offending_pod"
OFFENDING_POD_USAGE = "offending_pod_usage"
STARVED_RESOURCE = "starved_resource"
DISRUPTION_TARGET = "DisruptionTarget"
TERMINATION_BY_KUBELET = "TerminationByKubelet"
THRESHOLD_MET_EVENT = "EvictionThresholdMet"


@attrs.frozen
class Message:
    text: str
    annotations: Mapping[str, str] = attrs.field(factory=dict)


def _bytes(n: int) -> str:
    return format_quantity(n, Format.BINARY_SI)


def _threshold_met(
    resource: str, thresholds: Sequence[Threshold], observations: Observations
) -> str:
    """ "Threshold quantity: …, available: …. " for the first threshold of ``resource``."""
    for t in thresholds:
        if SIGNAL_RESOURCE.get(t.signal) != resource:
            continue
        observed = observations.get(t.signal)
        if observed is None:
            continue
        available = (
            format_quantity(observed.available, Format.DECIMAL_SI)
            if is_count_signal(t.signal)
            else _bytes(observed.available)
        )
        return f"Threshold quantity: {t.value.printed(observed.capacity)}, available: {available}. "
    return ""


def _request(pod: Pod, container_name: str, resource: str) -> tuple[Fraction, str]:
    """The container's request for ``resource`` and how it prints ("0" when unset)."""
    for c in (*pod.spec.containers, *pod.spec.init_containers):
        if c.name == container_name:
            text = c.resources.requests.get(resource) if c.resources is not None else None
            if text is None:
                break
            q = parse_quantity(text)
            return q.amount, str(q)
    return Fraction(0), "0"


def eviction_message(
    resource: str,
    pod: Pod,
    stats: PodUsage | None,
    thresholds: Sequence[Threshold],
    observations: Observations,
    *,
    pod_level_resources: bool = True,
) -> Message:
    """The message and event annotations for evicting ``pod`` to reclaim ``resource``."""
    text = f"The node was low on resource: {resource}. "
    text += _threshold_met(resource, thresholds, observations)
    if stats is None:
        return Message(text)
    annotations: dict[str, str] = {}
    if resource == MEMORY and pod_level_resources and is_pod_level_resources_set(pod):
        assert pod.spec.resources is not None
        request = pod.spec.resources.requests.get(resource)
        if request is not None and stats.memory is not None:
            usage = _bytes(stats.memory.working_set or 0)
            text += (
                f"Pod {pod.metadata.name} was using {usage}, request is "
                f"{parse_quantity(request)}, has larger consumption of {resource}. "
            )
            annotations[OFFENDING_POD] = pod.metadata.name
            annotations[OFFENDING_POD_USAGE] = usage
    names = {c.name for c in (*pod.spec.containers, *pod.spec.init_containers)}
    offenders: list[str] = []
    usages: list[str] = []
    for c in stats.containers:
        if c.name not in names:
            continue
        used: int | None = None
        if resource == EPHEMERAL_STORAGE:
            root, logs = c.rootfs, c.logs
            if root and logs and root.used is not None and logs.used is not None:
                used = root.used + logs.used
        elif resource == MEMORY and c.memory is not None:
            used = c.memory.working_set
        requested, request_text = _request(pod, c.name, resource)
        if used is not None and used > requested:
            text += (
                f"Container {c.name} was using {_bytes(used)}, request is {request_text}, "
                f"has larger consumption of {resource}. "
            )
            offenders.append(c.name)
            usages.append(_bytes(used))
    annotations[OFFENDING_CONTAINERS] = ",".join(offenders)
    annotations[OFFENDING_CONTAINERS_USAGE] = ",".join(usages)
    annotations[STARVED_RESOURCE] = resource
    return Message(text, annotations)


def node_condition_message(conditions: Sequence[str]) -> str:
    """Admission refusal under pressure: "The node had condition: [DiskPressure]. "."""
    return f"The node had condition: [{' '.join(conditions)}]. "


def empty_dir_limit_message(volume: str, limit: str) -> str:
    return f'Usage of EmptyDir volume "{volume}" exceeds the limit "{limit}". '


def pod_storage_limit_message(limit: str) -> str:
    return f"Pod ephemeral local storage usage exceeds the total limit of containers {limit}. "


def container_storage_limit_message(container: str, limit: str) -> str:
    return f'Container {container} exceeded its local ephemeral storage limit "{limit}". '
