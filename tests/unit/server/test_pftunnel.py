"""kubectl's WebSocket port-forward tunnel unwrapped for the runtime (pftunnel.py).

Facts from upstream's tunneling handler (apiserver util/proxy streamtunnel.go, used by the
1.36 kubelet's getPortForward with ExtendWebSocketsToKubelet): the SPDY request made of
the WebSocket one, the runtime's answer intercepted, SPDY bytes as binary messages.
"""

from __future__ import annotations

import base64

import pytest
import trio
import trio.testing
from wsproto.frame_protocol import CloseReason, FrameProtocol, Opcode
from wsproto.utilities import generate_accept_token

from kubelet.server.pftunnel import (
    MISSING_UPGRADE,
    TunnelStream,
    binary_frame,
    handshake_error,
    is_tunnel_request,
    spdy_protocols,
    spdy_request,
)
from kubelet.server.streaming import UpgradeRequest

KEY = base64.b64encode(b"0123456789abcdef")
TUNNEL = UpgradeRequest(
    method="GET",
    headers=(
        (b"host", b"node-1:10250"),
        (b"connection", b"Upgrade"),
        (b"upgrade", b"websocket"),
        (b"sec-websocket-key", KEY),
        (b"sec-websocket-version", b"13"),
        (b"sec-websocket-protocol", b"SPDY/3.1+portforward.k8s.io, v4.channel.k8s.io"),
        (b"x-stream-protocol-version", b"stale"),
    ),
    client_address="10.0.0.7",
)
SPDY_101 = (
    b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
    b"X-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n"
)


def _with(headers: dict[bytes, bytes], method: str = "GET") -> UpgradeRequest:
    kept = tuple((k, v) for k, v in TUNNEL.headers if k not in headers)
    added = tuple((k, v) for k, v in headers.items() if v)
    return UpgradeRequest(method, kept + added, TUNNEL.client_address)


def test_tunnel_requests_and_their_spdy_protocols() -> None:
    assert is_tunnel_request(TUNNEL)
    assert spdy_protocols(TUNNEL) == ["portforward.k8s.io"]
    assert not is_tunnel_request(_with({b"sec-websocket-protocol": b"v4.channel.k8s.io"}))
    assert not is_tunnel_request(_with({b"upgrade": b"SPDY/3.1"}))
    odd = _with({b"sec-websocket-protocol": b"SPDY/3.1+portforward.example.com"})
    assert is_tunnel_request(odd) and spdy_protocols(odd) == []


def test_the_runtime_is_asked_for_spdy() -> None:
    request = spdy_request(TUNNEL, ["portforward.k8s.io"])
    assert request.method == "POST"
    assert request.client_address == "10.0.0.7"
    assert request.headers == (
        (b"host", b"node-1:10250"),
        (b"connection", b"Upgrade"),
        (b"upgrade", b"SPDY/3.1"),
        (b"x-stream-protocol-version", b"portforward.k8s.io"),
    )


@pytest.mark.parametrize(
    ("change", "method", "status"),
    [
        ({}, "GET", None),
        ({}, "POST", 405),
        ({b"sec-websocket-version": b"8"}, "GET", 400),
        ({b"sec-websocket-key": b""}, "GET", 400),
        ({b"sec-websocket-key": b"c2hvcnQ="}, "GET", 400),
        ({b"sec-websocket-key": b"not base64!"}, "GET", 400),
    ],
)
def test_the_websocket_handshake_is_checked_as_gorilla_does(
    change: dict[bytes, bytes], method: str, status: int | None
) -> None:
    refused = handshake_error(_with(change, method))
    assert (refused.status if refused else None) == status
    if refused is not None:
        assert ("Sec-Websocket-Version", "13") in refused.headers


def test_binary_frames_of_every_length_class() -> None:
    parser = FrameProtocol(client=True, extensions=[])
    for size in (0, 125, 126, 65535, 65536, 300000):
        parser.receive_bytes(binary_frame(b"x" * size))
        [frame] = list(parser.received_frames())
        assert (frame.opcode, len(frame.payload), frame.message_finished) == (
            Opcode.BINARY, size, True,
        )  # fmt: skip


