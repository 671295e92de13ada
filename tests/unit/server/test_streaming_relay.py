"""The relay's copy loop over TLS: what the client sent at once goes on at once.

Real ``trio.SSLStream`` pairs over in-memory streams (trio.testing), so the TLS records
are real and nothing touches the network.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet.server.certs import self_signed_pair
from kubelet.server.streaming import relay, with_decrypted

RECORD = 16384
"""The most plaintext one TLS record carries (what ``SSLStream.receive_some`` returns)."""


@pytest.fixture
def contexts(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    cert, key = self_signed_pair("kubelet.test")
    (tmp_path / "c").write_bytes(cert)
    (tmp_path / "k").write_bytes(key)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp_path / "c", tmp_path / "k")
    client = ssl.create_default_context()
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    return server, client


async def tls_pair(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> tuple[trio.SSLStream[trio.abc.Stream], trio.SSLStream[trio.abc.Stream]]:
    """(the kubelet's side, the client's side), handshake done."""
    ours, theirs = trio.testing.memory_stream_pair()
    server = trio.SSLStream(ours, contexts[0], server_side=True, https_compatible=True)
    client = trio.SSLStream(theirs, contexts[1], https_compatible=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.do_handshake)
        nursery.start_soon(client.do_handshake)
    return server, client


async def test_records_already_received_are_read_at_once(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    server, client = await tls_pair(contexts)
    payload = bytes(range(256)) * 1024  # 256 KiB: sixteen records
    await client.send_all(payload)
    first = await server.receive_some(len(payload))
    assert len(first) == RECORD  # trio hands out one record per call
    assert with_decrypted(server, first, len(payload)) == payload
    await client.send_all(b"x" * 3 * RECORD)
    first = await server.receive_some(RECORD * 2)
    assert with_decrypted(server, first, RECORD * 2) == b"x" * 2 * RECORD  # the limit holds
    assert await server.receive_some(RECORD) == b"x" * RECORD  # the rest is still there


async def test_with_decrypted_leaves_other_streams_alone() -> None:
    plain, _ = trio.testing.memory_stream_pair()
    assert with_decrypted(plain, b"abc", 100) == b"abc"


async def test_the_relay_sends_what_came_together_in_few_writes(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
    autojump_clock: trio.testing.MockClock,
) -> None:
    server, client = await tls_pair(contexts)
    runtime, runtime_peer = trio.testing.memory_stream_pair()
    writes: list[int] = []
    pump = runtime.send_stream.send_all_hook
    assert pump is not None

    async def count() -> None:
        writes.append(1)
        await pump()

    runtime.send_stream.send_all_hook = count
    received = bytearray()
    payload = b"y" * (256 << 10)

    async def runtime_reads() -> None:
        while len(received) < len(payload):
            received.extend(await runtime_peer.receive_some())
        await runtime_peer.aclose()  # the runtime closes: the stream ends

    async with trio.open_nursery() as nursery:
        nursery.start_soon(runtime_reads)
        await client.send_all(payload)
        result = await relay(server, runtime)
    assert bytes(received) == payload
    assert result.to_runtime == len(payload)
    assert len(writes) <= 2  # one per TLS record (16) before
