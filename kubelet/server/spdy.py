"""SPDY/3.1 frames on one connection, either end: what Kubernetes streaming speaks.

The kubelet speaks SPDY to a runtime's streaming server when it translates a WebSocket
``v5.channel.k8s.io`` exec or attach (``wstranslate``); the fake streaming server serves it
(``kubelet.testing.fakespdy``). No maintained SPDY library exists on PyPI, so this is ours.
Facts (the SPDY/3 draft; moby/spdystream, which both containerd and client-go use):

* A control frame is ``0x80 0x03``, a 16-bit type, 8-bit flags and a 24-bit length; a data
  frame a 31-bit stream id, flags (FIN = 1) and a 24-bit length.
* Header blocks (SYN_STREAM, SYN_REPLY) are one zlib stream per direction for the whole
  connection, primed with the SPDY/3 dictionary and sync-flushed after each block: a 32-bit
  count, then 32-bit-length-prefixed lower-case names and values (several values of one
  name joined by NUL). What a block inflates into is bounded (``MAX_HEADER_BLOCK``).
* The client's streams have odd ids, the server's even; SYN_STREAM carries the stream id,
  the associated id, a priority byte and a slot byte before its headers.
* PING carries a 32-bit id; a peer echoes the pings of the other parity. GOAWAY carries the
  last stream id and a status; RST_STREAM a stream id and a status.
* spdystream does no flow control (WINDOW_UPDATE and SETTINGS are read and ignored), so
  neither do we: backpressure is TCP's.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import AsyncGenerator, Mapping

import attrs
import trio

SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = (
    1, 2, 3, 4, 6, 7, 8, 9,
)  # fmt: skip
FLAG_FIN = 0x01
UPGRADE = "SPDY/3.1"
PROTOCOL_HEADER = "X-Stream-Protocol-Version"
RECEIVE = 1 << 16
"""Bytes read from the connection at once."""
MAX_DATA = 32 << 10
"""A data frame's payload at most, when we write one."""
MAX_FRAME = (1 << 24) - 1
"""The 24-bit length field's limit."""
MAX_HEADER_BLOCK = 2 << 20
"""A header block inflates into at most this many bytes (a real one: a few dozen). The
framing bounds a frame, not what its compressed block expands to; past this the
connection is refused (spdystream's framer bounds header sizes too)."""

# RST_STREAM status codes (SPDY/3 2.6.3)
PROTOCOL_ERROR, CANCEL = 1, 5

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


class SpdyError(Exception):
    """The peer broke the framing (a header block that does not parse, a bad frame)."""


@attrs.frozen
class Frame:
    control: bool
    kind: int
    """Control frame type; for a data frame, its stream id."""
    flags: int
    payload: bytes

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)

    def stream_id(self) -> int:
        """The stream a SYN_STREAM, SYN_REPLY or RST_STREAM names (a data frame's ``kind``)."""
        if not self.control:
            return self.kind
        if len(self.payload) < 4:
            raise SpdyError(f"control frame {self.kind} too short")
        return int(struct.unpack_from(">I", self.payload)[0]) & 0x7FFFFFFF

    def word(self, at: int) -> int:
        """A 32-bit field of the payload (a PING's id, a status)."""
        if len(self.payload) < at + 4:
            raise SpdyError(f"control frame {self.kind} too short")
        return int(struct.unpack_from(">I", self.payload, at)[0])


def parse_headers(block: bytes) -> dict[str, str]:
    """A decompressed header block: names and values (NUL-joined values kept as they are)."""
    try:
        (count,) = struct.unpack_from(">I", block)
        at, out = 4, {}
        for _ in range(count):
            (n,) = struct.unpack_from(">I", block, at)
            name = block[at + 4 : at + 4 + n].decode()
            at += 4 + n
            (m,) = struct.unpack_from(">I", block, at)
            out[name] = block[at + 4 : at + 4 + m].decode()
            at += 4 + m
    except (struct.error, UnicodeDecodeError) as exc:
        raise SpdyError(f"bad header block: {exc}") from None
    return out


def encode_headers(headers: Mapping[str, str]) -> bytes:
    """A header block before compression (names lower-cased, as the framing requires)."""
    out = struct.pack(">I", len(headers))
    for name, value in headers.items():
        raw = name.lower().encode()
        out += struct.pack(">I", len(raw)) + raw
        out += struct.pack(">I", len(value.encode())) + value.encode()
    return out