async def _read_until(stream: trio.abc.Stream, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = await stream.receive_some()
        assert chunk
        data += chunk
    return data


def _frames(data: bytes) -> list[tuple[Opcode, object]]:
    parser = FrameProtocol(client=True, extensions=[])
    parser.receive_bytes(data)
    return [(f.opcode, f.payload) for f in parser.received_frames()]


async def test_a_101_becomes_the_clients_websocket_and_bytes_binary_messages() -> None:
    client, server = trio.testing.memory_stream_pair()
    tunnel = TunnelStream(server, b"", TUNNEL)
    await tunnel.send_all(SPDY_101[:20])  # the head may come in pieces
    await tunnel.send_all(SPDY_101[20:] + b"\x80\x03early")
    await tunnel.send_all(b"later")
    data = await _read_until(client, b"later")
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"HTTP/1.1 101 Switching Protocols",
        b"Upgrade: websocket",
        b"Connection: Upgrade",
        b"Sec-WebSocket-Accept: " + generate_accept_token(KEY),
        b"Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io",
    ]
    assert _frames(rest) == [(Opcode.BINARY, b"\x80\x03early"), (Opcode.BINARY, b"later")]


async def test_the_clients_messages_pings_and_close() -> None:
    client, server = trio.testing.memory_stream_pair()
    ws = FrameProtocol(client=True, extensions=[])
    early = bytes(ws.send_data(b"spdy-1"))
    tunnel = TunnelStream(server, early, TUNNEL)
    await tunnel.send_all(SPDY_101)
    await _read_until(client, b"\r\n\r\n")
    assert await tunnel.receive_some() == b"spdy-1"
    await client.send_all(bytes(ws.ping(b"p")) + bytes(ws.send_data(b"spdy-2")))
    assert await tunnel.receive_some() == b"spdy-2"
    assert _frames(await client.receive_some()) == [(Opcode.PONG, b"p")]
    await client.send_all(bytes(ws.close(CloseReason.NORMAL_CLOSURE)))
    assert await tunnel.receive_some() == b""
    [(opcode, (code, _))] = _frames(await client.receive_some())  # type: ignore[misc]
    assert (opcode, code) == (Opcode.CLOSE, CloseReason.NORMAL_CLOSURE)
    await tunnel.finish()  # closed once only


async def test_a_text_message_ends_the_stream() -> None:
    client, server = trio.testing.memory_stream_pair()
    ws = FrameProtocol(client=True, extensions=[])
    tunnel = TunnelStream(server, bytes(ws.send_data("text")), TUNNEL)
    await tunnel.send_all(SPDY_101)
    with pytest.raises(trio.BrokenResourceError, match="invalid message type received"):
        await tunnel.receive_some()
    rest = (await _read_until(client, b"\r\n\r\n")).partition(b"\r\n\r\n")[2]
    [(opcode, (code, _))] = _frames(rest or await client.receive_some())  # type: ignore[misc]
    assert (opcode, code) == (Opcode.CLOSE, CloseReason.UNSUPPORTED_DATA)


async def test_a_refusal_reaches_the_client_as_it_came() -> None:
    client, server = trio.testing.memory_stream_pair()
    tunnel = TunnelStream(server, b"", TUNNEL)
    refusal = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno"
    await tunnel.send_all(refusal)
    assert await client.receive_some() == refusal


async def test_a_101_without_spdy_upgrade_headers_is_a_500() -> None:
    client, server = trio.testing.memory_stream_pair()
    tunnel = TunnelStream(server, b"", TUNNEL)
    with pytest.raises(trio.BrokenResourceError):
        await tunnel.send_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")
    answer = await client.receive_some()
    assert answer.startswith(b"HTTP/1.1 500 ")
    assert answer.endswith(MISSING_UPGRADE.encode() + b"\n")
