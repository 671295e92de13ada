"""HTTP/2 on one connection (h2): one ASGI app task per stream, one writer for the socket.

What hypercorn 0.18 got wrong and this keeps right (issue 12): a response may finish
before its request body has arrived (a 401 answered to a 100 KiB POST). The stream then
stays known until the client ends it: body frames still in flight are read, dropped and
their flow-control credit handed back, up to ``drain_bytes``; past that the stream is
reset with NO_ERROR, as Go's server does at once (RFC 9113 §8.1). Frames for streams
that are gone never fail the connection, and the connection stays usable.

Limits: ``max_streams`` concurrent streams, ``max_header_bytes`` of header list, the
client's preface within ``header_timeout`` of accept, and ``idle_timeout`` with no stream
in flight (then GOAWAY). Request bodies are flow-controlled by what the app consumes
(64 KiB windows), response bodies by the client's windows.
"""

from __future__ import annotations

import collections
import contextlib
import math
from typing import Any
from urllib.parse import unquote

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import trio
from h2.errors import ErrorCodes

from kubelet.logs import get_logger

from .asgi import Message, Scope
from .limits import Limits
from .wire import BROKEN, ASGIApp, date_header, response_headers

log = get_logger(__name__)

READ_SIZE = 65536
PER_FIELD_OVERHEAD = 32


class _Gone(Exception):
    """The stream was reset or the connection is closing: stop sending."""


