"""Long passes over every pod, in slices that give the event loop back.

The kubelet is one Trio loop: a pass that reads and formats the figures of 500 pods
in one go (the summary the eviction manager takes every 10 s: 100–250 ms) holds up
every other task for that long, the PLEG's relist among them (its p99 at 500 pods
was one such stall). ``Pacer.tick`` between pods yields once a slice is used up, so
no single step of a pass holds the loop much longer than ``SLICE``.

A slice beside a relist still costs it: the relist takes several turns of the loop (its
two calls, each answer read in pieces) and waited for a slice at each, so relists
during the eviction pass's formatting took 90-135 ms at 500 pods instead of 20-30.
A relist marks itself as ``URGENT`` work; a pass that reaches a yield meanwhile waits
for it to end (once per relist, ``URGENT_WAIT`` at most) instead of taking its next
slice beside it. The pass then goes on as before: only a few tens of ms later.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import trio

SLICE = 0.005
"""Seconds of a pass between two yields: well under a relist (≈ 20 ms at 500 pods)."""

URGENT_WAIT = 0.2
"""A pass waits this long at most for one piece of urgent work (a relist of a runtime
that hangs must not hold the eviction pass up)."""


class Urgent:
    """Short work whose latency counts (the PLEG's relist), which paced passes let by."""

    def __init__(self) -> None:
        self.current = 0
        """The number of the urgent work under way; 0 when there is none."""
        self._started = 0
        self._ended = trio.Event()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Mark the work inside as urgent (not nested: one relist at a time)."""
        self._started += 1
        self.current = self._started
        try:
            yield
        finally:
            self.current = 0
            self._ended.set()
            self._ended = trio.Event()

    async def wait_ended(self) -> None:
        """Until the urgent work under way ends (a checkpoint in any case)."""
        if not self.current:
            await trio.lowlevel.checkpoint()
            return
        with trio.move_on_after(URGENT_WAIT):
            await self._ended.wait()


URGENT = Urgent()
"""The process's urgent work: the PLEG marks its relists here."""


class Pacer:
    """Yields to the loop in ``tick`` once ``slice`` seconds went by since the last yield."""

    def __init__(
        self,
        slice: float = SLICE,
        clock: Callable[[], float] = time.perf_counter,
        urgent: Urgent = URGENT,
    ):
        self._slice = slice
        self._clock = clock
        self._urgent = urgent
        self._let_by = 0
        """The urgent work this pass last waited for (it waits once for each)."""
        self._until = clock() + slice
        self.yields = 0
        """How many times ``tick`` gave the loop back (tests read it)."""

    async def tick(self) -> None:
        """A checkpoint when the slice is used up (the end of urgent work under way, the
        first time this pass meets it); otherwise nothing (no checkpoint)."""
        if self._clock() < self._until:
            return
        urgent = self._urgent.current
        if urgent and urgent != self._let_by:
            self._let_by = urgent
            await self._urgent.wait_ended()
        else:
            await trio.lowlevel.checkpoint()
        self.yields += 1
        self._until = self._clock() + self._slice
