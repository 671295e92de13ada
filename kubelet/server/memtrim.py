"""Hand the memory of a burst of connections back to the system once the burst is over.

A connection that fails (a TLS handshake on garbage, a client that vanished) leaves its
exception, traceback and frames, with the SSL object and buffers they hold, in reference
cycles that only the cyclic collector frees, and its full collections are rare in a
process this size; what is freed then stays in glibc's heap (reusable, but counted in
RSS). Measured on a bare server, 500 garbage TLS connections at a time: 53 → 98 MiB after
three rounds, and 53 → 58 MiB over eight with a collection after each. So once ``burst``
connections were served since the last time, the task waits ``delay`` for the burst to end
(the open connections down to an eighth of their peak), then collects and runs glibc's
``malloc_trim(0)`` in a worker thread, which ctypes lets go of the interpreter lock (it
walks the whole heap: 25-50 ms on the loop, measured). Nothing wakes while no connections
come.

The collection holds the event loop, so it walks as little as it can: the young
generations first, then the old one in a step of its own and only when the collector
moved objects into it since the last full collection. A burst's garbage is young: an
object reaches the old generation only by being alive at a collection of the middle one,
so only the connections open at such a moment can leave garbage there. After a flood of
1,000 device plugin registrations the young generations held all of it (8,800 objects)
and a full collection found nothing more, walking the ~37,000 objects the kubelet made
since start-up (40-45 ms of CPU each time).
"""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable

import attrs
import trio

from kubelet.logs import get_logger
from kubelet.malloc import heap_trimmer

log = get_logger(__name__)


@attrs.define
class MemoryTrim:
    """Counts the servers' connections; ``run`` frees their garbage after a burst."""

    burst: int = 32
    delay: float = 1.0
    trim: Callable[[], object] | None = attrs.field(factory=heap_trimmer)
    collect: Callable[[int], object] = gc.collect
    """collects generations up to the one given (tests: a recorder)"""
    promotions: Callable[[], int] = lambda: gc.get_count()[2]
    """collections of the middle generation since the last full one (each may move
    objects into the old generation)"""
    trim_io: Callable[[Callable[[], object]], Awaitable[object]] = trio.to_thread.run_sync
    """Where the trim runs (a worker thread; fake-clock tests: inline)."""
    open: int = 0
    peak: int = 0
    served: int = 0
    trims: int = 0
    _due: trio.Event = attrs.field(factory=trio.Event)
    _promoted: int = 0
    """``promotions()`` after this task's last collection. Its own collection of the middle
    generation is not counted: it moves only what is alive once a burst is over (at most an
    eighth of its connections), left to the collector's own full collections."""

    def opened(self) -> None:
        self.open += 1
        self.served += 1
        self.peak = max(self.peak, self.open)

    def closed(self) -> None:
        self.open -= 1
        if self.served >= self.burst:
            self._due.set()

    async def run(self) -> None:
        """Until cancelled: a collection and a trim after each burst of connections."""
        while True:
            await self._due.wait()
            await trio.sleep(self.delay)
            if self.open > self.peak // 8:
                continue  # still busy: look again later
            self.peak, self.served, self._due = self.open, 0, trio.Event()
            await self._collect()
            if self.trim is not None:
                await self.trim_io(self.trim)
            self.trims += 1
            log.v(4).info("heap trimmed after a burst of connections")

    async def _collect(self) -> None:
        """The burst's cyclic garbage freed, one generation per step of the event loop."""
        promoted = self.promotions() > self._promoted
        self.collect(0)
        await trio.lowlevel.checkpoint()
        self.collect(1)
        if promoted:
            await trio.lowlevel.checkpoint()
            self.collect(2)
        self._promoted = self.promotions()
