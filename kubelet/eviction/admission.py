"""Admission under pressure: the eviction manager's admit handler (upstream ``Admit``).

No pressure: every pod is admitted. Critical pods (static, mirror, priority ≥ 2e9) are
always admitted. Under memory pressure alone, pods that are not BestEffort are
admitted, and BestEffort pods only if they tolerate the
``node.kubernetes.io/memory-pressure:NoSchedule`` taint. Any other pressure (disk, PID)
refuses every other pod. A refusal has reason ``Evicted`` and the message
"The node had condition: [MemoryPressure]. ".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from kubelet.api import Pod, Taint
from kubelet.decisions import tolerates

from .messages import REASON, node_condition_message
from .thresholds import MEMORY_PRESSURE

__all__ = ["MEMORY_PRESSURE_TAINT", "Refusal", "admit"]

MEMORY_PRESSURE_TAINT = "node.kubernetes.io/memory-pressure"
BEST_EFFORT = "BestEffort"
_MEMORY_PRESSURE_NO_SCHEDULE = Taint(key=MEMORY_PRESSURE_TAINT, effect="NoSchedule")


@attrs.frozen
class Refusal:
    reason: str
    message: str


def admit(
    pod: Pod,
    conditions: Sequence[str],
    *,
    is_critical: Callable[[Pod], bool],
    qos: Callable[[Pod], str],
) -> Refusal | None:
    """None to admit ``pod`` on a node reporting ``conditions``, else why not."""
    if not conditions or is_critical(pod):
        return None
    if tuple(conditions) == (MEMORY_PRESSURE,):
        if qos(pod) != BEST_EFFORT:
            return None
        if any(tolerates(t, _MEMORY_PRESSURE_NO_SCHEDULE) for t in pod.spec.tolerations):
            return None
    return Refusal(REASON, node_condition_message(conditions))