def control_frame(kind: int, payload: bytes, flags: int = 0) -> bytes:
    return struct.pack(">HHI", 0x8003, kind, (flags << 24) | len(payload)) + payload


def data_frame(stream_id: int, data: bytes, fin: bool = False) -> bytes:
    flags = FLAG_FIN if fin else 0
    return struct.pack(">II", stream_id & 0x7FFFFFFF, (flags << 24) | len(data)) + data


class SpdyConnection:
    """Frames in and out of one upgraded connection.

    ``frames()`` is read by one task; any task may send (writes are serialized, and header
    blocks are compressed under the same lock, so the shared zlib stream stays in order).
    """

    def __init__(self, stream: trio.abc.Stream, leftover: bytes = b"") -> None:
        self.stream = stream
        self._buffer = bytearray(leftover)
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zdict=DICTIONARY)
        self._lock = trio.Lock()

    async def frames(self) -> AsyncGenerator[Frame]:
        """Every frame until the peer closes the connection."""
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
            data = await self.stream.receive_some(RECEIVE)
            if not data:
                return
            self._buffer += data

    def headers(self, block: bytes) -> dict[str, str]:
        """The headers of a SYN_STREAM's or SYN_REPLY's compressed block; ``SpdyError``
        past :data:`MAX_HEADER_BLOCK` (the shared zlib stream is then out of step: the
        connection cannot go on)."""
        try:
            raw = self._inflate.decompress(block, MAX_HEADER_BLOCK + 1)
        except zlib.error as exc:
            raise SpdyError(f"bad header block: {exc}") from None
        if len(raw) > MAX_HEADER_BLOCK:
            raise SpdyError(f"header block larger than {MAX_HEADER_BLOCK} bytes")
        return parse_headers(raw)

    def syn_headers(self, frame: Frame) -> dict[str, str]:
        """A SYN_STREAM's headers (after id, associated id, priority and slot)."""
        return self.headers(frame.payload[10:])

    def reply_headers(self, frame: Frame) -> dict[str, str]:
        """A SYN_REPLY's headers (after the stream id)."""
        return self.headers(frame.payload[4:])

    async def _send(self, data: bytes) -> None:
        async with self._lock:
            await self.stream.send_all(data)

    async def _send_headers(self, kind: int, prefix: bytes, headers: Mapping[str, str]) -> None:
        async with self._lock:
            block = self._deflate.compress(encode_headers(headers))
            block += self._deflate.flush(zlib.Z_SYNC_FLUSH)
            await self.stream.send_all(control_frame(kind, prefix + block))

    async def control(self, kind: int, payload: bytes, flags: int = 0) -> None:
        await self._send(control_frame(kind, payload, flags))

    async def syn_stream(self, stream_id: int, headers: Mapping[str, str]) -> None:
        """Open stream ``stream_id`` (priority 0, no FIN: both ends may send)."""
        await self._send_headers(SYN_STREAM, struct.pack(">IIBB", stream_id, 0, 0, 0), headers)

    async def reply(self, stream_id: int, headers: Mapping[str, str] | None = None) -> None:
        await self._send_headers(SYN_REPLY, struct.pack(">I", stream_id), headers or {})

    async def reset(self, stream_id: int, status: int = CANCEL) -> None:
        await self.control(RST_STREAM, struct.pack(">II", stream_id, status))

    async def ping(self, ping_id: int) -> None:
        await self.control(PING, struct.pack(">I", ping_id))

    async def goaway(self, last_stream_id: int = 0, status: int = 0) -> None:
        await self.control(GOAWAY, struct.pack(">II", last_stream_id, status))

    async def data(self, stream_id: int, data: bytes, fin: bool = False) -> None:
        """``data`` on ``stream_id`` (in frames of at most ``MAX_DATA``), FIN on the last."""
        view = memoryview(data)
        while len(view) > MAX_DATA:
            await self._send(data_frame(stream_id, bytes(view[:MAX_DATA])))
            view = view[MAX_DATA:]
        await self._send(data_frame(stream_id, bytes(view), fin))
