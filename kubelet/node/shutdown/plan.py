"""Graceful node shutdown, the pure part: priority groups, each pod's grace, statuses.

Restated from upstream's pkg/kubelet/nodeshutdown (nodeshutdown_manager_linux.go) and
the kubelet config validation:

* the groups are ``shutdownGracePeriodByPodPriority`` (priority → seconds), or, when
  that is empty, two groups made from ``shutdownGracePeriod`` and
  ``shutdownGracePeriodCriticalPods``: priority 0 gets ``period - critical`` seconds
  and priority 2000000000 (system-cluster-critical) gets ``critical`` seconds. No
  groups (a zero period) means no graceful shutdown;
* groups are sorted by priority, low to high, and terminated in that order: a pod goes
  to the group with the highest priority not above its own (below every group: the
  lowest; above every group: the highest);
* a group with no pods is skipped; otherwise its pods are terminated in parallel, each
  with the group's grace period, or its own ``terminationGracePeriodSeconds`` when that
  is shorter, and the next group starts when all are done or the group's period is up;
* the inhibit delay to ask logind for is the sum of every group's period;
* a terminated pod's status: phase Failed, reason ``Terminated``, message "Pod was
  terminated in response to imminent node shutdown.", and a ``DisruptionTarget``
  condition (True, reason ``TerminationByKubelet``, the same message); pods arriving
  while the node shuts down are rejected with reason ``NodeShutdown``;
* the node's Ready condition turns False with the message "node is shutting down".
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Generic, TypeVar

import attrs

__all__ = [
    "DEFAULT_PRIORITY",
    "NODE_NOT_READY_MESSAGE",
    "NOT_ADMITTED_MESSAGE",
    "NOT_ADMITTED_REASON",
    "SHUTDOWN_MESSAGE",
    "SHUTDOWN_REASON",
    "SYSTEM_CRITICAL_PRIORITY",
    "Group",
    "PriorityPeriod",
    "disruption_condition",
    "group_pods",
    "periods",
    "pod_grace",
    "requested_delay",
    "validate",
]

SHUTDOWN_REASON = "Terminated"
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
NOT_ADMITTED_REASON = "NodeShutdown"
NOT_ADMITTED_MESSAGE = "Pod was rejected as the node is shutting down."
NODE_NOT_READY_MESSAGE = "node is shutting down"
DISRUPTION_TARGET = "DisruptionTarget"
TERMINATION_BY_KUBELET = "TerminationByKubelet"

DEFAULT_PRIORITY = 0
"""scheduling.DefaultPriorityWhenNoDefaultClassExists."""
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""scheduling.SystemCriticalPriority."""

P = TypeVar("P")


@attrs.frozen(order=True)
class PriorityPeriod:
    """One ``shutdownGracePeriodByPodPriority`` entry."""

    priority: int
    seconds: int


@attrs.frozen
class Group(Generic[P]):
    """The pods of one priority band and the time they get."""

    priority: int
    seconds: int
    pods: tuple[P, ...] = ()


def validate(
    by_priority: Sequence[PriorityPeriod],
    period: float,
    critical: float,
    *,
    graceful_gate: bool,
    by_priority_gate: bool,
) -> list[str]:
    """Upstream's configuration checks, with its messages."""
    problems = []
    if (period > 0 or critical > 0) and not graceful_gate:
        problems.append(
            "invalid configuration: specifying shutdownGracePeriod or "
            "shutdownGracePeriodCriticalPods requires feature gate GracefulNodeShutdown"
        )
    if period < 0 or critical < 0 or critical > period:
        problems.append(
            f"invalid configuration: shutdownGracePeriod {_go(period)} must be >= 0, "
            f"shutdownGracePeriodCriticalPods {_go(critical)} must be >= 0, and "
            f"shutdownGracePeriodCriticalPods {_go(critical)} must be <= shutdownGracePeriod "
            f"{_go(period)}"
        )
    if by_priority_gate and by_priority and (period != 0 or critical != 0):
        problems.append(
            "invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and "
            "shutdownGracePeriod at the same time"
        )
    if not by_priority_gate and by_priority:
        problems.append(
            "invalid configuration: Specifying shutdownGracePeriodByPodPriority requires "
            "feature gate GracefulNodeShutdownBasedOnPodPriority"
        )
    return problems


def periods(
    by_priority: Sequence[PriorityPeriod],
    period: float,
    critical: float,
    *,
    by_priority_gate: bool = True,
) -> tuple[PriorityPeriod, ...]:
    """The groups in force, sorted low to high (empty: shutdown is not graceful)."""
    chosen = tuple(by_priority) if by_priority_gate else ()
    if not chosen:
        chosen = _migrate(period, critical)
    return tuple(sorted(chosen, key=lambda p: p.priority))


def _migrate(period: float, critical: float) -> tuple[PriorityPeriod, ...]:
    if period <= 0:
        return ()
    default = period - critical
    if default < 0:
        return ()
    return (
        PriorityPeriod(DEFAULT_PRIORITY, int(default)),
        PriorityPeriod(SYSTEM_CRITICAL_PRIORITY, int(period - default)),
    )


def requested_delay(groups: Iterable[PriorityPeriod]) -> int:
    """Seconds of inhibit delay the kubelet needs from logind (the sum of the periods)."""
    return sum(g.seconds for g in groups)


def group_pods(
    sorted_periods: Sequence[PriorityPeriod], pods: Iterable[tuple[P, int]]
) -> list[Group[P]]:
    """Put each (pod, priority) in its group; groups in termination order."""
    if not sorted_periods:
        return []
    members: list[list[P]] = [[] for _ in sorted_periods]
    keys = [p.priority for p in sorted_periods]
    for pod, priority in pods:
        index = bisect.bisect_left(keys, priority)
        if index == len(keys):
            index = len(keys) - 1
        elif index > 0 and keys[index] > priority:
            index -= 1
        members[index].append(pod)
    return [
        Group(p.priority, p.seconds, tuple(m)) for p, m in zip(sorted_periods, members, strict=True)
    ]


def pod_grace(group_seconds: int, termination_grace: int | None) -> int:
    """The grace a pod gets: the group's, or the pod's own when that is not longer."""
    if termination_grace is not None and termination_grace <= group_seconds:
        return termination_grace
    return group_seconds


def disruption_condition(now: str) -> dict[str, str]:
    """The pod condition a shutdown adds (``now``: RFC 3339)."""
    return {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": TERMINATION_BY_KUBELET,
        "message": SHUTDOWN_MESSAGE,
        "lastTransitionTime": now,
    }


def _go(seconds: float) -> str:
    """A duration as Go prints it in these messages (``30s``, ``1m0s``, ``0s``)."""
    total = int(seconds)
    if total == 0:
        return "0s"
    sign = "-" if total < 0 else ""
    total = abs(total)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"