class Http2Connection:
    def __init__(
        self,
        stream: trio.abc.Stream,
        app: ASGIApp,
        base_scope: Scope,
        limits: Limits,
        *,
        initial: bytes = b"",
    ) -> None:
        self.stream = stream
        self.app = app
        self.base_scope = base_scope
        self.limits = limits
        self.initial = initial
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding=None)
        )
        header_list = limits.max_header_bytes + 10 * PER_FIELD_OVERHEAD  # as Go counts it
        self.h2.local_settings = h2.settings.Settings(
            client=False,
            initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: limits.max_streams,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: header_list,
            },
        )
        self.h2.decoder.max_header_list_size = header_list
        self.streams: dict[int, _Stream] = {}
        self.draining: dict[int, int] = {}
        """Streams whose response is done but whose request body is still coming: the
        bytes still accepted before a reset."""
        self.established = False
        self.closing = False
        self.last_active = 0.0
        self.window = trio.lowlevel.ParkingLot()
        self._wake = trio.Event()
        self._flushed = trio.lowlevel.ParkingLot()
        self._queued = 0
        self._sent = 0
        self._read_scope = trio.CancelScope()
        self._stop = False
        self.header_deadline = math.inf
        self._nursery: trio.Nursery | None = None

    # -- the connection ----------------------------------------------------------------------

    async def run(self, header_deadline: float) -> None:
        self.header_deadline = header_deadline
        self.last_active = trio.current_time()
        self.h2.initiate_connection()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._writer)
            try:
                await self._read_loop()
            finally:
                nursery.cancel_scope.cancel()
        await self._last_words()

    async def _read_loop(self) -> None:
        data = self.initial
        while True:
            if data:
                try:
                    events = self.h2.receive_data(data)
                except h2.exceptions.ProtocolError as exc:
                    log.v(3).info("HTTP/2 protocol error; closing", error=str(exc))
                    return
                for event in events:
                    self._handle(event)
                self.kick()
            if self._stop or (self.closing and not self.streams):
                return
            data = b""
            self._read_scope = trio.CancelScope(deadline=self._read_deadline())
            with self._read_scope:
                try:
                    data = bytes(await self.stream.receive_some(READ_SIZE))
                except BROKEN:
                    return
                if not data:
                    return
            if self._read_scope.cancelled_caught and not self._stop:
                self._timed_out()
                return

    def _timed_out(self) -> None:
        if self.established:
            log.v(4).info("closing idle HTTP/2 connection")
            self.h2.close_connection(ErrorCodes.NO_ERROR)
        else:
            log.v(3).info("HTTP/2 preface not complete in time; closing")

    def stop(self) -> None:
        """End the connection (its writer broke, or a GOAWAY'd client is done)."""
        self._stop = True
        self._read_scope.cancel()

    async def _last_words(self) -> None:
        """Send what is queued (a GOAWAY), briefly; the peer may be gone."""
        data = self.h2.data_to_send()
        if data:
            with trio.move_on_after(1), contextlib.suppress(*BROKEN):
                await self.stream.send_all(data)

    def _read_deadline(self) -> float:
        if not self.established:
            return self.header_deadline
        if self.streams:
            return math.inf
        return self.last_active + self.limits.idle_timeout

    def _update_read_deadline(self) -> None:
        self._read_scope.deadline = self._read_deadline()

    # -- writing -----------------------------------------------------------------------------

    def kick(self) -> None:
        """Have the writer send what h2 has queued."""
        self._queued += 1
        self._wake.set()

    async def flush(self) -> None:
        """Queue a write and wait until the socket took it (backpressure for bodies)."""
        self.kick()
        wanted = self._queued
        while self._sent < wanted:
            await self._flushed.park()

    async def _writer(self) -> None:
        """The only task that writes to the socket (a cancelled write would corrupt it)."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            upto = self._queued
            data = self.h2.data_to_send()
            if data:
                try:
                    await self.stream.send_all(data)
                except BROKEN:
                    self.stop()
                    return
            self._sent = upto
            self._flushed.unpark_all()

    # -- events ------------------------------------------------------------------------------

    def _handle(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RemoteSettingsChanged):
            if not self.established:
                self.established = True
                self._update_read_deadline()
            self.window.unpark_all()
        elif isinstance(event, h2.events.RequestReceived):
            self._request(event)
        elif isinstance(event, h2.events.DataReceived):
            self._data(event)
        elif isinstance(event, h2.events.StreamEnded):
            st = self.streams.get(event.stream_id)
            if st is not None:
                st.ended = True
                st.wake()
            self.draining.pop(event.stream_id, None)
        elif isinstance(event, h2.events.StreamReset):
            st = self.streams.get(event.stream_id)
            if st is not None:
                st.reset = True
                st.wake()
            self.draining.pop(event.stream_id, None)
            self.window.unpark_all()
        elif isinstance(event, h2.events.WindowUpdated):
            self.window.unpark_all()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.closing = True

    def _request(self, event: h2.events.RequestReceived) -> None:
        stream_id = event.stream_id
        if stream_id is None or self._nursery is None or self.closing:
            return
        st = _Stream(self, stream_id, self._scope(event.headers or []))
        self.streams[stream_id] = st
        self._update_read_deadline()
        self._nursery.start_soon(st.run)

    def _data(self, event: h2.events.DataReceived) -> None:
        stream_id = event.stream_id
        assert stream_id is not None
        size = event.flow_controlled_length or 0
        st = self.streams.get(stream_id)
        if st is not None and not st.done:
            st.buffer.append((event.data or b"", size))
            st.wake()
            return
        self._acknowledge(stream_id, size)
        budget = self.draining.get(stream_id)
        if budget is None:
            return
        budget -= size
        if budget < 0:
            self.draining.pop(stream_id)
            self.reset(stream_id, ErrorCodes.NO_ERROR)
        else:
            self.draining[stream_id] = budget

    def _acknowledge(self, stream_id: int, size: int) -> None:
        if size:
            with contextlib.suppress(h2.exceptions.StreamClosedError, KeyError):
                self.h2.acknowledge_received_data(size, stream_id)

    def reset(self, stream_id: int, code: ErrorCodes) -> None:
        with contextlib.suppress(h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            self.h2.reset_stream(stream_id, code)

    def stream_done(self, st: _Stream) -> None:
        """The app is done with ``st``: refund unread body, drain or reset what is coming."""
        self.streams.pop(st.stream_id, None)
        self.last_active = trio.current_time()
        unread = sum(size for _, size in st.buffer)
        st.buffer.clear()
        self._acknowledge(st.stream_id, unread)
        if not st.ended and not st.reset:
            budget = self.limits.drain_bytes - unread
            if st.finished and budget >= 0:
                self.draining[st.stream_id] = budget
            else:
                self.reset(st.stream_id, ErrorCodes.NO_ERROR if st.finished else ErrorCodes.CANCEL)
        self._update_read_deadline()
        self.kick()
        if self.closing and not self.streams:
            self.stop()

    def _scope(self, raw: list[Any]) -> Scope:
        pseudo: dict[bytes, bytes] = {}
        headers: list[tuple[bytes, bytes]] = []
        for name, value in raw:
            name, value = bytes(name), bytes(value)
            if name.startswith(b":"):
                pseudo[name] = value
            else:
                headers.append((name, value))
        if b":authority" in pseudo and not any(k == b"host" for k, _ in headers):
            headers.insert(0, (b"host", pseudo[b":authority"]))
        path, _, query = pseudo.get(b":path", b"").partition(b"?")
        scope = dict(self.base_scope)
        scope.update(
            type="http",
            asgi={"version": "3.0", "spec_version": "2.3"},
            http_version="2",
            method=pseudo.get(b":method", b"GET").decode("ascii", "replace"),
            path=unquote(path.decode("latin-1")),
            raw_path=path,
            query_string=query,
            root_path="",
            headers=headers,
            extensions={},
        )
        return scope


class _Stream:
    """One request/response: the ASGI ``receive`` and ``send`` of its app task."""

    def __init__(self, conn: Http2Connection, stream_id: int, scope: Scope) -> None:
        self.conn = conn
        self.stream_id = stream_id
        self.scope = scope
        self.buffer: collections.deque[tuple[bytes, int]] = collections.deque()
        self.ended = False
        self.end_delivered = False
        self.reset = False
        self.started = False
        self.finished = False
        self.done = False
        self.head_only = scope["method"] == "HEAD"
        self.pending_headers: list[tuple[bytes, bytes]] | None = None
        self._lot = trio.lowlevel.ParkingLot()

    def wake(self) -> None:
        self._lot.unpark_all()

    async def run(self) -> None:
        try:
            await self.conn.app(self.scope, self.receive, self.send)
        except _Gone:
            pass
        except Exception as exc:
            log.error(
                "request handler failed", method=self.scope["method"], path=self.scope["path"],
                exc_info=exc,
            )  # fmt: skip
            await self._fail()
        else:
            if not self.started and not self.reset:
                log.error("request handler sent no response", path=self.scope["path"])
                await self._fail()
            elif self.pending_headers is not None or not self.finished:
                self.conn.reset(self.stream_id, ErrorCodes.INTERNAL_ERROR)
        finally:
            self.done = True
            self.conn.stream_done(self)

    async def _fail(self) -> None:
        if self.reset:
            return
        if self.started and self.pending_headers is None:  # headers on the wire already
            self.conn.reset(self.stream_id, ErrorCodes.INTERNAL_ERROR)
            return
        self.started, self.pending_headers = False, None
        with contextlib.suppress(_Gone):
            await self.send(
                {"type": "http.response.start", "status": 500,
                 "headers": [(b"content-length", b"0")]}
            )  # fmt: skip
            await self.send({"type": "http.response.body", "body": b""})

    # -- receive -----------------------------------------------------------------------------

    async def receive(self) -> Message:
        while True:
            if self.reset:
                return {"type": "http.disconnect"}
            if self.buffer:
                data, size = self.buffer.popleft()
                self.conn._acknowledge(self.stream_id, size)
                self.conn.kick()
                return {"type": "http.request", "body": data, "more_body": True}
            if self.ended and not self.end_delivered:
                self.end_delivered = True
                return {"type": "http.request", "body": b"", "more_body": False}
            if self.finished:
                return {"type": "http.disconnect"}
            await self._lot.park()

    # -- send --------------------------------------------------------------------------------

    async def send(self, message: Message) -> None:
        if self.reset or self.finished:
            return
        kind = message["type"]
        try:
            if kind == "http.response.start":
                if self.started:
                    raise RuntimeError("response already started")
                self.started = True
                status = str(int(message["status"])).encode()
                self.pending_headers = [
                    (b":status", status),
                    *response_headers(message.get("headers", []), http2=True),
                    (b"date", date_header()),
                ]
            elif kind == "http.response.body":
                if not self.started:
                    raise RuntimeError("response body before its start")
                await self._body(message.get("body", b""), bool(message.get("more_body", False)))
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            self.reset = True  # the client reset the stream between two of our checks
        except _Gone:
            self.reset = True

    async def _body(self, body: bytes, more: bool) -> None:
        h2c = self.conn.h2
        if self.head_only:
            body = b""
        if self.pending_headers is not None:
            headers, self.pending_headers = self.pending_headers, None
            h2c.send_headers(self.stream_id, headers, end_stream=not body and not more)
            if not body and not more:
                self._finish()
            await self.conn.flush()
        view = memoryview(body)
        while view:
            window = await self._window()
            h2c.send_data(self.stream_id, view[:window].tobytes())
            view = view[window:]
            await self.conn.flush()
        if not more and not self.finished:
            h2c.end_stream(self.stream_id)
            self._finish()
            await self.conn.flush()

    def _finish(self) -> None:
        self.finished = True
        self.wake()

    async def _window(self) -> int:
        h2c = self.conn.h2
        while True:
            if self.reset:
                raise _Gone
            size = min(h2c.local_flow_control_window(self.stream_id), h2c.max_outbound_frame_size)
            if size > 0:
                return size
            await self.conn.window.park()
