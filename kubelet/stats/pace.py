"""Long passes over every pod, in slices that give the event loop back.

The kubelet is one Trio loop: a pass that reads and formats the figures of 500 pods
in one go (the summary the eviction manager takes every 10 s: 100–250 ms) holds up
every other task for that long, the PLEG's relist among them (its p99 at 500 pods
was one such stall). ``Pacer.tick`` between pods yields once a slice is used up, so
no single step of a pass holds the loop much longer than ``SLICE``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

SLICE = 0.005
"""Seconds of a pass between two yields: well under a relist (≈ 20 ms at 500 pods)."""


class Pacer:
    """Yields to the loop in ``tick`` once ``slice`` seconds went by since the last yield."""

    def __init__(self, slice: float = SLICE, clock: Callable[[], float] = time.perf_counter):
        self._slice = slice
        self._clock = clock
        self._until = clock() + slice
        self.yields = 0
        """How many times ``tick`` gave the loop back (tests read it)."""

    async def tick(self) -> None:
        """A checkpoint when the slice is used up; otherwise nothing (no checkpoint)."""
        if self._clock() < self._until:
            return
        await trio.lowlevel.checkpoint()
        self.yields += 1
        self._until = self._clock() + self._slice
