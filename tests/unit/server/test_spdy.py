"""SPDY/3.1 framing: the header dictionary, header blocks, frames both ways."""

from __future__ import annotations

import hashlib
import struct
import zlib

from kubelet.server.spdy import DICTIONARY, encode_headers, parse_headers


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
