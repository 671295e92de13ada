"""A small HTTP/1.1 server on trio and h11, made for test doubles.

Why not hypercorn: a fault-injecting fake needs what an ASGI server hides. It must
close its listener and cut every open connection at once (an outage) and listen again
on the same port; cancel a handler the moment the client goes away (a stalled request,
a watch); cut a streaming response mid-body (a dropped watch); and run no timers of its
own, so that under ``autojump_clock`` nothing fires that the test did not ask for. All
of that is a cancel scope here. h11 (already installed with httpx) does the parsing.

Handlers get a ``Request`` with the whole body and return a ``Response``: a body, or a
``stream`` coroutine that writes chunks (chunked transfer encoding) until it returns.
Raising ``AbortConnection`` closes the connection without (finishing) a response. While
a handler runs, a second task reads the socket: EOF means the client left, and the
handler is cancelled. TLS is a ``ssl.SSLContext`` away (trio.SSLStream); the client's
certificate, if it sent one, is on the request.
"""

from __future__ import annotations

import contextlib
import http
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs
import h11
import trio

__all__ = ["AbortConnection", "HttpServer", "Request", "Response", "Send"]

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024  # the API server's request size limit
Send = Callable[[bytes], Awaitable[None]]


class AbortConnection(Exception):
    """Raised by a handler or a stream: close the connection, answer nothing more."""


@attrs.frozen
class Request:
    method: str
    target: str
    path: str
    query_string: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes
    peer_cert: Mapping[str, Any] | None = None
    raw_headers: tuple[tuple[str, str], ...] = ()
    """Every header as received, in order (``headers`` keeps the last of each name)."""

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


@attrs.frozen
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    stream: Callable[[Send], Awaitable[None]] | None = None


Handler = Callable[[Request], Awaitable[Response]]
Upgraded = Callable[[trio.abc.Stream, bytes], Awaitable[Response | None]]
"""Serves an upgrade on the raw connection (and the bytes read past the request);
returns a Response to send instead when it did not use the connection."""
UpgradeHook = Callable[[Request], Upgraded | None]


class HttpServer:
    """Serves ``handler`` on listeners until cancelled; one task per connection."""

    def __init__(
        self,
        handler: Handler,
        *,
        ssl_context: ssl.SSLContext | None = None,
        upgrade: UpgradeHook | None = None,
    ) -> None:
        self._handler = handler
        self._ssl = ssl_context
        self._upgrade = upgrade

    async def serve(self, listeners: Sequence[trio.SocketListener]) -> None:
        """Accept on every listener until cancelled; cancellation closes everything."""
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(self._accept, listener, nursery)

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        async with listener:
            while True:
                stream = await listener.accept()
                nursery.start_soon(self._connection, stream)

    async def _connection(self, raw: trio.SocketStream) -> None:
        stream: trio.abc.Stream = raw
        peer_cert: Mapping[str, Any] | None = None
        try:
            if self._ssl is not None:
                tls = trio.SSLStream(raw, self._ssl, server_side=True, https_compatible=True)
                await tls.do_handshake()
                peer_cert = tls.getpeercert() or None
                stream = tls
            conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
            while True:
                request = await self._read_request(conn, stream, peer_cert)
                if request is None:
                    return
                upgraded = self._upgrade(request) if self._upgrade is not None else None
                if upgraded is not None and "upgrade" in request.headers:
                    response = await upgraded(stream, bytes(conn.trailing_data[0]))
                    if response is not None:
                        await self._send_response(conn, stream, response)
                    return
                if not await self._respond(conn, stream, request):
                    return
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError, OSError):
            return
        except h11.ProtocolError:
            return
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await _close(stream)

    async def _read_request(
        self, conn: h11.Connection, stream: trio.abc.Stream, peer_cert: Mapping[str, Any] | None
    ) -> Request | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                await self._send_plain(conn, stream, 400, b"bad request\n")
                return None
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                conn.receive_data(bytes(data))
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    await self._send_plain(conn, stream, 413, b"request entity too large\n")
                    return None
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                return _request(head, bytes(body), peer_cert)
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None

    async def _respond(
        self, conn: h11.Connection, stream: trio.abc.Stream, request: Request
    ) -> bool:
        """Run the handler while watching for the client to leave. True: keep going.

        Exceptions are caught inside the nursery so that none is wrapped in an
        ExceptionGroup; any failure ends the connection.
        """
        ok = True
        async with trio.open_nursery() as nursery:

            async def watch_peer() -> None:
                nonlocal ok
                try:
                    while True:
                        data = await stream.receive_some(65536)
                        if not data:
                            break
                        conn.receive_data(bytes(data))
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ssl.SSLError):
                    pass
                except h11.RemoteProtocolError:
                    pass
                ok = False
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch_peer)
            try:
                response = await self._handler(request)
                if request.method == "HEAD":
                    response = attrs.evolve(response, body=b"", stream=None)
                await self._send_response(conn, stream, response)
            except AbortConnection:
                ok = False
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ssl.SSLError):
                ok = False
            except h11.LocalProtocolError:
                log.exception("h11 refused our response to %s %s", request.method, request.target)
                ok = False
            except Exception:
                log.exception("handler failed on %s %s", request.method, request.target)
                ok = False
            finally:
                nursery.cancel_scope.cancel()
        return ok

    async def _send_response(
        self, conn: h11.Connection, stream: trio.abc.Stream, response: Response
    ) -> None:
        headers = [("content-type", response.content_type), *response.headers]
        if response.stream is None:
            headers.append(("content-length", str(len(response.body))))
        await _write(stream, conn.send(_head(response.status, headers)))
        if response.stream is None:
            await _write(stream, conn.send(h11.Data(data=response.body)))
        else:

            async def send(chunk: bytes) -> None:
                await _write(stream, conn.send(h11.Data(data=chunk)))

            await response.stream(send)
        await _write(stream, conn.send(h11.EndOfMessage()))

    async def _send_plain(
        self, conn: h11.Connection, stream: trio.abc.Stream, status: int, body: bytes
    ) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        headers = [("content-type", "text/plain"), ("content-length", str(len(body)))]
        headers.append(("connection", "close"))
        await _write(stream, conn.send(_head(status, headers)))
        await _write(stream, conn.send(h11.Data(data=body)))
        await _write(stream, conn.send(h11.EndOfMessage()))


def _head(status: int, headers: list[tuple[str, str]]) -> h11.Response:
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return h11.Response(status_code=status, headers=headers, reason=reason)


async def _write(stream: trio.abc.Stream, data: bytes | None) -> None:
    if data:
        await stream.send_all(data)


async def _close(stream: trio.abc.Stream) -> None:
    with contextlib.suppress(
        trio.BrokenResourceError, trio.ClosedResourceError, OSError, ssl.SSLError
    ):
        await stream.aclose()


def _request(head: h11.Request, body: bytes, peer_cert: Mapping[str, Any] | None) -> Request:
    target = head.target.decode("latin-1")
    parts = urlsplit(target)
    headers: dict[str, str] = {}
    for name, value in head.headers:
        headers[name.decode("latin-1").lower()] = value.decode("latin-1")
    return Request(
        method=head.method.decode("ascii").upper(),
        target=target,
        path=unquote(parts.path),
        query_string=parts.query,
        query=dict(parse_qsl(parts.query, keep_blank_values=True)),
        headers=headers,
        body=body,
        peer_cert=peer_cert,
        raw_headers=tuple(
            (name.decode("latin-1").lower(), value.decode("latin-1"))
            for name, value in head.headers
        ),
    )
