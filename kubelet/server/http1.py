"""HTTP/1.1 on one connection (h11), requests handed to an ASGI app one at a time.

As Go's server: keep-alive until ``idle_timeout`` without a request; request line and
headers within ``header_timeout`` and ``max_header_bytes`` (431 otherwise); a malformed
request gets ``400 Bad Request`` and the connection closes; a body the handler left unread
is read and dropped up to ``drain_bytes`` so the connection can serve the next request,
and beyond that the connection closes after the response. The app learns that the client
left through ``http.disconnect`` (what stops a ``follow`` log stream). A piece of a
response the socket does not take within ``send_timeout`` ends the connection (a client
that stopped reading keeps no slot), and a connection waiting for its next request may be
closed for a client waiting on a full listener (``idle.py``).

A request with an ``Upgrade`` header offers the app ``scope["extensions"]["kubelet.takeover"]``:
``stream, buffered = await takeover()`` hands it the raw connection (and the bytes that
came after the request head), after which this module neither reads, writes nor parses
it; the connection is closed when the app returns. This is where exec, attach and
port-forward proxy SPDY/WebSocket streams byte for byte.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import h11
import trio

from kubelet.logs import get_logger

from .asgi import Message, Scope
from .idle import IdleConnections
from .limits import Limits
from .wire import BROKEN, ASGIApp, date_header, response_headers

log = get_logger(__name__)

READ_SIZE = 65536
PIPELINE_BUFFER = 64 << 10
"""Bytes of a next, pipelined request read while a response is being written (beyond
it the client is no longer watched for a disconnect until the response ends)."""

TAKEOVER = "kubelet.takeover"


class TakenOver(Exception):
    """The app took the raw connection: nothing more of it is HTTP/1.1 to us."""


def error_response(status: int) -> bytes:
    """What Go's server writes for a request it cannot parse, then it closes."""
    reason = {400: "Bad Request", 431: "Request Header Fields Too Large", 501: "Not Implemented"}
    line = f"{status} {reason.get(status, 'Bad Request')}"
    return (
        f"HTTP/1.1 {line}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Connection: close\r\n\r\n{line}"
    ).encode()


