"""Port-forward over SPDY/3.1 for the fake streaming server: what ``kubectl port-forward`` needs.

kubectl 1.37 offers a WebSocket tunnel first and, refused, upgrades with SPDY
(``Upgrade: SPDY/3.1``, ``X-Stream-Protocol-Version: portforward.k8s.io``), as it does
against containerd 1.6. Facts (the SPDY/3 draft; moby/spdystream; cri-streaming's
``portforward/httpstream.go``):

* frames: a control frame is ``0x80 0x03``, a 16-bit type, 8-bit flags and a 24-bit length;
  a data frame a 31-bit stream id, flags (FIN = 1) and a 24-bit length. Header blocks are
  zlib streams (one per direction for the whole connection, with the SPDY/3 dictionary,
  sync-flushed): a 32-bit count, then 32-bit-length-prefixed lower-case names and values;
* per forwarded connection kubectl opens two streams with headers ``streamtype`` (``error``
  or ``data``), ``port`` and ``requestid``; each is answered with a SYN_REPLY; what comes on
  the data stream goes to the pod's port and back; a failure is text on the error stream;
* PINGs are echoed; no flow control (spdystream has none); RST_STREAM ends a stream.

This is a test double: it trusts its peer (kubectl through the kubelet) and handles only
what port-forward uses.
"""

from __future__ import annotations

import contextlib
import struct
import zlib
from collections.abc import AsyncIterator, Callable

import attrs
import trio

BROKEN = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
PROTOCOL = "portforward.k8s.io"
UPGRADE = "SPDY/3.1"

SYN_STREAM, SYN_REPLY, RST_STREAM, PING, GOAWAY = 1, 2, 3, 6, 7
FLAG_FIN = 0x01
CHUNK = 32 << 10

_WORDS = (
    b"options head post put delete trace accept accept-charset accept-encoding "
    b"accept-language accept-ranges age allow authorization cache-control connection "
    b"content-base content-encoding content-language content-length content-location "
    b"content-md5 content-range content-type date etag expect expires from host "
    b"if-match if-modified-since if-none-match if-range if-unmodified-since "
    b"last-modified location max-forwards pragma proxy-authenticate "
    b"proxy-authorization range referer retry-after server te trailer "
    b"transfer-encoding upgrade user-agent vary via warning www-authenticate method get "
    b"status 200_OK version HTTP/1.1 url public set-cookie keep-alive origin"
).split()
DICTIONARY = b"".join(
    struct.pack(">I", len(word)) + word.replace(b"_", b" ") for word in _WORDS
) + (
    b"100101201202205206300302303304305306307402405406407408409410411412413414415416417"
    b"502504505203 Non-Authoritative Information204 No Content301 Moved Permanently"
    b"400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error"
    b"501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct "
    b"Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,"
    b"image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,"
    b"publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
"""The SPDY/3 header compression dictionary (1423 bytes)."""


@attrs.frozen
class Frame:
    control: bool
    kind: int
    """Control frame type; for a data frame, its stream id."""
    flags: int
    payload: bytes


def parse_headers(block: bytes) -> dict[str, str]:
    """A decompressed header block: names and values (NUL-joined values kept as they are)."""
    (count,) = struct.unpack_from(">I", block)
    at, out = 4, {}
    for _ in range(count):
        (n,) = struct.unpack_from(">I", block, at)
        name = block[at + 4 : at + 4 + n].decode()
        at += 4 + n
        (m,) = struct.unpack_from(">I", block, at)
        out[name] = block[at + 4 : at + 4 + m].decode()
        at += 4 + m
    return out


def encode_headers(headers: dict[str, str]) -> bytes:
    out = struct.pack(">I", len(headers))
    for name, value in headers.items():
        out += struct.pack(">I", len(name)) + name.encode()
        out += struct.pack(">I", len(value)) + value.encode()
    return out


class SpdyConnection:
    """Frames in and out of one upgraded connection (the server side)."""

    def __init__(self, stream: trio.abc.Stream, leftover: bytes) -> None:
        self.stream = stream
        self._buffer = bytearray(leftover)
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zdict=DICTIONARY)
        self._lock = trio.Lock()

    async def frames(self) -> AsyncIterator[Frame]:
        while True:
            while len(self._buffer) >= 8:
                head = bytes(self._buffer[:8])
                length = int.from_bytes(head[5:8], "big")
                if len(self._buffer) < 8 + length:
                    break
                payload = bytes(self._buffer[8 : 8 + length])
                del self._buffer[: 8 + length]
                if head[0] & 0x80:
                    yield Frame(True, int.from_bytes(head[2:4], "big"), head[4], payload)
                else:
                    yield Frame(False, int.from_bytes(head[:4], "big"), head[4], payload)
            data = await self.stream.receive_some(1 << 16)
            if not data:
                return
            self._buffer += data

    def headers(self, block: bytes) -> dict[str, str]:
        return parse_headers(self._inflate.decompress(block))

    async def _send(self, data: bytes) -> None:
        async with self._lock:
            await self.stream.send_all(data)

    async def control(self, kind: int, payload: bytes, flags: int = 0) -> None:
        head = struct.pack(">HHI", 0x8003, kind, (flags << 24) | len(payload))
        await self._send(head + payload)

    async def reply(self, stream_id: int) -> None:
        block = self._deflate.compress(encode_headers({}))
        block += self._deflate.flush(zlib.Z_SYNC_FLUSH)
        await self.control(SYN_REPLY, struct.pack(">I", stream_id) + block)

    async def syn_stream(self, stream_id: int, headers: dict[str, str]) -> None:
        """Open a stream (what a client does): no associated stream, priority 0."""
        block = self._deflate.compress(encode_headers(headers))
        block += self._deflate.flush(zlib.Z_SYNC_FLUSH)
        await self.control(SYN_STREAM, struct.pack(">IIH", stream_id, 0, 0) + block)

    async def data(self, stream_id: int, data: bytes, fin: bool = False) -> None:
        flags = FLAG_FIN if fin else 0
        await self._send(struct.pack(">II", stream_id, (flags << 24) | len(data)) + data)


