"""HTTP/2 on one connection (h2): one ASGI app task per stream, one writer for the socket.

What hypercorn 0.18 got wrong and this keeps right: a response may finish
before its request body has arrived (a 401 answered to a 100 KiB POST). The stream then
stays known until the client ends it: body frames still in flight are read, dropped and
their flow-control credit handed back, up to ``drain_bytes``; past that the stream is
reset with NO_ERROR, as Go's server does at once (RFC 9113 §8.1). Frames for streams
that are gone never fail the connection, and the connection stays usable.

Limits: ``max_streams`` concurrent streams, ``max_header_bytes`` of header list, the
client's preface within ``header_timeout`` of accept, and ``idle_timeout`` with no stream
in flight (then GOAWAY). Request bodies are flow-controlled by what the app consumes
(64 KiB windows), response bodies by the client's windows.

Against hostile clients (the attacks Go's server was fixed for):

- Control-frame flood (CVE-2019-9512/9515): h2 answers every PING and SETTINGS whether
  or not the client reads. More than ``MAX_QUEUED_CONTROL`` answers not yet on the wire
  (Go's figure) is GOAWAY ENHANCE_YOUR_CALM and close; more than ``OUTBOUND_CAP`` bytes
  of any kind queued and the connection stops reading until the writer flushed them.
- Rapid reset (CVE-2023-44487): a stream counts against ``max_streams`` until its
  handler returned, not until the client reset it; a request beyond is refused with
  REFUSED_STREAM (Go queues up to four times the bound instead, holding each request).
  A reset cancels the stream's handler. A client that resets streams whose handler still
  runs (or has requests refused) more than ``EARLY_RESETS_PER_STREAM`` times the bound
  at once, earning back one bound's worth every ``EARLY_RESETS_REFILL`` seconds, gets
  GOAWAY ENHANCE_YOUR_CALM (Go's "too many early resets").
- A client that never takes a response: each body piece must go out within
  ``send_timeout`` (else the stream is reset INTERNAL_ERROR, as Go's ``WriteTimeout``),
  and the socket must take each write within it (else the connection is closed).
- With no stream in flight the connection is idle: a full listener closes it (GOAWAY
  NO_ERROR) for a client waiting in the backlog (``idle.py``).
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

from kubelet.api import TokenBucket
from kubelet.logs import get_logger

from .asgi import Message, Scope
from .idle import IdleConnections
from .limits import Limits
from .wire import BROKEN, ASGIApp, date_header, response_headers

log = get_logger(__name__)

READ_SIZE = 65536
PER_FIELD_OVERHEAD = 32
MAX_QUEUED_CONTROL = 10_000
"""PING and SETTINGS acknowledgements and RST_STREAMs not yet written (Go's
``maxQueuedControlFrames``); beyond, the client is not reading: GOAWAY, close."""
LINGER = 1.0
"""After our GOAWAY, how long the client's frames are still read and dropped (Go's
``goAwayTimeout``)."""
OUTBOUND_CAP = 1 << 20
"""Bytes queued for the socket beyond which the connection stops reading until they went."""
EARLY_RESETS_PER_STREAM = 4
"""Early resets allowed at once, in multiples of ``max_streams`` (Go lets four times the
bound of reset requests wait before its "too many early resets")."""
EARLY_RESETS_REFILL = 10.0
"""Seconds in which a connection earns back ``max_streams`` early resets."""


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
        idle: IdleConnections | None = None,
    ) -> None:
        self.stream = stream
        self.app = app
        self.base_scope = base_scope
        self.limits = limits
        self.initial = initial
        self.idle = idle if idle is not None else IdleConnections()
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
        self._outbox: list[bytes] = []
        self._outbox_bytes = 0
        self._writing = 0
        """Bytes the writer is handing the socket now."""
        self._control = 0
        """Control frames queued and not yet written (see ``MAX_QUEUED_CONTROL``)."""
        self._early_resets = TokenBucket(
            limits.max_streams / EARLY_RESETS_REFILL,
            EARLY_RESETS_PER_STREAM * limits.max_streams,
        )
        self._read_scope = trio.CancelScope()
        self._stop = False
        self._reclaimed = False
        self._said_goaway = False
        self._writer_gone = False
        self.header_deadline = math.inf
        self._nursery: trio.Nursery | None = None

    # -- the connection ----------------------------------------------------------------------

    async def run(self, header_deadline: float) -> None:
        self.header_deadline = header_deadline
        self.last_active = trio.current_time()
        self.h2.initiate_connection()
        try:
            async with trio.open_nursery() as writing:
                writing.start_soon(self._writer)
                try:
                    async with trio.open_nursery() as handlers:
                        self._nursery = handlers
                        try:
                            await self._read_loop()
                        finally:
                            handlers.cancel_scope.cancel()
                    await self._last_words()
                finally:
                    writing.cancel_scope.cancel()
        finally:
            self.idle.discard(self)

    async def _read_loop(self) -> None:
        data = self.initial
        while True:
            if data and not self._feed(data):
                return
            data = b""
            if self._stop or (self.closing and not self.streams):
                return
            if self._backlog() > OUTBOUND_CAP:
                await self._drain()
                continue
            self._read_scope = trio.CancelScope(deadline=self._read_deadline())
            if self._reclaimed:
                if self.streams:  # a request came with the reclaim: serve it, stay
                    self._reclaimed = False
                else:
                    self._read_scope.cancel()
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

    def _feed(self, data: bytes) -> bool:
        """Hand ``data`` to h2 and act on its events; False: the connection is done."""
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            log.v(3).info("HTTP/2 protocol error; closing", error=str(exc))
            return False
        for event in events:
            self._handle(event)
        self._collect()
        self.kick()
        if self._control > MAX_QUEUED_CONTROL and not self._stop:
            self._calm_down("too many queued control frames")
        return not self._stop

    async def _drain(self) -> None:
        """Read nothing until the writer flushed what is queued (the client may not be
        reading; the writer's ``send_timeout`` ends that)."""
        self._read_scope = trio.CancelScope()
        with self._read_scope:
            while self._backlog() > OUTBOUND_CAP:
                await self._flushed.park()

    def _calm_down(self, reason: str) -> None:
        """GOAWAY ENHANCE_YOUR_CALM and close, as Go's server answers a client abusing it."""
        log.v(2).info(
            "HTTP/2 client misbehaves; closing", reason=reason, client=self._client()
        )
        self._goaway(ErrorCodes.ENHANCE_YOUR_CALM)
        self._stop = True

    def _goaway(self, code: ErrorCodes) -> None:
        with contextlib.suppress(h2.exceptions.ProtocolError):
            self.h2.close_connection(code)
            self._said_goaway = True
        self.kick()

    def _timed_out(self) -> None:
        if self.established:
            log.v(4).info("closing idle HTTP/2 connection", listener_full=self._reclaimed)
            self._goaway(ErrorCodes.NO_ERROR)
        else:
            log.v(3).info("HTTP/2 preface not complete in time; closing")

    def stop(self) -> None:
        """End the connection (its writer broke, or a GOAWAY'd client is done)."""
        self._stop = True
        self._read_scope.cancel()

    def _reclaim(self) -> None:
        """The listener is full and this connection idle: close it (see ``idle.py``)."""
        self._reclaimed = True
        self._read_scope.cancel()

    async def _last_words(self) -> None:
        """Have the writer send what is queued (a GOAWAY), then read and drop what the
        client still sends, for ``LINGER`` at most: a close with input unread resets the
        connection, and the client's kernel drops the GOAWAY with it (Go waits 1 s)."""
        if self._writer_gone:
            return
        with trio.move_on_after(LINGER), contextlib.suppress(*BROKEN):
            await self.flush()
            if self._writer_gone or not self._said_goaway:
                return
            while await self.stream.receive_some(READ_SIZE):
                pass

    def _read_deadline(self) -> float:
        if not self.established:
            return self.header_deadline
        if self.streams:
            return math.inf
        return self.last_active + self.limits.idle_timeout

    def _update_read_deadline(self) -> None:
        """After a stream came or went: the idle deadline, and whether a full listener
        may close this connection."""
        self._read_scope.deadline = self._read_deadline()
        if self.established and not self.streams and not self.closing:
            self.idle.add(self, self._reclaim)
        else:
            self.idle.discard(self)

    # -- writing -----------------------------------------------------------------------------

    def kick(self) -> None:
        """Have the writer send what h2 has queued."""
        self._queued += 1
        self._wake.set()

    async def flush(self) -> None:
        """Queue a write and wait until the socket took it (backpressure for bodies)."""
        self.kick()
        wanted = self._queued
        while self._sent < wanted and not self._writer_gone:
            await self._flushed.park()

    def _collect(self) -> None:
        """Move what h2 queued to the outbox, where its size is known (backpressure)."""
        data = self.h2.data_to_send()
        if data:
            self._outbox.append(data)
            self._outbox_bytes += len(data)

    def _take(self) -> bytes:
        """Everything queued, in order: the outbox, then what h2 queued since."""
        self._collect()
        data = b"".join(self._outbox)
        self._outbox.clear()
        self._outbox_bytes = 0
        return data

    def _backlog(self) -> int:
        """Bytes queued or being written, not yet taken by the socket."""
        return self._outbox_bytes + self._writing

    async def _writer(self) -> None:
        """The only task that writes to the socket (a cancelled write would corrupt it).
        A write the socket does not take within ``send_timeout`` ends the connection (one
        watchdog scope whose deadline is set per write: no scope per write)."""
        with trio.CancelScope() as watchdog:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                upto, control = self._queued, self._control
                data = self._take()
                if data:
                    self._writing = len(data)
                    watchdog.deadline = trio.current_time() + self.limits.send_timeout
                    try:
                        await self.stream.send_all(data)
                    except BROKEN:
                        self._writer_failed()
                        return
                    watchdog.deadline = math.inf
                    self._writing = 0
                self._control -= control
                self._sent = upto
                self._flushed.unpark_all()
        log.v(3).info("HTTP/2 client takes no data; closing", client=self._client())
        self._writer_failed()

    def _writer_failed(self) -> None:
        """The socket is broken, or a write was cut off mid-frame: nothing more goes out."""
        self._writer_gone = True
        self._flushed.unpark_all()
        self.stop()

    def _client(self) -> Any:
        return self.base_scope.get("client")

    # -- events ------------------------------------------------------------------------------

    def _handle(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RemoteSettingsChanged):
            self._control += 1  # h2 acknowledged them
            if not self.established:
                self.established = True
                self._update_read_deadline()
            self.window.unpark_all()
        elif isinstance(event, h2.events.PingReceived):
            self._control += 1  # h2 answered it
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
                st.abort()
                self._early_reset()
            self.draining.pop(event.stream_id, None)
            self.window.unpark_all()
        elif isinstance(event, h2.events.WindowUpdated):
            self.window.unpark_all()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.closing = True

    def _early_reset(self) -> None:
        """A stream ended by the client while its handler ran (or refused): counted."""
        if not self._early_resets.try_acquire() and not self._stop:
            self._calm_down("too many early resets")

    def _request(self, event: h2.events.RequestReceived) -> None:
        stream_id = event.stream_id
        if stream_id is None or self._nursery is None or self.closing or self._stop:
            return
        if len(self.streams) >= self.limits.max_streams:  # handlers of reset streams run on
            self.reset(stream_id, ErrorCodes.REFUSED_STREAM)
            self._early_reset()
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
            self._control += 1

    def stalled(self, st: _Stream) -> None:
        """The client took none of ``st``'s response for ``send_timeout``: reset it."""
        log.v(3).info(
            "HTTP/2 client takes no response data; resetting the stream",
            client=self._client(), path=st.scope["path"],
        )  # fmt: skip
        if not st.finished:
            self.reset(st.stream_id, ErrorCodes.INTERNAL_ERROR)
            self.kick()
        st.abort()

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
        self._cancel = trio.CancelScope()

    def wake(self) -> None:
        self._lot.unpark_all()

    def abort(self) -> None:
        """The stream is gone (reset by the client, or by us): stop its handler."""
        self.reset = True
        self.wake()
        self._cancel.cancel()

    async def run(self) -> None:
        try:
            with self._cancel:
                await self.conn.app(self.scope, self.receive, self.send)
            if self._cancel.cancelled_caught and not self.reset:
                self.conn.stalled(self)  # not an abort: the deadline of a body ``send``
        except _Gone:
            pass
        except Exception as exc:
            log.error(
                "request handler failed", method=self.scope["method"], path=self.scope["path"],
                exc_info=exc,
            )  # fmt: skip
            await self._fail()
        else:
            if self.reset:
                pass
            elif not self.started:
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
                # the client must take this piece within send_timeout, or the handler is
                # cancelled and the stream reset (see ``run``)
                self._cancel.deadline = trio.current_time() + self.conn.limits.send_timeout
                try:
                    await self._body(
                        message.get("body", b""), bool(message.get("more_body", False))
                    )
                finally:
                    self._cancel.deadline = math.inf
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            self.reset = True  # the client reset the stream between two of our checks
        except _Gone:
            self.reset = True

    async def _body(self, body: bytes, more: bool) -> None:
        """The frames of one body piece, one write per window's worth: the headers go
        with the first data, the end of the stream with the last (a small response, as
        most are, is one write)."""
        h2c = self.conn.h2
        if self.head_only:
            body = b""
        if self.pending_headers is not None:
            headers, self.pending_headers = self.pending_headers, None
            h2c.send_headers(self.stream_id, headers, end_stream=not body and not more)
            if not body and not more:
                self._finish()
            if not body:
                await self.conn.flush()
        view = memoryview(body)
        while view:
            window = await self._window()
            chunk, view = view[:window], view[window:]
            last = not view and not more
            h2c.send_data(self.stream_id, chunk.tobytes(), end_stream=last)
            if last:
                self._finish()
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
            self.conn.kick()  # what is queued (our headers) goes while we wait
            await self.conn.window.park()
