"""A listener's idle keep-alive connections, oldest first: what a full listener closes.

Upstream's server (Go) keeps an idle keep-alive connection for ``IdleTimeout`` (90 s) and
a request restarts that clock, so a client sending one tiny request a minute holds its
connection forever. Go has no connection bound to run out of; ours does
(``accept.AcceptLoop``). A connection between requests (HTTP/1.1 waiting for the next
one, HTTP/2 with no stream in flight) registers here; when the bound is reached and a new
client waits in the backlog, the accept loop closes the one idle the longest, as a
client must expect of any keep-alive connection (RFC 9112 §9.3; HTTP/2: a GOAWAY).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import trio


class IdleConnections:
    """Who is idle (and how to close it), in the order they became idle."""

    def __init__(self) -> None:
        self._idle: dict[Hashable, Callable[[], None]] = {}
        self._lot = trio.lowlevel.ParkingLot()

    def __len__(self) -> int:
        return len(self._idle)

    def add(self, key: Hashable, close: Callable[[], None]) -> None:
        """``key`` is idle from now on; ``close`` ends it (called at most once)."""
        self._idle.pop(key, None)
        self._idle[key] = close
        self._lot.unpark_all()

    def discard(self, key: Hashable) -> None:
        """``key`` is busy again, or gone."""
        self._idle.pop(key, None)

    async def close_oldest(self) -> None:
        """Close the connection idle the longest, waiting for one if none is idle."""
        while not self._idle:
            await self._lot.park()
        key = next(iter(self._idle))
        self._idle.pop(key)()
