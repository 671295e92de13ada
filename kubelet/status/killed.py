"""The status of a pod the kubelet itself stopped (graceful node shutdown), pure.

Upstream's killPodFunc takes a status function: the pod ends Failed with the killer's
reason and message, and its conditions gain the killer's (a ``DisruptionTarget``), an
existing condition of the same type being replaced.
"""

from __future__ import annotations

import attrs

from kubelet.api.pod import PodCondition, PodStatus

__all__ = ["Kill", "killed_status"]


@attrs.frozen
class Kill:
    """Why the kubelet stopped a pod, as its status will say."""

    reason: str
    message: str
    conditions: tuple[PodCondition, ...] = ()


def killed_status(status: PodStatus, kill: Kill) -> PodStatus:
    """``status`` (of the stopped pod) as the kill reports it."""
    replaced = {c.type for c in kill.conditions}
    conditions = (
        *(c for c in status.conditions if c.type not in replaced),
        *kill.conditions,
    )
    return attrs.evolve(
        status, phase="Failed", reason=kill.reason, message=kill.message, conditions=conditions
    )