class Http1Connection:
    def __init__(
        self,
        stream: trio.abc.Stream,
        app: ASGIApp,
        base_scope: Scope,
        limits: Limits,
        *,
        initial: bytes = b"",
        idle: IdleConnections | None = None,
    ) -> None:
        self.stream = stream
        self.app = app
        self.base_scope = base_scope
        self.limits = limits
        self.idle = idle if idle is not None else IdleConnections()
        self.conn = h11.Connection(
            h11.SERVER, max_incomplete_event_size=limits.max_header_bytes + 4096
        )
        if initial:
            self.conn.receive_data(initial)
        self.linger = False
        """The connection ends with request bytes unread: close it gently (see connection.py)."""
        self._watchdog = trio.CancelScope()
        """The current exchange's: its deadline is set while a write is under way."""

    async def run(self, header_deadline: float) -> None:
        """Serve requests until the client or a limit ends the connection."""
        deadline = header_deadline
        while True:
            head = await self._read_head(deadline)
            if head is None:
                return
            try:
                if not await self._exchange(head):
                    return
            except TakenOver:
                return
            self.conn.start_next_cycle()
            waiting = await self._wait_for_next_request()
            if waiting is None:
                return
            deadline = waiting

    async def _receive(self) -> bytes:
        try:
            return bytes(await self.stream.receive_some(READ_SIZE))
        except BROKEN:
            return b""

    async def _send(self, event: h11.Event) -> None:
        """Write ``event``; within ``send_timeout``, or the exchange's watchdog cancels the
        handler (``_exchange``)."""
        data = self.conn.send(event)
        if data:
            self._watchdog.deadline = trio.current_time() + self.limits.send_timeout
            try:
                await self.stream.send_all(data)
            finally:
                self._watchdog.deadline = math.inf

    async def _wait_for_next_request(self) -> float | None:
        """Keep-alive: the header deadline once the next request begins (None: closed)."""
        data, closed = self.conn.trailing_data
        if data:
            return trio.current_time() + self.limits.header_timeout
        if closed:
            return None
        with trio.move_on_after(self.limits.idle_timeout) as idle:
            self.idle.add(self, idle.cancel)
            try:
                chunk = await self._receive()
            finally:
                self.idle.discard(self)
            if not chunk:
                return None
            self.conn.receive_data(chunk)
            return trio.current_time() + self.limits.header_timeout
        log.v(4).info("closing idle connection", peer=self._peer())
        return None

    async def _read_head(self, deadline: float) -> h11.Request | None:
        with trio.move_on_at(deadline):
            while True:
                try:
                    event = self.conn.next_event()
                except h11.RemoteProtocolError as exc:
                    await self._refuse(exc.error_status_hint)
                    return None
                if event is h11.NEED_DATA:
                    chunk = await self._receive()
                    self.conn.receive_data(chunk)  # b"": EOF, h11 reports ConnectionClosed
                    continue
                if isinstance(event, h11.Request):
                    return event
                return None  # ConnectionClosed
        log.v(3).info("request headers not complete in time; closing", peer=self._peer())
        return None

    async def _refuse(self, status: int) -> None:
        self.linger = True
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with trio.move_on_after(1), contextlib.suppress(*BROKEN):
                await self.stream.send_all(error_response(status))

    def _peer(self) -> str:
        client = self.base_scope.get("client")
        return f"{client[0]}:{client[1]}" if client else "?"

    def _scope(self, head: h11.Request, takeover: Any | None) -> Scope:
        target = head.target
        if target[:1] != b"/" and b"://" in target[:8]:  # absolute-form, as proxies send
            target = b"/" + target.split(b"://", 1)[1].partition(b"/")[2]
        path, _, query = target.partition(b"?")
        scope = dict(self.base_scope)
        scope.update(
            type="http",
            asgi={"version": "3.0", "spec_version": "2.3"},
            http_version=head.http_version.decode(),
            method=head.method.decode("ascii"),
            path=unquote(path.decode("latin-1")),
            raw_path=path,
            query_string=query,
            root_path="",
            headers=[(k.lower(), v) for k, v in head.headers],
            extensions={TAKEOVER: takeover} if takeover is not None else {},
        )
        return scope

    async def _exchange(self, head: h11.Request) -> bool:
        """One request through the app. True: the connection may serve another."""
        self._watchdog = trio.CancelScope()
        with self._watchdog:
            return await self._through_app(head)
        log.v(3).info("client takes no response data; closing", peer=self._peer())
        return False

    async def _through_app(self, head: h11.Request) -> bool:
        exchange = _Exchange(self, head)
        upgrade = any(k.lower() == b"upgrade" for k, _ in head.headers)
        scope = self._scope(head, exchange.takeover if upgrade else None)
        try:
            await self.app(scope, exchange.receive, exchange.send)
        except TakenOver:
            raise
        except Exception as exc:  # the app's bug: answered 500 when still possible
            log.error(
                "request handler failed", method=scope["method"], path=scope["path"],
                exc_info=exc,
            )  # fmt: skip
            if exchange.taken:
                raise TakenOver from None
            if not exchange.started and not exchange.gone:
                await exchange.send_internal_error()
            return False
        if exchange.taken:
            raise TakenOver
        if exchange.gone:
            return False
        if not exchange.started:
            log.error("request handler sent no response", path=scope["path"])
            await exchange.send_internal_error()
            return False
        if not exchange.finished:
            return False
        return await self._finish_request(exchange)

    async def _finish_request(self, exchange: _Exchange) -> bool:
        """Read what is left of the request body (up to ``drain_bytes``), to keep the connection."""
        if self.conn.our_state is not h11.DONE:
            return False
        if self.conn.their_state is h11.DONE:
            return True
        self.linger = True
        if exchange.continue_pending:
            return False  # the client may or may not send the body: Go closes here too
        budget = self.limits.drain_bytes
        with trio.move_on_after(self.limits.header_timeout):
            while self.conn.their_state is h11.SEND_BODY:
                try:
                    event = self.conn.next_event()
                except h11.RemoteProtocolError:
                    return False
                if event is h11.NEED_DATA:
                    chunk = await self._receive()
                    if not chunk:
                        return False
                    self.conn.receive_data(chunk)
                elif isinstance(event, h11.Data):
                    budget -= len(event.data)
                    if budget < 0:
                        return False
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.linger = False
            return True
        return False


