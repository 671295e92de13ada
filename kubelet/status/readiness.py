"""A readiness verdict applied to the status already reported, without a pod sync.

Upstream's ``SetContainerReadiness``: the syncLoop hands every readiness change to the
status manager at once. A pod's worker can be busy for a long time -- stopping a
terminating pod takes up to its grace period, and its sidecars are stopped last -- and
a readiness probe that fails meanwhile must still take the pod out of its Services'
endpoints. So the container's ``ready`` and the pod's ContainersReady and Ready
conditions change in the last status; the next sync builds the same from the probes.

Pure: the pod, its last status, the verdict and the time go in.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kubelet.api import ContainerStatus, Pod, PodCondition, PodStatus

from .generate import containers_ready, pod_ready

__all__ = ["with_container_readiness"]


def _raw_id(container_id: str) -> str:
    return container_id.split("://", 1)[-1]


def _marked(
    statuses: Sequence[ContainerStatus], container_id: str, ready: bool
) -> tuple[tuple[ContainerStatus, ...], bool]:
    """``statuses`` with instance ``container_id`` marked; whether that changed one."""
    out = []
    changed = False
    for status in statuses:
        mine = status.container_id and _raw_id(status.container_id) == container_id
        if mine and status.ready != ready:
            status = attrs.evolve(status, ready=ready)
            changed = True
        out.append(status)
    return tuple(out), changed


def _replaced(
    conditions: Sequence[PodCondition], new: Sequence[PodCondition], now: str
) -> tuple[PodCondition, ...]:
    """``conditions`` with those of ``new``'s types replaced in place (appended when
    missing); a transition time moves only with the status, the generation stays."""
    by_type = {c.type: c for c in new}
    out = []
    for old in conditions:
        cond = by_type.pop(old.type, None)
        if cond is None:
            out.append(old)
            continue
        when = old.last_transition_time if old.status == cond.status else now
        out.append(
            attrs.evolve(
                cond, last_transition_time=when, observed_generation=old.observed_generation
            )
        )
    out.extend(attrs.evolve(c, last_transition_time=now) for c in by_type.values())
    return tuple(out)


def with_container_readiness(
    pod: Pod, status: PodStatus, container_id: str, ready: bool, now: str
) -> PodStatus | None:
    """``status`` with the container instance ``container_id`` (the runtime's ID) ready
    or not, and the pod's ContainersReady and Ready conditions following; None when
    nothing changes (no such instance in the status, or it says so already).

    Sidecars (restartable init containers) count as regular containers do."""
    init, init_changed = _marked(status.init_container_statuses, container_id, ready)
    regular, regular_changed = _marked(status.container_statuses, container_id, ready)
    if not (init_changed or regular_changed):
        return None
    cready = containers_ready(pod, regular, init, status.phase)
    conditions = _replaced(
        status.conditions, (pod_ready(pod, cready, status.conditions), cready), now
    )
    return attrs.evolve(
        status,
        init_container_statuses=init,
        container_statuses=regular,
        conditions=conditions,
    )
