"""After a pass: reclaim on the node first, then at most one pod, then the evicted status.

- ``node_reclaim``: which node-level reclaim runs for a signal before any pod is touched
  (dead containers, then unused images), depending on how the filesystems are split
  (``buildSignalToNodeReclaimFuncs``). Memory and PIDs have none.
- ``choose_eviction``: the first pod in ranking order that is not critical (static,
  mirror, or priority ≥ 2e9: those are never evicted). Hard thresholds give it 1 s to
  stop; soft ones ``evictionMaxPodGracePeriod``, or the pod's own grace period when
  shorter.
- ``local_storage_evictions``: pods over an emptyDir ``sizeLimit``, their pod-wide
  ephemeral-storage limit, or a container's limit; each is evicted with 1 s.
  ``local_storage_candidates``: the pods it may evict at all (whose figures it reads).
- ``eviction_conditions``: the ``DisruptionTarget`` condition (reason
  ``TerminationByKubelet``) of threshold evictions; the pod ends Failed, reason
  ``Evicted`` (``REASON``), with the eviction's message.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence

import attrs

from kubelet.api import Pod, PodCondition, parse_quantity
from kubelet.cgroups import resource_limit
from kubelet.stats import PodUsage

from .messages import (
    DISRUPTION_TARGET,
    TERMINATION_BY_KUBELET,
    Message,
    container_storage_limit_message,
    empty_dir_limit_message,
    eviction_message,
    pod_storage_limit_message,
)
from .observations import Observations
from .thresholds import EPHEMERAL_STORAGE, SIGNAL_RESOURCE, Signal, Threshold

__all__ = [
    "IMMEDIATE_GRACE_PERIOD",
    "Eviction",
    "Reclaim",
    "choose_eviction",
    "eviction_conditions",
    "local_storage_candidates",
    "local_storage_evictions",
    "node_reclaim",
    "resource_to_reclaim",
]

IMMEDIATE_GRACE_PERIOD = 1
"""Seconds a pod gets when it must go now (hard thresholds, local storage limits)."""

EMPTY_DIR_LIMIT = "emptydirfs.limit"
POD_STORAGE_LIMIT = "ephemeralpodfs.limit"
CONTAINER_STORAGE_LIMIT = "ephemeralcontainerfs.limit"

IsCritical = Callable[[Pod], bool]


class Reclaim(enum.Enum):
    """Node-level reclaim, in the order it runs."""

    CONTAINERS = "DeleteAllUnusedContainers"
    IMAGES = "DeleteUnusedImages"


_NODEFS = (Signal.NODEFS_AVAILABLE, Signal.NODEFS_INODES_FREE)
_IMAGEFS = (Signal.IMAGEFS_AVAILABLE, Signal.IMAGEFS_INODES_FREE)
_CONTAINERFS = (Signal.CONTAINERFS_AVAILABLE, Signal.CONTAINERFS_INODES_FREE)
_BOTH = (Reclaim.CONTAINERS, Reclaim.IMAGES)


def node_reclaim(
    signal: Signal, dedicated_image_fs: bool, split_container_fs: bool
) -> tuple[Reclaim, ...]:
    """What to reclaim on the node for ``signal`` before evicting pods."""
    if signal not in (*_NODEFS, *_IMAGEFS, *_CONTAINERFS):
        return ()
    if dedicated_image_fs and not split_container_fs:
        return () if signal in _NODEFS else _BOTH
    if dedicated_image_fs and split_container_fs:
        return (Reclaim.IMAGES,) if signal in _IMAGEFS else (Reclaim.CONTAINERS,)
    return _BOTH


def resource_to_reclaim(act_on: Sequence[Threshold]) -> tuple[Threshold, str] | None:
    """The first threshold (in eviction priority order) with a resource to reclaim."""
    for t in act_on:
        resource = SIGNAL_RESOURCE.get(t.signal)
        if resource is not None:
            return t, resource
    return None


@attrs.frozen
class Eviction:
    pod: Pod
    grace_period_override: int
    message: Message
    disruption_condition: bool
    """whether the status gets the DisruptionTarget condition (threshold evictions)"""
    metric_signal: str
    """the label of upstream's evictions counter: the signal, or a *.limit pseudo-signal"""


def _grace(threshold: Threshold, pod: Pod, max_pod_grace_period: int) -> int:
    if threshold.hard:
        return IMMEDIATE_GRACE_PERIOD
    own = pod.spec.termination_grace_period_seconds
    return max_pod_grace_period if own is None else min(max_pod_grace_period, own)


def choose_eviction(
    threshold: Threshold,
    resource: str,
    act_on: Sequence[Threshold],
    observations: Observations,
    ranked: Sequence[Pod],
    stats: Mapping[str, PodUsage],
    *,
    max_pod_grace_period: int,
    is_critical: IsCritical,
    pod_level_resources: bool = True,
) -> Eviction | None:
    """The pod to evict for ``threshold`` (None: only critical pods are left)."""
    for pod in ranked:
        if is_critical(pod):
            continue
        message = eviction_message(
            resource,
            pod,
            stats.get(pod.uid),
            act_on,
            observations,
            pod_level_resources=pod_level_resources,
        )
        return Eviction(
            pod=pod,
            grace_period_override=_grace(threshold, pod, max_pod_grace_period),
            message=message,
            disruption_condition=True,
            metric_signal=str(threshold.signal),
        )
    return None


