"""A grpclib server on a unix socket, run from Trio: the kubelet's own gRPC endpoints.

The pod-resources API and the device plugin registration service are both served this
way: the socket's directory made (0750, root and the kubelet's group), a stale socket
replaced, as upstream's listeners do; requests bounded by their length prefix
(``LimitedProtoCodec``).

Connections are accepted by the kubelet's bounded accept loop (``kubelet.listen``), not
by asyncio's: at most ``max_connections`` at a time, one accept per scheduling step, and
the rest wait in the kernel's listen backlog until one closes. (asyncio's server takes up
to a hundred waiting connections in one callback and builds an HTTP/2 connection for each:
a flood of plugin clients held the event loop for a fifth of a second at a time.) Each
accepted socket is handed to grpclib; on the way out every connection is closed and its
requests cancelled within a deadline, shielded, since teardown must finish even when the
kubelet is being cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Sequence
from typing import Any

import trio
import trio_asyncio
from grpclib.protocol import H2Protocol
from grpclib.server import Handler, Server

from kubelet.listen import AcceptLoop, Descriptors

from .codec import LimitedProtoCodec

CLOSE_DEADLINE = 5.0
"""seconds a connection has to close on the way out"""
MAX_CONNECTIONS = 128
"""connections one socket serves at once; more wait in the listen backlog. Plugins and
monitoring agents connect, call and go; twice the device manager's registrations being
dialled at once, so a registration beyond those is refused at once, not queued."""


def listen_unix(path: str) -> trio.SocketListener:
    """A listening socket at ``path`` (a stale one replaced); raises OSError."""
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return trio.SocketListener(trio.socket.from_stdlib_socket(sock))


async def serve_unix_grpc(
    listener: trio.SocketListener,
    handlers: Sequence[Any],
    max_request_bytes: int,
    *,
    name: str,
    max_connections: int = MAX_CONNECTIONS,
) -> None:
    """Serve ``handlers`` on ``listener`` until cancelled, then close every connection."""
    server = Server(list(handlers), codec=LimitedProtoCodec(max_request_bytes))
    loop = AcceptLoop(
        listener,
        _Connection(server),
        name=name,
        max_connections=max_connections,
        descriptors=Descriptors.for_process(),
    )
    async with listener:
        await loop.run()


class _Connection:
    """Serves one accepted connection with grpclib until it closes (or is cancelled)."""

    def __init__(self, server: Server) -> None:
        self._server = server

    async def __call__(self, stream: trio.SocketStream) -> None:
        sock = socket.socket(fileno=stream.socket.detach())
        ended = trio.Event()
        protocol = self._server._protocol_factory()
        try:
            transport = await trio_asyncio.aio_as_trio(_attach)(_Ending(protocol, ended), sock)
        except BaseException:
            sock.close()
            raise
        try:
            await ended.wait()
        finally:
            if not ended.is_set():  # cancelled: the server is stopping
                await _close(transport, protocol)


async def _close(transport: asyncio.Transport, protocol: H2Protocol) -> None:
    """Close the connection and wait (shielded, bounded) until its requests were cancelled."""
    transport.abort()
    handler = protocol.handler
    assert isinstance(handler, Handler)  # what a grpclib server's connections have
    with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_DEADLINE):
        await trio_asyncio.aio_as_trio(handler.wait_closed)()


async def _attach(protocol: asyncio.Protocol, sock: socket.socket) -> asyncio.Transport:
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock)
    return transport


class _Ending(asyncio.Protocol):
    """grpclib's protocol for one connection, and ``ended`` set when the connection is lost."""

    def __init__(self, inner: H2Protocol, ended: trio.Event) -> None:
        self._inner = inner
        self._ended = ended

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self._inner.connection_lost(exc)
        finally:
            self._ended.set()
