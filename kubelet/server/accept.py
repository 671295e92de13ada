"""The accept loop of one listener: bounded, descriptor-aware, quiet, and a wall per connection.

- At most ``max_connections`` connections at a time; past that the loop stops accepting
  and further clients wait in the kernel's listen backlog (they are not refused, and hold
  no descriptor of ours) until one closes. Logged when the bound is reached, and again
  when the connections fell to half of it. While a client waits there, the connection
  idle the longest between two requests is closed to make room (``idle.py``): an idle
  keep-alive connection holds its slot only while nobody else needs it.
- While fewer descriptors than the reserve are free, or ``accept`` itself fails for lack
  of them (EMFILE, ENFILE, ENOBUFS, ENOMEM), the loop pauses and retries with a back-off.
- Each of these is logged once when it begins and once when it ends, not per attempt
  (``trio.serve_listeners`` logs every failed accept, ten lines a second).
- A connection's failure stays with it: any exception out of the handler is logged in one
  line, that connection is closed, and the loop and the other connections go on.
"""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable

import trio

from kubelet.logs import get_logger

from .fdlimits import Descriptors
from .idle import IdleConnections
from .memtrim import MemoryTrim

log = get_logger(__name__)

CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
BACKOFF_FIRST = 0.005
BACKOFF_MAX = 0.5
RECLAIM_AGAIN = 5.0
"""Seconds after closing an idle connection for a waiting client before closing another
if no slot came free by then (the one closed had just received a request). Closing takes
up to a second: an HTTP/2 connection reads on for 1 s after its GOAWAY."""

Handler = Callable[[trio.SocketStream], Awaitable[None]]


def peer_name(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "?"
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def first_error(group: BaseExceptionGroup[Exception]) -> Exception:
    """The first leaf of an exception group (what the one log line names)."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, Exception)
    return error


class AcceptLoop:
    """Accepts on ``listener`` and runs ``handler`` per connection until cancelled."""

    def __init__(
        self,
        listener: trio.abc.Listener[trio.SocketStream],
        handler: Handler,
        *,
        name: str,
        max_connections: int,
        descriptors: Descriptors,
        memory: MemoryTrim | None = None,
        idle: IdleConnections | None = None,
    ) -> None:
        self._listener = listener
        self._handler = handler
        self._name = name
        self._max = max_connections
        self._slots = trio.Semaphore(max_connections)
        self._descriptors = descriptors
        self._memory = memory
        self._idle = idle
        self._full = False
        self._paused: str | None = None

    @property
    def open_connections(self) -> int:
        return self._max - self._slots.value

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                await self._take_slot()
                try:
                    stream = await self._accept()
                except BaseException:
                    self._give_slot()
                    raise
                self._descriptors.opened()
                if self._memory is not None:
                    self._memory.opened()
                nursery.start_soon(self._serve, stream)

    async def _take_slot(self) -> None:
        if self._slots.value == 0:
            if not self._full:
                self._full = True
                log.warning(
                    "connection limit reached; new connections wait in the listen backlog",
                    server=self._name,
                    connections=self._max,
                )
            if self._idle is not None:
                await self._make_room(self._idle)
                return
        await self._slots.acquire()

    async def _make_room(self, idle: IdleConnections) -> None:
        """Take the next free slot; while none is, and a client waits in the backlog,
        close idle connections for it."""

        async def reclaim() -> None:
            await self._pending()
            while True:
                await idle.close_oldest()
                await trio.sleep(RECLAIM_AGAIN)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reclaim)
            await self._slots.acquire()
            nursery.cancel_scope.cancel()

    def _give_slot(self) -> None:
        """A connection ended; "again" is logged once the load fell to half the bound
        (at the bound itself every close would log a pair of lines)."""
        self._slots.release()
        if self._full and self.open_connections <= (self._max - 1) // 2:
            self._full = False
            log.info("accepting connections again", server=self._name)

    async def _accept(self) -> trio.SocketStream:
        """The next connection; waits out a shortage of descriptors (logged once)."""
        delay = BACKOFF_FIRST
        while True:
            await self._pending()
            reason = self._shortage()
            if reason is None:
                try:
                    stream = await self._listener.accept()
                except OSError as exc:
                    if exc.errno not in CAPACITY_ERRNOS:
                        raise
                    reason = f"accept: {errno.errorcode[exc.errno]} ({exc.strerror})"
                else:
                    self._resume()
                    return stream
            self._pause(reason)
            await trio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def _pending(self) -> None:
        """Until a connection waits to be accepted: descriptors are checked just before."""
        sock = getattr(self._listener, "socket", None)
        if sock is not None:
            await trio.lowlevel.wait_readable(sock)

    def _shortage(self) -> str | None:
        free = self._descriptors.free(trio.current_time())
        if free < self._descriptors.reserve:
            return f"{free} descriptors free, below the reserve of {self._descriptors.reserve}"
        return None

    def _pause(self, reason: str) -> None:
        if self._paused is None:
            self._paused = reason
            log.warning("accept paused: too many open files", server=self._name, reason=reason)

    def _resume(self) -> None:
        if self._paused is not None:
            self._paused = None
            log.info("accept resumed", server=self._name)

    async def _serve(self, stream: trio.SocketStream) -> None:
        try:
            await self._handler(stream)
        except* Exception as group:
            error = first_error(group)
            log.error(
                "connection failed; closed it", server=self._name, peer=peer_name(stream),
                exc_info=error,
            )  # fmt: skip
        finally:
            await trio.aclose_forcefully(stream)
            self._descriptors.closed()
            if self._memory is not None:
                self._memory.closed()
            self._give_slot()