@attrs.define
class _Forward:
    port: int
    data: int = 0
    error: int = 0
    conn: trio.SocketStream | None = None
    pending: list[bytes] = attrs.field(factory=list)
    client_done: bool = False
    connected: trio.Event = attrs.field(factory=trio.Event)


async def serve_port_forward(
    stream: trio.abc.Stream,
    leftover: bytes,
    target: Callable[[int], tuple[str, int]],
    ports: list[int],
) -> None:
    """Serve SPDY port-forward streams on an upgraded connection until the client goes.

    ``target(port)`` says where the pod's port is; every port asked for is appended to
    ``ports``.
    """
    spdy = SpdyConnection(stream, leftover)
    forwards: dict[str, _Forward] = {}
    by_stream: dict[int, _Forward] = {}
    async with trio.open_nursery() as nursery:
        async for frame in spdy.frames():
            if frame.control and frame.kind == SYN_STREAM:
                (stream_id,) = struct.unpack_from(">I", frame.payload)
                stream_id &= 0x7FFFFFFF
                headers = spdy.headers(frame.payload[10:])
                await spdy.reply(stream_id)
                key = headers.get("requestid", "")
                port = int(headers.get("port", "0") or 0)
                forward = forwards.setdefault(key, _Forward(port))
                by_stream[stream_id] = forward
                if headers.get("streamtype") == "data":
                    forward.data = stream_id
                else:
                    forward.error = stream_id
                if forward.data and forward.error:
                    ports.append(port)
                    nursery.start_soon(_forward, spdy, forward, target)
            elif frame.control and frame.kind == PING:
                await spdy.control(PING, frame.payload)
            elif frame.control and frame.kind == RST_STREAM:
                (stream_id,) = struct.unpack_from(">I", frame.payload)
                gone = by_stream.get(stream_id & 0x7FFFFFFF)
                if gone is not None and gone.conn is not None:
                    await trio.aclose_forcefully(gone.conn)
            elif frame.control and frame.kind == GOAWAY:
                break
            elif not frame.control:
                await _to_pod(by_stream.get(frame.kind), frame)
        nursery.cancel_scope.cancel()


async def _to_pod(forward: _Forward | None, frame: Frame) -> None:
    if forward is None or frame.kind != forward.data:
        return  # the error stream's end (kubectl writes nothing there)
    if forward.conn is None:
        forward.pending.append(frame.payload)
    else:
        with contextlib.suppress(*BROKEN):
            await forward.conn.send_all(frame.payload)
    if frame.flags & FLAG_FIN:
        forward.client_done = True
        if forward.conn is not None:
            with contextlib.suppress(*BROKEN):
                await forward.conn.send_eof()


async def _forward(
    spdy: SpdyConnection, forward: _Forward, target: Callable[[int], tuple[str, int]]
) -> None:
    host, port = target(forward.port)
    try:
        conn = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        message = f"error forwarding port {forward.port} to pod: {exc}"
        with contextlib.suppress(*BROKEN):
            await spdy.data(forward.error, message.encode(), fin=True)
            await spdy.data(forward.data, b"", fin=True)
        return
    forward.conn = conn
    with contextlib.suppress(*BROKEN):
        for chunk in forward.pending:
            await conn.send_all(chunk)
        forward.pending.clear()
        if forward.client_done:
            await conn.send_eof()
    try:
        with contextlib.suppress(*BROKEN):
            while data := await conn.receive_some(CHUNK):
                await spdy.data(forward.data, data)
        with contextlib.suppress(*BROKEN):
            await spdy.data(forward.data, b"", fin=True)
            await spdy.data(forward.error, b"", fin=True)
    finally:
        await trio.aclose_forcefully(conn)
