"""WebSocket ``v5.channel.k8s.io`` exec and attach, translated to SPDY for the runtime.

Upstream's kubelet 1.36 with ``ExtendWebSocketsToKubelet`` on (server.go ``getExec``/
``getAttach``; apiserver's ``StreamTranslatorHandler`` and its ``websocket.go``; client-go's
SPDY executor) answers a WebSocket request that offers ``v5.channel.k8s.io`` itself and
speaks SPDY/3.1 remotecommand to the runtime's streaming URL, so a runtime that knows only
SPDY and WebSocket v4 (containerd 1.6, which refuses v5 with 403) serves kubectl's v5.
Other requests (SPDY, WebSocket v4 and older) are proxied byte for byte (``streaming``).
What is done, in upstream's order:

* The WebSocket handshake as x/net/websocket checks it: ``405`` ``bad method`` for a method
  other than GET, ``400`` ``mismatch challenge/response`` without a key, ``400`` ``missing
  or bad WebSocket Version`` (with ``Sec-WebSocket-Version: 13``) for another version. The
  ``101`` names ``v5.channel.k8s.io``; then an empty message on the lowest channel we write
  (stdout, else stderr, else error).
* Then the runtime: ``POST`` to its URL with ``Upgrade: SPDY/3.1`` and
  ``X-Stream-Protocol-Version`` ``v5.channel.k8s.io``, ``v4``, ``v3``, ``v2``,
  ``channel.k8s.io`` (the runtime picks); the streams ``error``, ``stdin``, ``stdout``,
  ``stderr`` (not with a tty) and ``resize`` (tty, v3 and later) are opened one by one, each
  awaiting its SYN_REPLY (30 s). The runtime is pinged every 5 s.
* Channels: stdin (0) to the SPDY stdin stream; v5's close signal ``[255, 0]`` is a FIN on
  it (half-close: the command sees the end of its input and its output still flows); resize
  (4) JSON ``{"Width":…,"Height":…}`` is forwarded with a tty (``resizechannel``: a bad
  message ends resizing, not the session); stdout and stderr come back
  as channels 1 and 2. Nothing is buffered beyond one message either way: a client that does
  not read stops us reading the runtime, a runtime that does not read stops the client.
* The end: once the runtime has finished the error stream and every output stream (or
  closed the connection), the error stream becomes a ``metav1.Status`` on channel 3, as
  upstream maps it: nothing or Success is ``Success``; a v4/v5 ``NonZeroExitCode`` is the
  same reason with cause ``ExitCode`` and the message ``command terminated with non-zero
  exit code: command terminated with exit code N`` (so kubectl exits N); anything else,
  and a runtime that cannot be reached or refuses the upgrade (``unable to upgrade
  connection: …``; a refusal whose body is a Status is passed as it is), is a 500
  ``InternalError``. Then a close frame (1000), and the client has up to 15 minutes to
  read what is left and close.
* Either side closing or failing ends both; a WebSocket protocol error is answered with
  its close code. ``streamingConnectionIdleTimeout`` (4 h by default, 0 = none): no data
  either way for that long ends both (upstream's translator fixes 4 h on the WebSocket;
  pings do not count).

Everything runs in the request's task (a task of the server nursery): the session's tasks
are in a nursery of its own, and nothing outlives the request.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import AsyncGenerator
from typing import Any, Protocol

import attrs
import trio
from wsproto.frame_protocol import FrameProtocol, Opcode, ParseFailed
from wsproto.utilities import generate_accept_token

from kubelet.goformat import go_json
from kubelet.logs import get_logger

from . import spdy
from .asgi import Response
from .resizechannel import ResizeDecoder
from .streaming import (
    CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    ERROR_ECHO_TIMEOUT,
    MAX_ERROR_BODY,
    ProxyError,
    StreamingURL,
    Takeover,
    UpgradeRequest,
    _read_head,
    dial,
    is_upgrade_request,
)
from .wire import BROKEN

log = get_logger(__name__)

V5 = "v5.channel.k8s.io"
SPDY_PROTOCOLS = (V5, "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io",
                  "channel.k8s.io")  # fmt: skip
"""What client-go's SPDY executor offers the runtime, most preferred first."""
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE_SIGNAL = 255
PING_PERIOD = 5.0
"""The translator's SPDY ping period (upstream's ``PingPeriod``)."""
STREAM_CREATION_TIMEOUT = 30.0
"""How long the runtime has to answer each SYN_STREAM (client-go's)."""
FINISH_TIMEOUT = 15 * 60.0
"""After the status and our close frame, how long the client has to close."""
MAX_ERROR_STREAM = 64 << 10
"""At most this much of the runtime's error stream is kept."""


