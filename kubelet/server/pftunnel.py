"""kubectl's WebSocket port-forward tunnel, unwrapped to SPDY for the runtime.

kubectl (client-go ``NewSPDYOverWebsocketDialer``) opens a WebSocket with the subprotocol
``SPDY/3.1+portforward.k8s.io`` and then speaks plain SPDY/3.1 inside it: every write is
one binary message, every binary message is read as bytes. A runtime's streaming server
(containerd 1.6) knows nothing of this and answers ``403``. What upstream's kubelet
1.36 does with the gate on (``getPortForward`` wraps its proxy in apiserver's
``TunnelingHandler``), and what we do:

* The request to the runtime is an SPDY upgrade: the WebSocket headers
  (``Sec-WebSocket-Protocol``/``-Key``/``-Version``, ``Upgrade``) are dropped, the method
  is ``POST``, ``Upgrade: SPDY/3.1``, and ``X-Stream-Protocol-Version`` carries each
  offered subprotocol without its ``SPDY/3.1+`` prefix (those ending ``.k8s.io`` only;
  none at all is ``400 unable to upgrade: no tunneling spdy protocols provided``).
* The runtime's ``101`` must say ``Connection: Upgrade`` and ``Upgrade: SPDY/3.1`` (else
  ``500 unable to upgrade: missing upgrade headers in response``); then the client gets
  its WebSocket ``101`` with ``SPDY/3.1+`` and the runtime's chosen protocol, when the
  client offered it. A runtime's refusal (``>= 400``) reaches the client byte for byte.
* After that the SPDY bytes are relayed, never parsed: each chunk from the runtime goes
  out as one binary message; the client's binary messages' payloads go to the runtime.
  A text message ends the stream (client-go: ``invalid message type received``); a
  ping is answered; a close is answered and ends the stream; when the stream ends the
  client gets a normal close (1000).

Ours: the WebSocket handshake (``GET``, ``Sec-WebSocket-Version: 13``, a 16-byte key) is
checked before the runtime is asked, with gorilla's answers (``405 Method Not Allowed``,
``400 Bad Request``), where upstream asks the runtime first and checks on its ``101``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import ssl
import struct

import trio
from wsproto.frame_protocol import CloseReason, FrameProtocol, Opcode, ParseFailed
from wsproto.utilities import generate_accept_token

from kubelet.logs import get_logger

from .asgi import Response, http_error
from .streaming import (
    CHUNK,
    ProxyError,
    Takeover,
    UpgradeRequest,
    is_upgrade_request,
    parse_response_head,
    proxy_upgrade,
    with_decrypted,
)
from .wire import BROKEN

log = get_logger(__name__)

TUNNEL_PREFIX = "SPDY/3.1+"
"""client-go's ``WebsocketsSPDYTunnelingPrefix``."""
KUBERNETES_SUFFIX = ".k8s.io"
NO_PROTOCOLS = "unable to upgrade: no tunneling spdy protocols provided"
MISSING_UPGRADE = "unable to upgrade: missing upgrade headers in response"
CLOSE_TIMEOUT = 1.0
"""How long the closing message may take once the stream is over."""

_DROPPED = {
    b"sec-websocket-protocol",
    b"sec-websocket-key",
    b"sec-websocket-version",
    b"upgrade",
    b"x-stream-protocol-version",
}


def websocket_protocols(request: UpgradeRequest) -> list[str]:
    """gorilla's ``Subprotocols``: every ``Sec-WebSocket-Protocol`` value split on commas."""
    return [
        part.strip()
        for value in request.values(b"sec-websocket-protocol")
        for part in value.decode("latin-1").split(",")
        if part.strip()
    ]


def is_tunnel_request(request: UpgradeRequest) -> bool:
    """wsstream's ``IsWebSocketRequestWithTunnelingProtocol``."""
    upgrade = request.values(b"upgrade")
    if not upgrade or upgrade[0].strip().lower() != b"websocket":
        return False
    if not is_upgrade_request(request.headers):
        return False
    return any(p.startswith(TUNNEL_PREFIX) for p in websocket_protocols(request))


