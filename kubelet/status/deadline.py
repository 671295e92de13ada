"""``spec.activeDeadlineSeconds``: how long a pod may be active on the node.

Pure, after upstream's active deadline handler: the time counts from the pod's
``status.startTime`` (the kubelet's own, else the API's); a pod without a deadline or
not started yet has none. Once it is used up the pod is killed and reported Failed with
reason ``DeadlineExceeded`` and upstream's message.
"""

from __future__ import annotations

from kubelet.api import Pod
from kubelet.goformat import parse_rfc3339

__all__ = ["DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED_MESSAGE", "deadline_left"]

DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_EXCEEDED_MESSAGE = "Pod was active on the node longer than the specified deadline"


def deadline_left(pod: Pod, start_time: str | None, now: float) -> float | None:
    """Seconds left before ``pod`` runs out of its active deadline (≤ 0: it has), or
    None when there is no deadline to enforce. ``now``: wall-clock seconds."""
    seconds = pod.spec.active_deadline_seconds
    if seconds is None or not start_time:
        return None
    started = parse_rfc3339(start_time)
    if started is None:
        return None
    return started + seconds - now