class RemoteOptions(Protocol):
    """What the request asked for (``streams.StreamOptions``)."""

    @property
    def stdin(self) -> bool: ...
    @property
    def stdout(self) -> bool: ...
    @property
    def stderr(self) -> bool: ...
    @property
    def tty(self) -> bool: ...


def websocket_protocols(request: UpgradeRequest) -> list[str]:
    """The first ``Sec-WebSocket-Protocol`` header's protocols (Go reads only the first)."""
    values = request.values(b"sec-websocket-protocol")
    if not values:
        return []
    text = values[0].decode("latin-1").strip()
    return [p.strip() for p in text.split(",")] if text else []


def is_v5_request(request: UpgradeRequest) -> bool:
    """wsstream's ``IsWebSocketRequestWithStreamCloseProtocol``."""
    upgrade = request.values(b"upgrade")
    if not upgrade or upgrade[0].strip().lower() != b"websocket":
        return False
    return is_upgrade_request(request.headers) and V5 in websocket_protocols(request)


def handshake_refusal(request: UpgradeRequest) -> Response | None:
    """x/net/websocket's answer to a handshake it refuses; None when it is acceptable."""
    if request.method != "GET":
        return Response(405, b"bad method")
    if not request.values(b"sec-websocket-key"):
        return Response(400, b"mismatch challenge/response")
    version = request.values(b"sec-websocket-version")
    if not version or version[0].strip() != b"13":
        return Response(
            400, b"missing or bad WebSocket Version", headers=(("Sec-WebSocket-Version", "13"),)
        )
    return None


def accept_head(request: UpgradeRequest) -> bytes:
    key = request.values(b"sec-websocket-key")[0].strip()
    return (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + generate_accept_token(key) + b"\r\n"
        b"Sec-WebSocket-Protocol: " + V5.encode() + b"\r\n\r\n"
    )


# -- statuses -------------------------------------------------------------------------------


def success_status() -> dict[str, Any]:
    return {"metadata": {}, "status": "Success"}


def internal_error(message: str) -> dict[str, Any]:
    """apimachinery's ``NewInternalError``."""
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"Internal error occurred: {message}",
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    }