def spdy_protocols(request: UpgradeRequest) -> list[str]:
    """The SPDY subprotocols the client tunnels: ``SPDY/3.1+…k8s.io`` without the prefix."""
    return [
        p.removeprefix(TUNNEL_PREFIX)
        for p in websocket_protocols(request)
        if p.startswith(TUNNEL_PREFIX) and p.endswith(KUBERNETES_SUFFIX)
    ]


def spdy_request(request: UpgradeRequest, protocols: list[str]) -> UpgradeRequest:
    """The client's request as an SPDY/3.1 upgrade for ``protocols`` (apiserver's
    ``createSPDYRequest``): WebSocket headers out, ``POST``, ``Upgrade: SPDY/3.1``."""
    headers = [(k, v) for k, v in request.headers if k.lower() not in _DROPPED]
    headers.append((b"upgrade", b"SPDY/3.1"))
    headers += [(b"x-stream-protocol-version", p.encode("latin-1")) for p in protocols]
    return UpgradeRequest("POST", tuple(headers), request.client_address)


def handshake_error(request: UpgradeRequest) -> Response | None:
    """gorilla's ``Upgrader`` checks on the client's handshake; None when it is sound."""
    if request.method != "GET":
        return _gorilla_error(405)
    versions = b",".join(request.values(b"sec-websocket-version")).split(b",")
    if b"13" not in [v.strip() for v in versions]:
        return _gorilla_error(400)
    key = request.values(b"sec-websocket-key")
    try:
        ok = bool(key) and len(base64.b64decode(key[0].strip(), validate=True)) == 16
    except (binascii.Error, ValueError):
        ok = False
    return None if ok else _gorilla_error(400)


def _gorilla_error(status: int) -> Response:
    text = {400: "Bad Request", 405: "Method Not Allowed"}[status]
    response = http_error(status, text)
    return Response(
        response.status, response.body, response.content_type,
        (*response.headers, ("Sec-Websocket-Version", "13")),
    )  # fmt: skip


def binary_frame(payload: bytes) -> bytes:
    """One unmasked, final binary frame (what a server sends)."""
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x82, size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x82, 126, size)
    else:
        head = struct.pack("!BBQ", 0x82, 127, size)
    return head + payload


def _raw_response(status: int, message: str) -> bytes:
    body = (message + "\n").encode()
    reason = {500: "Internal Server Error"}.get(status, "Error")
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"X-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        % (status, reason.encode(), len(body))
    ) + body


