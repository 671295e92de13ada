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

from kubelet.api.pod import Pod, Toleration

from .messages import REASON, node_condition_message
from .thresholds import MEMORY_PRESSURE

__all__ = ["MEMORY_PRESSURE_TAINT", "Refusal", "admit", "tolerates"]

MEMORY_PRESSURE_TAINT = "node.kubernetes.io/memory-pressure"
BEST_EFFORT = "BestEffort"


@attrs.frozen
class Refusal:
    reason: str
    message: str


def tolerates(toleration: Toleration, key: str, effect: str, value: str = "") -> bool:
    """Whether one toleration tolerates the taint ``key=value:effect`` (``ToleratesTaint``)."""
    if toleration.effect and toleration.effect != effect:
        return False
    if toleration.key and toleration.key != key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("", "Equal"):
        return toleration.value == value
    return False


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
        if any(tolerates(t, MEMORY_PRESSURE_TAINT, "NoSchedule") for t in pod.spec.tolerations):
            return None
    return Refusal(REASON, node_condition_message(conditions))
