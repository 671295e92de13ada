"""Grace periods: how long a pod, and each of its containers, gets to stop.

Two levels, as upstream:

- the pod level (pod workers): one effective value per terminating pod, which can only
  shrink (deletion grace from the API, an eviction override), floored at 1 s;
- the container level (``killContainer``): the budget for one container, spent first on
  its preStop hook, and what is left is the ``StopContainer`` timeout, never below 2 s
  so a process always gets a moment between SIGTERM and SIGKILL.

While a pod terminates, the pod-level value is passed down as the container override,
so every container gets the same budget. Without an override (a container killed by a
sync: liveness/startup failure, changed spec) the budget comes from the pod: deletion
grace, else the probe's ``terminationGracePeriodSeconds`` for a probe kill, else the
pod's ``terminationGracePeriodSeconds``, else 2 s.
"""

from __future__ import annotations

import enum
import math

from kubelet.api import Container, Pod
from kubelet.goformat import parse_time

__all__ = [
    "MINIMUM_GRACE_PERIOD",
    "MINIMUM_POD_GRACE_PERIOD",
    "KillReason",
    "container_grace_period",
    "kill_grace_period",
    "remaining_deletion_grace",
    "stop_container_timeout",
]

MINIMUM_GRACE_PERIOD = 2
"""``minimumGracePeriodInSeconds``: the least a container gets between SIGTERM and SIGKILL."""
MINIMUM_POD_GRACE_PERIOD = 1


class KillReason(enum.Enum):
    """Why a container is killed; probe kills may use the probe's own grace period."""

    UNKNOWN = "Unknown"
    LIVENESS_PROBE = "LivenessProbe"
    STARTUP_PROBE = "StartupProbe"
    FAILED_POST_START_HOOK = "FailedPostStartHook"


def remaining_deletion_grace(pod: Pod, now: float) -> int | None:
    """What is left of a deleted pod's grace period at wall-clock ``now`` (None: the pod
    is not being deleted), for a pod the kubelet first sees already deleted (it was down
    while the deletion began). The API server set ``deletionTimestamp`` to the deletion
    time plus the grace period, so the time to it is what the pod still has: never more
    than ``deletionGracePeriodSeconds`` (a skewed clock cannot lengthen it), never less
    than the pod-level minimum (the containers' own 2 s floor still applies)."""
    if pod.metadata.deletion_timestamp is None:
        return None
    grace = pod.metadata.deletion_grace_period_seconds
    deadline = parse_time(pod.metadata.deletion_timestamp)
    if deadline is None:
        return grace
    left = max(math.ceil(deadline - now), MINIMUM_POD_GRACE_PERIOD)
    return left if grace is None else min(grace, left)


def container_grace_period(
    pod: Pod, container: Container, reason: KillReason = KillReason.UNKNOWN
) -> int:
    """``setTerminationGracePeriod``: the budget of a kill that has no override."""
    if pod.metadata.deletion_grace_period_seconds is not None:
        return pod.metadata.deletion_grace_period_seconds
    if pod.spec.termination_grace_period_seconds is None:
        return MINIMUM_GRACE_PERIOD
    probe = None
    if reason is KillReason.LIVENESS_PROBE:
        probe = container.liveness_probe
    elif reason is KillReason.STARTUP_PROBE:
        probe = container.startup_probe
    if probe is not None and probe.termination_grace_period_seconds is not None:
        return probe.termination_grace_period_seconds
    return pod.spec.termination_grace_period_seconds


def kill_grace_period(
    pod: Pod,
    container: Container,
    reason: KillReason = KillReason.UNKNOWN,
    *,
    override: int | None = None,
) -> int:
    """The whole budget of one container kill: the override if given, else from the pod.

    The preStop hook runs only when this is positive, and is bounded by it.
    """
    return override if override is not None else container_grace_period(pod, container, reason)


def stop_container_timeout(grace: int, elapsed: float = 0.0, waited: float = 0.0) -> int:
    """The ``StopContainer`` timeout once ``elapsed`` seconds (the preStop hook) and then
    ``waited`` seconds (a sidecar waiting for its turn, ``termination_order``) are spent.

    Each counts in whole seconds (truncated one by one, as upstream), and the result is
    never below ``MINIMUM_GRACE_PERIOD`` -- override or not, in current upstream.
    """
    return max(grace - math.floor(elapsed) - math.floor(waited), MINIMUM_GRACE_PERIOD)