class TunnelStream(trio.abc.Stream):
    """The client's connection as the runtime's SPDY peer sees it.

    Until the runtime's response head has been written through it, writes are held and
    parsed (apiserver's ``headerInterceptingConn``); a ``101`` then becomes the client's
    WebSocket ``101`` and every later write one binary message; any other answer goes to
    the client as it came.
    """

    def __init__(self, raw: trio.abc.Stream, buffered: bytes, request: UpgradeRequest) -> None:
        self.raw = raw
        self.request = request
        self.mode = "head"
        self.closed = False
        self._head = b""
        self._frames = FrameProtocol(client=False, extensions=[])
        self._frames.receive_bytes(buffered)
        self._send_lock = trio.StrictFIFOLock()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.mode == "ws":
            async with self._send_lock:
                await self.raw.send_all(binary_frame(bytes(data)))
        elif self.mode == "raw":
            await self.raw.send_all(data)
        else:
            await self._intercept(bytes(data))

    async def _intercept(self, data: bytes) -> None:
        self._head += data
        try:
            head = parse_response_head(self._head)
        except ProxyError as exc:
            self.mode = "raw"
            await self.raw.send_all(_raw_response(500, str(exc)))
            raise trio.BrokenResourceError(str(exc)) from None
        if head is None:
            return
        everything, self._head = self._head, b""
        body = everything[head.length :]
        if head.status != 101:
            self.mode = "raw"
            await self.raw.send_all(everything)
            return
        connection = (head.header(b"connection") or b"").lower()
        upgrade = (head.header(b"upgrade") or b"").lower()
        if b"upgrade" not in connection or b"spdy/3.1" not in upgrade:
            self.mode = "raw"
            log.error("unable to upgrade: missing upgrade headers in response")
            await self.raw.send_all(_raw_response(500, MISSING_UPGRADE))
            raise trio.BrokenResourceError(MISSING_UPGRADE)
        chosen = (head.header(b"x-stream-protocol-version") or b"").strip().decode("latin-1")
        await self.raw.send_all(self._accept(chosen))
        self.mode = "ws"
        if body:
            await self.send_all(body)

    def _accept(self, chosen: str) -> bytes:
        key = self.request.values(b"sec-websocket-key")[0].strip()
        lines = [
            b"HTTP/1.1 101 Switching Protocols",
            b"Upgrade: websocket",
            b"Connection: Upgrade",
            b"Sec-WebSocket-Accept: " + generate_accept_token(key),
        ]
        protocol = TUNNEL_PREFIX + chosen
        if chosen and protocol in websocket_protocols(self.request):
            lines.append(b"Sec-WebSocket-Protocol: " + protocol.encode("latin-1"))
        return b"\r\n".join(lines) + b"\r\n\r\n"

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """The next binary payload bytes; b"" once the client closed."""
        if self.mode != "ws" or self.closed:
            return b""
        while True:
            try:
                for frame in self._frames.received_frames():
                    data = await self._handle(frame.opcode, frame.payload)
                    if data is not None:
                        return data
            except ParseFailed as exc:
                await self._close(exc.code, str(exc))
                raise trio.BrokenResourceError(f"websocket: {exc}") from None
            chunk = await self.raw.receive_some(CHUNK)
            if not chunk:
                self.closed = True
                return b""
            self._frames.receive_bytes(with_decrypted(self.raw, chunk, CHUNK))

    async def _handle(self, opcode: Opcode, payload: object) -> bytes | None:
        if opcode in (Opcode.BINARY, Opcode.CONTINUATION):
            assert isinstance(payload, bytes)
            return payload or None
        if opcode == Opcode.PING:
            assert isinstance(payload, bytes)
            async with self._send_lock:
                await self.raw.send_all(self._frames.pong(payload))
            return None
        if opcode == Opcode.CLOSE:
            assert isinstance(payload, tuple)
            await self._close(payload[0], "")
            return b""
        if opcode == Opcode.TEXT:
            await self._close(CloseReason.UNSUPPORTED_DATA, "invalid message type received")
            raise trio.BrokenResourceError("invalid message type received")
        return None  # a pong

    async def _close(self, code: int, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(*BROKEN), trio.move_on_after(CLOSE_TIMEOUT):
            async with self._send_lock:
                await self.raw.send_all(self._frames.close(code, reason or None))

    async def finish(self) -> None:
        """The stream is over: a normal close for a client that still has its WebSocket."""
        if self.mode == "ws":
            await self._close(CloseReason.NORMAL_CLOSURE, "")

    async def wait_send_all_might_not_block(self) -> None:
        await self.raw.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.finish()
        await self.raw.aclose()


def tunnel_takeover(
    takeover: Takeover | None, request: UpgradeRequest
) -> tuple[Takeover | None, list[TunnelStream]]:
    """``takeover`` giving a ``TunnelStream`` over the client's connection, and where the
    stream will be once taken (to close its WebSocket at the end)."""
    if takeover is None:
        return None, []
    taken: list[TunnelStream] = []

    async def take() -> tuple[trio.abc.Stream, bytes]:
        assert takeover is not None
        raw, buffered = await takeover()
        stream = TunnelStream(raw, buffered, request)
        taken.append(stream)
        return stream, b""

    return take, taken


async def proxy_tunnel(
    request: UpgradeRequest,
    takeover: Takeover | None,
    url: str,
    *,
    idle_timeout: float,
    ssl_context: ssl.SSLContext | None = None,
) -> Response | None:
    """Serve kubectl's tunnel: the runtime gets SPDY, the client keeps its WebSocket.

    Returns the response to send when the connection was not taken over, as
    ``proxy_upgrade`` does.
    """
    protocols = spdy_protocols(request)
    if not protocols:
        return http_error(400, NO_PROTOCOLS)
    refused = handshake_error(request)
    if refused is not None:
        return refused
    take, taken = tunnel_takeover(takeover, request)
    try:
        return await proxy_upgrade(
            spdy_request(request, protocols), take, url,
            idle_timeout=idle_timeout, ssl_context=ssl_context,
        )  # fmt: skip
    finally:
        for stream in taken:
            await stream.finish()