def exit_code_status(code: int) -> dict[str, Any]:
    """The translator's ``codeExitToStatusError``: what kubectl turns into its exit code."""
    return {
        "metadata": {},
        "status": "Failure",
        "message": (
            f"command terminated with non-zero exit code: command terminated with exit code {code}"
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def status_from_error_stream(protocol: str, data: bytes) -> dict[str, Any]:
    """What the client sees for what the runtime wrote on the error stream (client-go's
    ``errorDecoderV4``/``V2`` and the translator's mapping)."""
    if not data:
        return success_status()
    if protocol not in (V5, "v4.channel.k8s.io"):
        return internal_error(f"error executing remote command: {data.decode(errors='replace')}")
    try:
        status = json.loads(data)
        if not isinstance(status, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        shown = json.dumps(data.decode(errors="replace"))
        return internal_error(f"error stream protocol error: {exc} in {shown}")
    if status.get("status") == "Success":
        return success_status()
    if status.get("status") != "Failure":
        return internal_error("error stream protocol error: unknown error")
    if status.get("reason") != "NonZeroExitCode":
        return internal_error(str(status.get("message", "")))
    details = status.get("details")
    if not isinstance(details, dict):
        return internal_error("error stream protocol error: details must be set")
    for cause in details.get("causes") or []:
        if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
            text = str(cause.get("message", ""))
            if not text.isdigit() or int(text) > 255:
                return internal_error(
                    f'error stream protocol error: invalid exit code value "{text}"'
                )
            return exit_code_status(int(text))
    return internal_error("error stream protocol error: no ExitCode cause given")


# -- the WebSocket side ---------------------------------------------------------------------


class _ClientGone(Exception):
    """The WebSocket client closed, went away or broke the protocol."""


class WebSocket:
    """The server end of the client's WebSocket after our ``101`` (framing by wsproto)."""

    def __init__(self, stream: trio.abc.Stream, buffered: bytes) -> None:
        self.stream = stream
        self.proto = FrameProtocol(client=False, extensions=[])
        self._pending = buffered
        self._lock = trio.Lock()
        self.closed = False
        """The client's close frame arrived (or the connection ended)."""

    async def send(self, channel: int, data: bytes = b"") -> None:
        async with self._lock:
            await self.stream.send_all(self.proto.send_data(bytes([channel]) + data))

    async def _send_raw(self, data: bytes | bytearray) -> None:
        async with self._lock:
            await self.stream.send_all(data)

    async def close(self, code: int = 1000) -> None:
        with contextlib.suppress(*BROKEN):
            await self._send_raw(self.proto.close(code))

    async def frames(self) -> AsyncGenerator[tuple[Opcode, bytes, bool]]:
        """Data frames (opcode, payload, message finished) until the client closes.

        Pings are answered; a close is answered and ends the iteration; a protocol error is
        answered with its close code and raises ``_ClientGone``; so does a vanished client.
        """
        while True:
            data, self._pending = self._pending, b""
            if not data:
                try:
                    data = bytes(await self.stream.receive_some(spdy.RECEIVE))
                except BROKEN as exc:
                    raise _ClientGone(repr(exc)) from None
                if not data:
                    self.closed = True
                    raise _ClientGone("connection closed")
            self.proto.receive_bytes(data)
            try:
                for frame in self.proto.received_frames():
                    if frame.opcode is Opcode.PING:
                        await self._send_raw(self.proto.pong(_as_bytes(frame.payload)))
                    elif frame.opcode is Opcode.CLOSE:
                        self.closed = True
                        reason = frame.payload
                        code = reason[0] if isinstance(reason, tuple) else 1000
                        with contextlib.suppress(*BROKEN):
                            await self._send_raw(self.proto.close(code))
                        return
                    elif frame.opcode is not Opcode.PONG:
                        yield frame.opcode, _as_bytes(frame.payload), frame.message_finished
            except ParseFailed as exc:
                await self.close(int(exc.code))
                raise _ClientGone(f"protocol error: {exc}") from None


def _as_bytes(payload: object) -> bytes:
    if isinstance(payload, str):
        return payload.encode()
    return bytes(payload) if isinstance(payload, bytes | bytearray) else b""


# -- the runtime side ----------------------------------------------------------------------


@attrs.define
class _Runtime:
    """The SPDY session with the runtime: its streams and what came back on them."""

    conn: spdy.SpdyConnection
    protocol: str
    ids: dict[str, int] = attrs.field(factory=dict)
    """Stream type → our stream id."""
    next_id: int = 1
    error: bytearray = attrs.field(factory=bytearray)
    open_ids: set[int] = attrs.field(factory=set)
    """Streams the runtime has not finished (FIN or reset) of error, stdout and stderr."""
    stdin_closed: bool = False

    async def open(self, kind: str) -> None:
        """One stream of ``kind``, awaiting its SYN_REPLY (what arrives first is served)."""
        stream_id, self.next_id = self.next_id, self.next_id + 2
        self.ids[kind] = stream_id
        if kind in ("error", "stdout", "stderr"):
            self.open_ids.add(stream_id)
        await self.conn.syn_stream(stream_id, {"streamtype": kind})

    async def close_stdin(self) -> None:
        if "stdin" in self.ids and not self.stdin_closed:
            self.stdin_closed = True
            await self.conn.data(self.ids["stdin"], b"", fin=True)


def _stream_kinds(options: RemoteOptions, protocol: str) -> list[str]:
    """client-go's streams for the protocol, in its order."""
    kinds = ["error"]
    kinds += ["stdin"] if options.stdin else []
    kinds += ["stdout"] if options.stdout else []
    kinds += ["stderr"] if options.stderr and not options.tty else []
    if options.tty and protocol in (V5, "v4.channel.k8s.io", "v3.channel.k8s.io"):
        kinds.append("resize")
    return kinds


def spdy_request_head(url: StreamingURL) -> bytes:
    """client-go's SPDY upgrade: POST, no body, every protocol it knows offered."""
    host = url.host if ":" not in url.host else f"[{url.host}]"
    if url.port not in (80, 443):
        host += f":{url.port}"
    lines = [
        b"POST " + url.target + b" HTTP/1.1",
        b"Host: " + host.encode(),
        b"User-Agent: kubelet",
        b"Content-Length: 0",
        b"Connection: Upgrade",
        b"Upgrade: " + spdy.UPGRADE.encode(),
    ]
    lines += [b"X-Stream-Protocol-Version: " + p.encode() for p in SPDY_PROTOCOLS]
    return b"\r\n".join(lines) + b"\r\n\r\n"


class _Refused(Exception):
    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__(status.get("message", ""))
        self.status = status


async def _refusal(stream: trio.abc.Stream, received: bytes, head_length: int) -> dict[str, Any]:
    """The status for a runtime's answer that is not an SPDY ``101``."""
    body = received[head_length:]
    with trio.move_on_after(ERROR_ECHO_TIMEOUT), contextlib.suppress(*BROKEN):
        while len(body) < MAX_ERROR_BODY and (chunk := await stream.receive_some(spdy.RECEIVE)):
            body += chunk
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        return decoded
    text = body.decode(errors="replace").strip()
    return internal_error(f"unable to upgrade connection: {text}")


async def connect_runtime(
    url: str, options: RemoteOptions, connect_timeout: float
) -> tuple[trio.abc.Stream, _Runtime]:
    """Dial, upgrade to SPDY and open the streams; ``_Refused`` with the client's status."""
    try:
        target = StreamingURL.parse(url)
        with trio.fail_after(connect_timeout):
            stream = await dial(target, None)
    except (ProxyError, trio.TooSlowError) as exc:
        raise _Refused(internal_error(str(exc) or "error dialing backend: timed out")) from None
    try:
        with trio.fail_after(connect_timeout):
            await stream.send_all(spdy_request_head(target))
            head, received = await _read_head(stream)
        upgrade = (head.header(b"upgrade") or b"").lower()
        connection = (head.header(b"connection") or b"").lower()
        if head.status != 101 or b"upgrade" not in connection or b"spdy/3.1" not in upgrade:
            raise _Refused(await _refusal(stream, received, head.length))
        protocol = (head.header(b"x-stream-protocol-version") or b"").decode("latin-1")
        runtime = _Runtime(spdy.SpdyConnection(stream, received[head.length :]), protocol)
        with trio.fail_after(STREAM_CREATION_TIMEOUT):
            await _open_streams(runtime, options)
        return stream, runtime
    except BaseException as exc:
        await trio.aclose_forcefully(stream)
        if isinstance(exc, (ProxyError, trio.TooSlowError, spdy.SpdyError, *BROKEN)):
            text = str(exc) or "timed out waiting for the runtime"
            raise _Refused(internal_error(text)) from None
        raise


async def _open_streams(runtime: _Runtime, options: RemoteOptions) -> None:
    async with contextlib.aclosing(runtime.conn.frames()) as frames:
        await _open_each(runtime, options, frames)


async def _open_each(
    runtime: _Runtime, options: RemoteOptions, frames: AsyncGenerator[spdy.Frame]
) -> None:
    for kind in _stream_kinds(options, runtime.protocol):
        await runtime.open(kind)
        wanted = runtime.ids[kind]
        while True:
            frame = await anext(frames, None)
            if frame is None:
                raise ProxyError("the runtime closed the connection while streams were created")
            if frame.control and frame.kind == spdy.SYN_REPLY and frame.stream_id() == wanted:
                runtime.conn.reply_headers(frame)
                break
            if frame.control and frame.kind == spdy.RST_STREAM and frame.stream_id() == wanted:
                raise ProxyError(f"the runtime reset the {kind} stream")
            if frame.control and frame.kind == spdy.PING and frame.word(0) % 2 == 0:
                await runtime.conn.control(spdy.PING, frame.payload)


# -- the session ----------------------------------------------------------------------------


async def translate_remote_command(
    request: UpgradeRequest,
    takeover: Takeover | None,
    url: str,
    options: RemoteOptions,
    *,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    connect_timeout: float = CONNECT_TIMEOUT,
) -> Response | None:
    """Serve one v5 exec or attach on the taken-over connection, SPDY to ``url``.

    Returns the response to send when the handshake is refused, None when the WebSocket ran
    (the server closes the connection once we return).
    """
    if takeover is None or not is_upgrade_request(request.headers):
        return Response(500, b"Upgrade request required\n")
    refusal = handshake_refusal(request)
    if refusal is not None:
        return refusal
    client, buffered = await takeover()
    try:
        await client.send_all(accept_head(request))
        ws = WebSocket(client, buffered)
        first = STDOUT if options.stdout else STDERR if options.stderr else ERROR
        await ws.send(first)
    except BROKEN:
        return None
    session = _Session(ws, options, idle_timeout)
    await session.run(url, connect_timeout)
    log.v(4).info("translated stream ended", reason=session.reason)
    return None


class _Session:
    def __init__(self, ws: WebSocket, options: RemoteOptions, idle_timeout: float) -> None:
        self.ws = ws
        self.options = options
        self.idle = idle_timeout if idle_timeout > 0 else math.inf
        self.scope = trio.CancelScope(deadline=trio.current_time() + self.idle)
        self.status: dict[str, Any] | None = None
        self.reason = ""
        self._resize = ResizeDecoder()
        self._resizing = True
        self._close = bytearray()

    def _touch(self) -> None:
        self.scope.deadline = trio.current_time() + self.idle

    async def run(self, url: str, connect_timeout: float) -> None:
        with self.scope:
            try:
                stream, runtime = await connect_runtime(url, self.options, connect_timeout)
            except _Refused as exc:
                log.info("error while proxying request", error=exc.status.get("message"))
                self.status = exc.status
            else:
                try:
                    await self._relay(runtime)
                finally:
                    await trio.aclose_forcefully(stream)
        if self.scope.cancelled_caught and self.status is None:
            self.reason = "idle"
            log.v(3).info("streaming connection idle; closed it", idle_timeout=f"{self.idle:g}s")
        if self.status is not None:
            await self._finish(self.status)

    async def _relay(self, runtime: _Runtime) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._from_runtime, runtime, nursery.cancel_scope)
            nursery.start_soon(self._from_client, runtime, nursery.cancel_scope)
            nursery.start_soon(self._ping, runtime)

    async def _ping(self, runtime: _Runtime) -> None:
        ping_id = 1
        with contextlib.suppress(*BROKEN):
            while True:
                await trio.sleep(PING_PERIOD)
                await runtime.conn.ping(ping_id)
                ping_id = (ping_id + 2) & 0x7FFFFFFF

    async def _from_runtime(self, runtime: _Runtime, done: trio.CancelScope) -> None:
        """Frames from the runtime until its streams are finished; then the status."""
        try:
            async with contextlib.aclosing(runtime.conn.frames()) as frames:
                async for frame in frames:
                    await self._runtime_frame(runtime, frame)
                    if not runtime.open_ids:
                        break
        except (*BROKEN, spdy.SpdyError) as exc:
            self.reason = f"runtime: {exc!r}"
            done.cancel()
            return
        except _ClientGone as exc:
            self.reason = f"client: {exc}"
            done.cancel()
            return
        self.status = status_from_error_stream(runtime.protocol, bytes(runtime.error))
        self.reason = "exited"
        done.cancel()

    async def _runtime_frame(self, runtime: _Runtime, frame: spdy.Frame) -> None:
        conn = runtime.conn
        if not frame.control:
            stream_id = frame.kind
            if frame.payload:
                self._touch()
                if stream_id == runtime.ids.get("error"):
                    room = MAX_ERROR_STREAM - len(runtime.error)
                    runtime.error += frame.payload[: max(room, 0)]
                else:
                    channel = STDOUT if stream_id == runtime.ids.get("stdout") else STDERR
                    if stream_id in (runtime.ids.get("stdout"), runtime.ids.get("stderr")):
                        try:
                            await self.ws.send(channel, frame.payload)
                        except BROKEN as exc:
                            raise _ClientGone(repr(exc)) from None
                        self._touch()
            if frame.fin:
                runtime.open_ids.discard(stream_id)
        elif frame.kind == spdy.RST_STREAM:
            runtime.open_ids.discard(frame.stream_id())
        elif frame.kind == spdy.PING and frame.word(0) % 2 == 0:
            await conn.control(spdy.PING, frame.payload)  # the runtime's own ping: echoed
        elif frame.kind == spdy.SYN_STREAM:
            conn.syn_headers(frame)  # keeps the header stream in step
            await conn.reset(frame.stream_id(), spdy.PROTOCOL_ERROR)
        elif frame.kind in (spdy.SYN_REPLY, spdy.HEADERS):
            conn.headers(frame.payload[4:])

    async def _from_client(self, runtime: _Runtime, done: trio.CancelScope) -> None:
        """The client's messages to the runtime until the client closes or goes."""
        channel: int | None = None
        try:
            async with contextlib.aclosing(self.ws.frames()) as frames:
                async for _, payload, finished in frames:
                    channel = await self._client_frame(runtime, channel, payload, finished)
            self.reason = "client closed"
        except _ClientGone as exc:
            self.reason = f"client: {exc}"
        except (*BROKEN, spdy.SpdyError) as exc:
            self.reason = f"runtime: {exc!r}"
        done.cancel()

    async def _client_frame(
        self, runtime: _Runtime, channel: int | None, payload: bytes, finished: bool
    ) -> int | None:
        """One frame (or part) of a client message; the channel of the message it continues."""
        data = payload
        if channel is None and data:
            channel, data = data[0], data[1:]
        if channel == CLOSE_SIGNAL:
            self._close += data
            if len(self._close) > 1 and not finished:
                raise _ClientGone("a close signal longer than one channel byte")
        elif channel is not None and data:
            await self._to_runtime(runtime, channel, data)
        if finished:
            if channel == CLOSE_SIGNAL:
                await self._close_signal(runtime, bytes(self._close))
            channel, self._close = None, bytearray()
        return channel

    async def _close_signal(self, runtime: _Runtime, data: bytes) -> None:
        if len(data) != 1 or data[0] > RESIZE:
            raise _ClientGone(f"bad close signal {data!r}")
        if data[0] == STDIN:
            await runtime.close_stdin()
        elif data[0] == RESIZE:
            self._resizing = False

    async def _to_runtime(self, runtime: _Runtime, channel: int, data: bytes) -> None:
        self._touch()
        if channel == STDIN and "stdin" in runtime.ids and not runtime.stdin_closed:
            await runtime.conn.data(runtime.ids["stdin"], data)
        elif channel == RESIZE and "resize" in runtime.ids and self._resizing:
            for width, height in self._sizes(data):
                line = json.dumps({"Width": width, "Height": height}, separators=(",", ":"))
                await runtime.conn.data(runtime.ids["resize"], line.encode() + b"\n")
        self._touch()

    def _sizes(self, data: bytes) -> list[tuple[int, int]]:
        """Terminal sizes in the resize channel's JSON stream (a bad one ends resizing)."""
        sizes = self._resize.feed(data)
        self._resizing = not self._resize.ended
        return sizes

    async def _finish(self, status: dict[str, Any]) -> None:
        """The status on channel 3, our close frame, then the client's close (bounded)."""
        with contextlib.suppress(*BROKEN):
            await self.ws.send(ERROR, go_json(status).encode())
        await self.ws.close(1000)
        if self.ws.closed:
            return
        with trio.move_on_after(FINISH_TIMEOUT), contextlib.suppress(_ClientGone):
            async with contextlib.aclosing(self.ws.frames()) as frames:
                async for _ in frames:
                    pass  # input after the end is discarded