def _empty_dir_violation(pod: Pod, stats: PodUsage) -> str | None:
    used = {v.name: v.fs.used for v in stats.volumes}
    for volume in pod.spec.volumes:
        if volume.empty_dir is None:
            continue
        limit_text = volume.empty_dir.get("sizeLimit")
        volume_used = used.get(volume.name)
        if limit_text is None or volume_used is None:
            continue
        limit = parse_quantity(limit_text)
        if limit.amount > 0 and volume_used > limit.amount:
            return empty_dir_limit_message(volume.name, str(limit))
    return None


def _pod_limit_violation(pod: Pod, stats: PodUsage) -> str | None:
    limit = resource_limit(pod, EPHEMERAL_STORAGE)
    if limit is None:
        return None
    es = stats.ephemeral_storage
    used = es.used if es is not None and es.used is not None else 0
    return pod_storage_limit_message(str(limit)) if used > limit.amount else None


def _container_limit_violation(pod: Pod, stats: PodUsage, dedicated_image_fs: bool) -> str | None:
    limits = {}
    for c in pod.spec.containers:
        text = c.resources.limits.get(EPHEMERAL_STORAGE) if c.resources is not None else None
        if text is not None and parse_quantity(text).value() != 0:
            limits[c.name] = parse_quantity(text)
    for usage in stats.containers:
        limit = limits.get(usage.name)
        if limit is None:
            continue
        used = usage.logs.used or 0 if usage.logs is not None else 0
        if not dedicated_image_fs and usage.rootfs is not None:
            used += usage.rootfs.used or 0
        if used > limit.amount:
            return container_storage_limit_message(usage.name, str(limit))
    return None


def _first_violation(pod: Pod, usage: PodUsage, dedicated_image_fs: bool) -> tuple[str, str] | None:
    """(pseudo-signal, message) of the first limit the pod is over, in upstream's order."""
    text = _empty_dir_violation(pod, usage)
    if text is not None:
        return EMPTY_DIR_LIMIT, text
    text = _pod_limit_violation(pod, usage)
    if text is not None:
        return POD_STORAGE_LIMIT, text
    text = _container_limit_violation(pod, usage, dedicated_image_fs)
    return (CONTAINER_STORAGE_LIMIT, text) if text is not None else None


def local_storage_candidates(pods: Sequence[Pod], *, is_critical: IsCritical) -> set[str]:
    """The UIDs of the pods ``local_storage_evictions`` may evict, whatever their figures
    (the others' need not be read): not critical, with an emptyDir ``sizeLimit`` or an
    ephemeral-storage limit on a container (the pod-wide limit sums the containers' and
    init containers'; a container's own needs one too)."""
    return {p.uid for p in pods if _local_storage_limited(p) and not is_critical(p)}


def _local_storage_limited(pod: Pod) -> bool:
    """An emptyDir sizeLimit, or what makes ``resource_limit`` of ephemeral storage not None
    (a limit on any container; asked of every pod at every pass: no sum made)."""
    for volume in pod.spec.volumes:
        if volume.empty_dir is not None and volume.empty_dir.get("sizeLimit") is not None:
            return True
    for c in (*pod.spec.containers, *pod.spec.init_containers):
        if c.resources is not None and c.resources.limits.get(EPHEMERAL_STORAGE) is not None:
            return True
    return False


def local_storage_evictions(
    pods: Sequence[Pod],
    stats: Mapping[str, PodUsage],
    *,
    dedicated_image_fs: bool,
    is_critical: IsCritical,
) -> list[Eviction]:
    """Every non-critical pod over one of its local storage limits, in ``pods`` order."""
    out: list[Eviction] = []
    for pod in pods:
        usage = stats.get(pod.uid)
        if usage is None or is_critical(pod):
            continue
        found = _first_violation(pod, usage, dedicated_image_fs)
        if found is not None:
            signal, text = found
            out.append(
                Eviction(
                    pod=pod,
                    grace_period_override=IMMEDIATE_GRACE_PERIOD,
                    message=Message(text),
                    disruption_condition=False,
                    metric_signal=signal,
                )
            )
    return out


def eviction_conditions(eviction: Eviction, now: str) -> tuple[PodCondition, ...]:
    """The conditions an evicted pod gains (``now``: RFC 3339): ``DisruptionTarget``
    for a threshold eviction, none for a local storage limit. Its status is Failed with
    reason ``Evicted`` and the eviction's message (the pod syncer's kill)."""
    if not eviction.disruption_condition:
        return ()
    condition = PodCondition(
        type=DISRUPTION_TARGET,
        status="True",
        observed_generation=eviction.pod.metadata.generation,
        last_transition_time=now,
        reason=TERMINATION_BY_KUBELET,
        message=eviction.message.text,
    )
    return (condition,)
