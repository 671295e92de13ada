"""Where the sources' blocking work runs: a worker thread, never the event loop.

Reading manifests and decoding them can take long (a slow disk, a 10 MiB manifest);
on the event loop that would stop /healthz, probes and every pod worker. The sources
take the runner as an argument, so tests on ``autojump_clock`` can pass :func:`inline`:
a worker thread looks like idleness to that clock, which would then jump ahead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import trio

T = TypeVar("T")


class RunSync(Protocol):
    """Run a blocking ``fn`` and return its result, without blocking the event loop."""

    def __call__(self, fn: Callable[[], T], /) -> Awaitable[T]: ...


async def in_thread(fn: Callable[[], T]) -> T:
    """``fn`` in a trio worker thread.

    Cancelling abandons the thread rather than waiting for it: what runs there only reads
    and decodes (it changes no state of ours), its result is dropped, and a shutdown never
    waits for a slow disk. The decoding is bounded (see :mod:`.limits`), so an abandoned
    thread ends on its own soon after.
    """
    return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


async def inline(fn: Callable[[], T]) -> T:
    """``fn`` on the event loop itself: for tests on a fake clock (see the module doc)."""
    await trio.lowlevel.checkpoint()
    return fn()
