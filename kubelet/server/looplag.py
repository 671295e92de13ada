"""How long the event loop goes without returning to the scheduler, made visible.

Every part of the kubelet shares one thread: a task that decodes a huge body, walks a
volume or reads a FIFO inline holds up /healthz, the PLEG and every pod worker alike.
``LoopLag`` is a Trio instrument that times each task step (the code a task runs between
two checkpoints) on a real clock: a step of at least ``floor`` is a stall, recorded by
``observe`` (the ``kubelet_event_loop_lag_seconds`` histogram), and the longest one so
far is kept (``kubelet_event_loop_lag_max_seconds``). A stall of ``report`` or more is
logged with the task's name, so the log says who held the loop.

An instrument rather than a task that sleeps and measures how late it woke: it costs two
clock reads per step and nothing while the kubelet is idle, and it never wakes the loop
(a 10 ms sleeper would also step a fake clock 100 times a second in every test).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

import attrs
import trio

from kubelet.logs import get_logger

log = get_logger(__name__)

FLOOR = 0.005
"""Shorter steps are ordinary work, not stalls: not observed (keeps the per-step cost at
two clock reads and a comparison)."""
REPORT = 0.1
"""A stall this long is logged with the task that caused it."""


@attrs.define(eq=False)  # an instrument is a member of a set: hashed by identity
class LoopLag(trio.abc.Instrument):
    """Times task steps; ``observe`` gets each one of at least ``floor`` seconds."""

    observe: Callable[[float], object] = lambda seconds: None
    clock: Callable[[], float] = time.perf_counter
    floor: float = FLOOR
    report: float = REPORT
    longest: float = 0.0
    stalls: int = 0
    _began: float | None = None
    """When the running step began; None in the step that installed the instrument (Trio
    did not call ``before_task_step`` for it)."""

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._began = self.clock()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if self._began is None:
            return
        took = self.clock() - self._began
        self._began = None
        if took < self.floor:
            return
        self.stalls += 1
        self.longest = max(self.longest, took)
        self.observe(took)
        if took >= self.report:
            log.info("Event loop held", seconds=round(took, 3), task=task.name)


@contextlib.asynccontextmanager
async def watching_loop(lag: LoopLag) -> AsyncIterator[LoopLag]:
    """``lag`` installed on the running Trio loop for the ``with`` block."""
    trio.lowlevel.add_instrument(lag)
    try:
        yield lag
    finally:
        with contextlib.suppress(KeyError):
            trio.lowlevel.remove_instrument(lag)
