"""trio-asyncio's main loop, stepping through all the callbacks that are ready at once.

trio-asyncio runs each asyncio callback in its own round of the Trio scheduler: one
``trio.move_on_after`` cancel scope (a Trio deadline whenever an asyncio timer exists)
and one memory-channel receive per callback. A CRI call is about four callbacks (the
task's first step, its wake-up when the answer arrives, its done callback, grpclib's
deadline timer), so in a pod ramp that machinery was a large part of the kubelet's CPU.
asyncio's own loop runs every callback that is ready when an iteration starts, then
polls; :func:`install` makes trio-asyncio's loop do the same, with one Trio checkpoint
per batch that leaves more to run (so the asyncio side still cannot starve Trio tasks; a
batch that empties the queue goes straight on to wait, itself a checkpoint) and the
cancel scope only when there is nothing to run and it has to wait.

trio-asyncio also checks every callback it is handed (``call_soon``, ``call_later``,
``call_at``) for being a coroutine function, which asyncio's own loop does only in debug
mode; on a bound method that check walks ``inspect`` and cost about 5 % of the kubelet's
CPU at rest (three callbacks a CRI call). :func:`install` makes those checks debug-only,
as asyncio has them.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from typing import Any

import trio
from sniffio import thread_local as sniffio_library
from trio_asyncio._base import BaseTrioEventLoop
from trio_asyncio._handles import AsyncHandle

_original_step = BaseTrioEventLoop._main_loop_one


async def _run_one(loop: Any, obj: Any) -> None:
    """trio-asyncio's handling of one dequeued object (a timer, a Trio task, a callback)."""
    if isinstance(obj, asyncio.TimerHandle):
        heapq.heappush(loop._timers, obj)
    elif isinstance(obj, AsyncHandle):
        obj._context.run(loop._nursery.start_soon, obj._run, name=obj._callback)
        await obj._started.wait()
    elif not obj._cancelled:
        _run_callback(obj)


def _run_callback(obj: Any) -> None:
    previous, sniffio_library.name = sniffio_library.name, "asyncio"
    try:
        obj._run()
    finally:
        sniffio_library.name = previous


async def _main_loop_one(self: Any, no_wait: bool = False) -> None:
    """One iteration: run the due timers and the queued callbacks, or wait for one."""
    if no_wait:  # the loop's shutdown drain: trio-asyncio's own step
        await _original_step(self, no_wait=True)
        return
    timers = self._timers
    receiver = self._q_recv
    due = []
    if timers:
        now = self.time()
        while timers and timers[0]._when <= now:
            due.append(heapq.heappop(timers))
    queued = receiver.statistics().current_buffer_used
    if not due and not queued:
        timeout = timers[0]._when - self.time() if timers else math.inf
        obj = None
        with trio.move_on_after(timeout):
            obj = await receiver.receive()
        if obj is not None:
            await _run_one(self, obj)
        return
    for timer in due:
        if not timer._cancelled:
            _run_callback(timer)
    for _ in range(queued):  # only those queued now: new ones wait for the next batch
        await _run_one(self, receiver.receive_nowait())
    if receiver.statistics().current_buffer_used or (timers and timers[0]._when <= self.time()):
        await trio.lowlevel.checkpoint()  # more to run at once: Trio tasks go first
    # else the next step waits on the queue, which yields to Trio anyway: no extra step


def _call_soon(self: Any, callback: Any, *args: Any, **context: Any) -> asyncio.Handle:
    """trio-asyncio's ``call_soon``, with asyncio's callback check in debug mode only."""
    if self._debug:
        self._check_callback(callback, "call_soon")
    return self._queue_handle(asyncio.Handle(callback, args, self, **context))  # type: ignore[no-any-return]


def _call_at(self: Any, when: float, callback: Any, *args: Any, **context: Any) -> asyncio.Handle:
    """trio-asyncio's ``call_at``, likewise."""
    if self._debug:
        self._check_callback(callback, "call_at")
    return self._queue_handle(asyncio.TimerHandle(when, callback, args, self, **context))  # type: ignore[no-any-return]


def _call_later(
    self: Any, delay: float, callback: Any, *args: Any, **context: Any
) -> asyncio.Handle:
    """trio-asyncio's ``call_later``, likewise."""
    if self._debug:
        self._check_callback(callback, "call_later")
    assert delay >= 0, delay
    return _call_at(self, self.time() + delay, callback, *args, **context)


def install() -> None:
    """Idempotent; applies to every trio-asyncio loop, running ones from their next step."""
    BaseTrioEventLoop._main_loop_one = _main_loop_one
    BaseTrioEventLoop.call_soon = _call_soon
    BaseTrioEventLoop.call_at = _call_at
    BaseTrioEventLoop.call_later = _call_later
