"""SPDY/3.1 framing: the header dictionary, header blocks, frames both ways."""

from __future__ import annotations

import contextlib
import hashlib
import struct
import zlib

import pytest
import trio.testing

from kubelet.server import spdy
from kubelet.server.spdy import (
    DICTIONARY,
    GOAWAY,
    PING,
    SYN_REPLY,
    SYN_STREAM,
    SpdyConnection,
    SpdyError,
    encode_headers,
    parse_headers,
)


def test_the_dictionary_is_the_spdy3_one() -> None:
    assert len(DICTIONARY) == 1423
    assert DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert DICTIONARY.endswith(b"utf-8charset=iso-8859-1,utf-,*,enq=0.")
    digest = "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"
    assert hashlib.sha256(DICTIONARY).hexdigest() == digest


def test_header_blocks_round_trip_through_the_shared_zlib_streams() -> None:
    deflate = zlib.compressobj(zdict=DICTIONARY)
    inflate = zlib.decompressobj(zdict=DICTIONARY)
    for headers in (
        {"streamtype": "error", "port": "8080", "requestid": "0"},
        {"streamtype": "data", "port": "8080", "requestid": "0"},
        {},
    ):
        block = deflate.compress(encode_headers(headers)) + deflate.flush(zlib.Z_SYNC_FLUSH)
        assert parse_headers(inflate.decompress(block)) == headers
    assert encode_headers({"a": "bc"}) == struct.pack(">I", 1) + b"\0\0\0\x01a\0\0\0\x02bc"


async def test_frames_round_trip_between_two_ends() -> None:
    left, right = trio.testing.memory_stream_pair()
    client, server = SpdyConnection(left), SpdyConnection(right)
    await client.syn_stream(1, {"streamType": "error"})
    await client.syn_stream(3, {"streamtype": "stdin"})
    await client.data(3, b"x" * 70_000, fin=True)  # split in frames of 32 KiB
    await client.ping(1)
    await client.goaway()
    await left.send_eof()
    frames = [frame async for frame in server.frames()]
    assert [(f.control, f.kind) for f in frames[:2]] == [(True, SYN_STREAM), (True, SYN_STREAM)]
    assert server.syn_headers(frames[0]) == {"streamtype": "error"}
    assert server.syn_headers(frames[1]) == {"streamtype": "stdin"}
    data = [f for f in frames if not f.control]
    assert [len(f.payload) for f in data] == [32768, 32768, 4464]
    assert [f.fin for f in data] == [False, False, True]
    assert all(f.stream_id() == 3 for f in data)
    assert [(f.kind, f.word(0)) for f in frames[-2:]] == [(PING, 1), (GOAWAY, 0)]
    await server.reply(1)
    async with contextlib.aclosing(client.frames()) as replies:
        reply = await anext(replies)
    assert (reply.kind, reply.stream_id(), client.reply_headers(reply)) == (SYN_REPLY, 1, {})


def bomb(deflate: zlib._Compress, size: int) -> bytes:
    """A header block of one ``size``-byte value: a few KiB compressed."""
    block = deflate.compress(encode_headers({"streamtype": "\0" * size}))
    return block + deflate.flush(zlib.Z_SYNC_FLUSH)


def test_a_header_block_inflating_past_the_bound_is_refused() -> None:
    """The peer's header blocks inflate into at most MAX_HEADER_BLOCK bytes: 8 MiB from a
    few KiB of a SYN_REPLY is a broken connection, not 8 MiB of our memory."""
    left, _ = trio.testing.memory_stream_pair()
    conn = SpdyConnection(left)
    deflate = zlib.compressobj(zdict=DICTIONARY)
    small = deflate.compress(encode_headers({"streamtype": "error"}))
    assert conn.headers(small + deflate.flush(zlib.Z_SYNC_FLUSH)) == {"streamtype": "error"}
    block = bomb(deflate, 8 << 20)
    assert len(block) < 16 << 10
    with pytest.raises(SpdyError, match="header block larger than"):
        conn.headers(block)
    fresh = SpdyConnection(left)
    near = spdy.MAX_HEADER_BLOCK - 100  # what the bound leaves: far more than any real block
    assert len(fresh.headers(bomb(zlib.compressobj(zdict=DICTIONARY), near))["streamtype"]) == near
