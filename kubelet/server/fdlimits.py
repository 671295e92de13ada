"""The process's file descriptors: the open-files limit, and a reserve the servers leave alone.

Every accepted connection holds a descriptor. Left unbounded, idle clients take them all
and the kubelet's own work fails next (the CRI socket, manifest files, the API client, the
URL source). So the process first raises its soft ``RLIMIT_NOFILE`` to the hard
limit, as Go's runtime does at start; then the servers bound their connections (a share of
that limit, ``Limits.for_descriptors``) and stop accepting while fewer than a reserve of
descriptors are free (``Descriptors``), so that what remains is the kubelet's.

Counting open descriptors means listing ``/proc/self/fd`` (about 1 ms per 1,000 open), so
``Descriptors`` counts at most every ``refresh`` seconds and adds the servers' own opens
and closes in between.
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Callable

import attrs

from kubelet.logs import get_logger

log = get_logger(__name__)


def soft_limit() -> int:
    """The soft ``RLIMIT_NOFILE`` now (an infinite one counts as ``fs.nr_open``'s default)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def count_open() -> int:
    """Descriptors this process has open (the listing's own descriptor not counted)."""
    return len(os.listdir("/proc/self/fd")) - 1


def default_reserve(limit: int) -> int:
    """Descriptors kept for the kubelet's own work: a tenth of the limit, and at least 128
    (or a quarter of a limit below 512)."""
    return max(limit // 10, min(128, limit // 4))


@attrs.define
class Descriptors:
    """Free descriptors as the accept loops see them, and the reserve they must leave.

    ``limit`` and ``count`` are injectable (tests lower the limit or fake the count);
    ``opened``/``closed`` track the servers' own connections between two counts.
    """

    reserve: int
    limit: Callable[[], int] = soft_limit
    count: Callable[[], int] = count_open
    refresh: float = 0.25
    _counted: int = 0
    _counted_at: float = -math.inf
    _delta: int = 0

    @classmethod
    def for_process(cls) -> Descriptors:
        return cls(reserve=default_reserve(soft_limit()))

    def opened(self) -> None:
        self._delta += 1

    def closed(self) -> None:
        self._delta -= 1

    def free(self, now: float) -> int:
        """Free descriptors at ``now`` (a trio clock time); counts again when stale."""
        if now - self._counted_at >= self.refresh:
            self._counted, self._counted_at, self._delta = self.count(), now, 0
        return self.limit() - (self._counted + self._delta)

    def short(self, now: float) -> bool:
        """Fewer than ``reserve`` descriptors are free: accepting would eat into the reserve."""
        return self.free(now) < self.reserve
