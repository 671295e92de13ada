"""One accepted connection: TLS, then HTTP/2 or HTTP/1.1, under the header deadline.

The TLS handshake and the request headers (or, for HTTP/2, the client's preface) share one
deadline, ``header_timeout`` after accept, so a client that connects and sends nothing, or
dribbles, holds its descriptor for at most that long. HTTP/2 is chosen by ALPN ``h2`` or
by the client's preface (prior knowledge, also on plain ports); everything else is
HTTP/1.1. The verified client certificate goes into the ``peer_certificate`` context
variable, which every request task of the connection inherits.
"""

from __future__ import annotations

import ssl
from typing import Any

import attrs
import trio

from kubelet.logs import get_logger

from .asgi import Scope, peer_certificate
from .http1 import Http1Connection
from .http2 import Http2Connection
from .idle import IdleConnections
from .limits import Limits
from .wire import BROKEN, ASGIApp

log = get_logger(__name__)

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
LINGER = 0.5
"""After closing our side with a request body unread, how long the rest is read and
dropped so the kernel does not answer it with a reset that destroys our response
(Go's ``rstAvoidanceDelay``)."""


def _address(value: Any) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return None


def base_scope(raw: trio.SocketStream, tls: bool) -> Scope:
    try:
        client = _address(raw.socket.getpeername())
        server = _address(raw.socket.getsockname())
    except OSError:
        client = server = None
    return {"scheme": "https" if tls else "http", "client": client, "server": server}


async def _sniff(stream: trio.abc.Stream) -> bytes:
    """The first bytes: enough to tell the HTTP/2 preface from an HTTP/1.1 request."""
    buffer = b""
    while len(buffer) < len(H2_PREFACE) and H2_PREFACE.startswith(buffer):
        try:
            chunk = await stream.receive_some(65536)
        except BROKEN:
            return b""
        if not chunk:
            return b""
        buffer += chunk
    return buffer


async def linger_close(raw: trio.SocketStream) -> None:
    """Half-close, then read and drop what the client still sends, briefly."""
    try:
        await raw.send_eof()
        with trio.move_on_after(LINGER):
            while await raw.receive_some(65536):
                pass
    except BROKEN:
        pass


@attrs.frozen
class ConnectionHandler:
    """Serves ``app`` on each connection it is given (see ``accept.AcceptLoop``)."""

    app: ASGIApp
    ssl_context: ssl.SSLContext | None
    limits: Limits
    idle: IdleConnections = attrs.field(factory=IdleConnections)
    """This listener's connections between requests (``accept.AcceptLoop`` closes them)."""

    async def __call__(self, raw: trio.SocketStream) -> None:
        deadline = trio.current_time() + self.limits.header_timeout
        scope = base_scope(raw, self.ssl_context is not None)
        stream: trio.abc.Stream = raw
        http2 = False
        initial = b""
        with trio.move_on_at(deadline) as timer:
            if self.ssl_context is not None:
                tls = trio.SSLStream(raw, self.ssl_context, server_side=True, https_compatible=True)
                try:
                    await tls.do_handshake()
                except BROKEN as exc:
                    log.v(4).info("TLS handshake failed", client=scope["client"], error=repr(exc))
                    return
                peer_certificate.set(tls.getpeercert(binary_form=True))
                stream = tls
                http2 = tls.selected_alpn_protocol() == "h2"
            if not http2:
                initial = await _sniff(stream)
                if not initial:
                    return
                http2 = initial.startswith(H2_PREFACE)
        if timer.cancelled_caught:
            log.v(3).info("TLS handshake or request not complete in time", client=scope["client"])
            return
        if http2:
            await Http2Connection(
                stream, self.app, scope, self.limits, initial=initial, idle=self.idle
            ).run(deadline)
            return
        connection = Http1Connection(
            stream, self.app, scope, self.limits, initial=initial, idle=self.idle
        )
        await connection.run(deadline)
        if connection.linger:
            await linger_close(raw)
