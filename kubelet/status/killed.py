"""Why the kubelet stops a pod itself, and what that does to the pod's status, pure.

Three parts of the kubelet end a pod on their own: graceful node shutdown, eviction and
``activeDeadlineSeconds``. Upstream has one way for them (``killPodNow`` with a status
function; the deadline as a sync handler's verdict); here they share one request, a
``Kill``: the reason and message the pod's status will carry, the grace period it gets
and the conditions (``DisruptionTarget``) it gains. Every status generated for the pod
from then on is Failed with that reason and message -- before the kubelet-owned
conditions are worked out, so Ready and ContainersReady say PodFailed, as upstream's
status manager makes them for a terminal phase -- and carries the kill's conditions,
replacing one of the same type (its transition time kept while its status stays).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kubelet.api import PodCondition

__all__ = ["Kill", "with_kill_conditions"]


@attrs.frozen
class Kill:
    """The kubelet stops a pod for the node: how, and what its status will say."""

    reason: str
    message: str
    grace: int | None = None
    """Seconds the pod gets to stop (None: its own terminationGracePeriodSeconds)."""
    conditions: tuple[PodCondition, ...] = ()
    reclaim: bool = False
    """An eviction: the node wants back what the pod holds, so its containers and files
    go as soon as it has stopped, and it counts as evicted (garbage collection, the
    eviction manager's active pods). Otherwise the stopped containers stay, for their
    logs, until the pod is deleted."""


def with_kill_conditions(
    conditions: Sequence[PodCondition], kill: Kill, now: str
) -> list[PodCondition]:
    """``conditions`` with the kill's in place of those of the same type; a condition
    whose status does not change keeps its transition time (upstream's status manager),
    a new one takes the kill's, else ``now`` (RFC 3339)."""
    before = {c.type: c for c in conditions}
    replaced = {c.type for c in kill.conditions}
    out = [c for c in conditions if c.type not in replaced]
    for condition in kill.conditions:
        old = before.get(condition.type)
        if old is not None and old.status == condition.status and old.last_transition_time:
            when = old.last_transition_time
        else:
            when = condition.last_transition_time or now
        out.append(attrs.evolve(condition, last_transition_time=when))
    return out