class _Exchange:
    """One request/response: the ASGI ``receive`` and ``send`` of the app."""

    def __init__(self, owner: Http1Connection, head: h11.Request) -> None:
        self.owner = owner
        self.conn = owner.conn
        self.head_only = head.method == b"HEAD"
        self.started = False
        self.finished = False
        self.gone = False
        self.taken = False
        self.body_done = False
        self.continue_pending = self.conn.they_are_waiting_for_100_continue
        self.watch: trio.CancelScope | None = None
        self.pipelined = 0

    # -- receive ---------------------------------------------------------------------------

    async def receive(self) -> Message:
        if self.taken:
            raise RuntimeError("the connection was taken over")
        if not self.body_done and not self.gone:
            message = await self._body()
            if message is not None:
                return message
        await self._watch_for_disconnect()
        return {"type": "http.disconnect"}

    async def _body(self) -> Message | None:
        if self.continue_pending and not self.started:
            self.continue_pending = False
            with self._breaks():
                await self.owner._send(h11.InformationalResponse(status_code=100, headers=[]))
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError:
                self.gone = True
                return None
            if event is h11.NEED_DATA:
                chunk = await self.owner._receive()
                self.conn.receive_data(chunk)
                continue
            if isinstance(event, h11.Data):
                return {"type": "http.request", "body": bytes(event.data), "more_body": True}
            if isinstance(event, h11.EndOfMessage):
                self.body_done = True
                return {"type": "http.request", "body": b"", "more_body": False}
            if event is h11.PAUSED:  # an Upgrade request's end: leave the bytes after it
                self.body_done = True
                return {"type": "http.request", "body": b"", "more_body": False}
            self.gone = True  # ConnectionClosed
            return None

    async def _watch_for_disconnect(self) -> None:
        """Until the client goes away or the response is complete."""
        if self.gone or self.finished:
            return
        with trio.CancelScope() as self.watch:
            while True:
                if self.pipelined > PIPELINE_BUFFER or self.conn.their_state is not h11.DONE:
                    await trio.sleep_forever()  # nothing more to read safely: wait for the end
                chunk = await self.owner._receive()
                if not chunk:
                    self.gone = True
                    return
                self.pipelined += len(chunk)
                self.conn.receive_data(chunk)
        self.watch = None

    # -- send ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _breaks(self) -> Iterator[None]:
        try:
            yield
        except BROKEN:
            self.gone = True

    async def send(self, message: Message) -> None:
        if self.taken:
            raise RuntimeError("the connection was taken over")
        if self.gone or self.finished:
            return  # ASGI: sends after a disconnect are dropped
        kind = message["type"]
        with self._breaks():
            if kind == "http.response.start":
                if self.started:
                    raise RuntimeError("response already started")
                self.started = True
                headers = response_headers(message.get("headers", []))
                headers.append((b"date", date_header()))
                await self.owner._send(
                    h11.Response(status_code=int(message["status"]), headers=headers)
                )
            elif kind == "http.response.body":
                if not self.started:
                    raise RuntimeError("response body before its start")
                body = message.get("body", b"")
                if body and not self.head_only:
                    await self.owner._send(h11.Data(data=body))
                if not message.get("more_body", False):
                    self.finished = True
                    await self.owner._send(h11.EndOfMessage())
                    if self.watch is not None:
                        self.watch.cancel()

    async def send_internal_error(self) -> None:
        await self.send(
            {"type": "http.response.start", "status": 500,
             "headers": [(b"content-length", b"0")]}
        )  # fmt: skip
        await self.send({"type": "http.response.body", "body": b""})

    async def takeover(self) -> tuple[trio.abc.Stream, bytes]:
        """Hand the app the raw connection and the bytes received after the request head."""
        if self.started:
            raise RuntimeError("cannot take over a connection after a response started")
        if self.watch is not None:
            raise RuntimeError("cannot take over while receive() is waiting")
        self.taken = True
        buffered, _ = self.conn.trailing_data
        return self.owner.stream, bytes(buffered)
