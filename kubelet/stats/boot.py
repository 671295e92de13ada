"""When the machine booted: the one reading the node's start-up metrics and the kernel
log's timestamps share."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["boot_time"]


def boot_time(wall_clock: Callable[[], float] = time.time) -> float | None:
    """When the machine booted, on ``wall_clock``: now less the time since boot, suspend
    included (``CLOCK_BOOTTIME``, as the kernel log counts); None when the kernel cannot
    say."""
    try:
        return wall_clock() - time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, AttributeError):
        return None
