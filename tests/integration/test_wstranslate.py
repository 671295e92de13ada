"""WebSocket v5 exec and attach translated to SPDY by the kubelet, on a fake clock.

A WebSocket channel client (what kubectl speaks) talks to our own HTTP server, whose app
serves the request with ``kubelet.server.wstranslate.translate_remote_command`` against the
fake CRI streaming server, which speaks SPDY remotecommand (v4) as containerd 1.6 does.
Everything is in-process on 127.0.0.1 (ephemeral ports) under ``autojump_clock``.
"""

from __future__ import annotations

import contextlib
import struct
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from kubelet.cri import api
from kubelet.server import spdy
from kubelet.server.asgi import Receive, Scope, Send, send_response
from kubelet.server.limits import Limits
from kubelet.server.servers import bind, serve_socket
from kubelet.server.streaming import TAKEOVER, UpgradeRequest
from kubelet.server.wstranslate import exit_code_status, internal_error, translate_remote_command
from kubelet.testing import wschannels as ch
from kubelet.testing.fakestreaming import FakeStreamingServer, StreamIO

from .test_streaming import PLENTY, eventually, raw_exchange

SPDY_V4 = "v4.channel.k8s.io (SPDY)"


@attrs.frozen
class Opts:
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


@attrs.define
class Kubelet:
    route: Callable[[], str]
    request: api.ExecRequest
    idle_timeout: float = 4 * 3600.0
    port: int = 0
    in_flight: int = 0

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.in_flight += 1
        try:
            r = self.request
            response = await translate_remote_command(
                UpgradeRequest.from_scope(scope),
                scope["extensions"].get(TAKEOVER),
                self.route(),
                Opts(r.stdin, r.stdout, r.stderr, r.tty),
                idle_timeout=self.idle_timeout,
            )
            if response is not None:
                await send_response(response, receive, send)
        finally:
            self.in_flight -= 1

    async def connect(self) -> trio.SocketStream:
        return await trio.open_tcp_stream("127.0.0.1", self.port)

    async def client(self, path: str = "/exec/default/web/app") -> ch.ChannelClient:
        stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        return await ch.ChannelClient.connect(stream, path, [ch.V5])


@asynccontextmanager
async def setup(
    request: api.ExecRequest, fake: FakeStreamingServer | None = None, **kw: Any
) -> AsyncIterator[tuple[FakeStreamingServer, Kubelet]]:
    server = fake or FakeStreamingServer()
    async with server.serve(), trio.open_nursery() as nursery:
        kubelet = Kubelet(lambda: server.register("exec", request), request, **kw)
        sock = bind("127.0.0.1", 0)
        kubelet.port = int(sock.getsockname()[1])
        nursery.start_soon(serve_socket, kubelet.app, sock, None, Limits(), PLENTY)
        yield server, kubelet
        nursery.cancel_scope.cancel()


def exec_request(*cmd: str, tty: bool = False, stdin: bool = True) -> api.ExecRequest:
    return api.ExecRequest(
        container_id="c1", cmd=list(cmd), tty=tty, stdin=stdin, stdout=True, stderr=not tty
    )


async def test_stdin_its_v5_close_and_the_output(autojump_clock: trio.testing.MockClock) -> None:
    async with setup(exec_request("cat")) as (fake, kubelet):
        client = await kubelet.client()
        assert client.protocol == ch.V5
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await client.send(ch.STDIN, b"hello ")
            await client.send(ch.STDIN, b"world")
            await client.close_channel(ch.STDIN)  # a FIN on the SPDY stdin stream: cat ends
            await client.closed.wait()
        assert client.text(ch.STDOUT) == "hello world"
        assert client.status() == {"metadata": {}, "status": "Success"}
        assert client.close_code == 1000
        assert (fake.sessions[0].protocol, fake.sessions[0].exit_code) == (SPDY_V4, 0)
        method, _, headers = fake.requests[0]
        assert method == "POST"
        assert (b"upgrade", b"SPDY/3.1") in headers
        offered = [v for k, v in headers if k == b"x-stream-protocol-version"]
        assert offered[:2] == [b"v5.channel.k8s.io", b"v4.channel.k8s.io"]
        await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0)


async def test_a_non_zero_exit_is_kubectls_status(autojump_clock: trio.testing.MockClock) -> None:
    async with setup(exec_request("sh", "-c", "exit 3", stdin=False)) as (_, kubelet):
        client = await kubelet.client()
        await client.run()
        status = client.status()
        assert status == exit_code_status(3)
        assert status is not None and ch.status_exit_code(status) == 3
        assert status["message"] == (
            "command terminated with non-zero exit code: command terminated with exit code 3"
        )


async def test_stderr_and_an_unknown_command(autojump_clock: trio.testing.MockClock) -> None:
    async with setup(exec_request("nosuch", stdin=False)) as (_, kubelet):
        client = await kubelet.client()
        await client.run()
        assert client.text(ch.STDERR) == "sh: nosuch: not found\n"
        assert client.status() == exit_code_status(127)


async def test_a_terminal_resize_reaches_the_command(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def sized(io: StreamIO) -> int:
        await io.resized.wait()
        assert io.size is not None
        await io.stdout(f"{io.size[1]} {io.size[0]}\n".encode())
        return 0

    fake = FakeStreamingServer(exec_handler=sized)
    async with setup(exec_request("stty", "size", tty=True), fake) as (_, kubelet):
        client = await kubelet.client()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await client.resize(100, 40)
            await client.closed.wait()
        assert client.text(ch.STDOUT) == "40 100\n"
        assert fake.sessions[0].resizes == [(100, 40)]
        assert fake.sessions[0].tty


@pytest.mark.parametrize(
    "bad",
    [b"[" * 60_000, b'{"Width":' + b" " * 70_000, b'{"Width":70000,"Height":1}', b"null"],
    ids=["deep", "endless", "too-wide", "not-an-object"],
)
async def test_a_bad_resize_message_ends_resizing_not_the_stream(
    autojump_clock: trio.testing.MockClock, bad: bytes
) -> None:
    """As upstream's translator: a resize message that does not decode stops resizing;
    the session goes on, and ends with its status."""
    async with setup(exec_request("cat", tty=True)) as (fake, kubelet):
        client = await kubelet.client()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await client.send(ch.RESIZE, bad)
            await client.resize(100, 40)  # after a bad one: not forwarded
            await client.send(ch.STDIN, b"still here")
            await client.close_channel(ch.STDIN)
            await client.closed.wait()
        assert client.text(ch.STDOUT) == "still here"
        assert client.status() == {"metadata": {}, "status": "Success"}
        assert fake.sessions[0].resizes == []


async def test_a_runtime_refusal_is_a_status_after_the_upgrade(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with setup(exec_request("cat")) as (fake, kubelet):
        kubelet.route = lambda: f"{fake.base_url}/exec/unknown1"
        client = await kubelet.client()
        await client.run()
        assert client.status() == internal_error("unable to upgrade connection: 404 page not found")
        assert fake.sessions == []


async def bombing_runtime(listener: trio.SocketListener) -> None:
    """A runtime that upgrades to SPDY, then answers each SYN_STREAM with a header block
    of a few KiB that inflates into 64 MiB."""
    stream = await listener.accept()
    received = b""
    while b"\r\n\r\n" not in received:
        received += await stream.receive_some(65536)
    await stream.send_all(
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
        b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
    )
    conn = spdy.SpdyConnection(stream, received.partition(b"\r\n\r\n")[2])
    deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
    async with contextlib.aclosing(conn.frames()) as frames:
        async for frame in frames:
            if frame.control and frame.kind == spdy.SYN_STREAM:
                block = deflate.compress(spdy.encode_headers({"x": "\0" * (64 << 20)}))
                block += deflate.flush(zlib.Z_SYNC_FLUSH)
                reply = struct.pack(">I", frame.stream_id()) + block
                await stream.send_all(spdy.control_frame(spdy.SYN_REPLY, reply))


async def test_a_header_block_bomb_from_the_runtime_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The runtime's header blocks inflate into a bounded size: past it the connection is
    refused and the client gets the error as its status."""
    async with setup(exec_request("cat")) as (_, kubelet), trio.open_nursery() as nursery:
        [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
        nursery.start_soon(bombing_runtime, listener)
        port = listener.socket.getsockname()[1]
        kubelet.route = lambda: f"http://127.0.0.1:{port}/exec/bomb"
        client = await kubelet.client()
        await client.run()
        status = client.status()
        assert status is not None and "header block larger than" in status["message"]
        assert status == internal_error(f"header block larger than {spdy.MAX_HEADER_BLOCK} bytes")
        nursery.cancel_scope.cancel()


async def test_a_client_that_goes_away_ends_the_runtime_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with setup(exec_request("sleep", "1000")) as (fake, kubelet):
        client = await kubelet.client()
        await eventually(lambda: fake.active == 1)
        await client.stream.aclose()
        await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0, timeout=5)
        assert fake.sessions[0].exit_code is None


async def test_the_idle_timeout_ends_both(autojump_clock: trio.testing.MockClock) -> None:
    async with setup(exec_request("cat"), idle_timeout=60) as (fake, kubelet):
        client = await kubelet.client()
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await trio.sleep(50)
            await client.send(ch.STDIN, b"x")  # traffic moves the deadline
            await client.closed.wait()
        assert 109 <= trio.current_time() - start < 115
        assert client.text(ch.STDOUT) == "x"
        assert client.status() is None  # cut, not finished
        await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0)


async def test_a_client_that_never_reads_holds_the_runtime_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    written = [0]
    chunks = 160  # 10 MiB: well past what the buffers on the way hold (about 0.6 MiB)

    async def flood(io: StreamIO) -> int:
        for _ in range(chunks):
            await io.stdout(b"y" * 65536)
            written[0] += 65536
        return 0

    fake = FakeStreamingServer(exec_handler=flood)
    async with setup(exec_request("flood", stdin=False), fake) as (_, kubelet):
        client = await kubelet.client()
        await trio.sleep(30)
        assert written[0] < 4 << 20  # socket buffers, not the kubelet's memory
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await client.closed.wait()
        assert len(client.received[ch.STDOUT]) == chunks * 65536
        assert client.status() == {"metadata": {}, "status": "Success"}


@pytest.mark.parametrize(
    ("head", "answer"),
    [
        (b"POST /exec/x HTTP/1.1\r\nSec-WebSocket-Key: a2V5a2V5a2V5a2V5a2V5aw==\r\n"
         b"Sec-WebSocket-Version: 13\r\n", b"HTTP/1.1 405 "),
        (b"GET /exec/x HTTP/1.1\r\nSec-WebSocket-Version: 13\r\n", b"HTTP/1.1 400 "),
        (b"GET /exec/x HTTP/1.1\r\nSec-WebSocket-Key: a2V5a2V5a2V5a2V5a2V5aw==\r\n"
         b"Sec-WebSocket-Version: 8\r\n", b"HTTP/1.1 400 "),
    ],
)  # fmt: skip
async def test_handshakes_refused_as_x_net_websocket_does(
    autojump_clock: trio.testing.MockClock, head: bytes, answer: bytes
) -> None:
    async with setup(exec_request("cat")) as (fake, kubelet):
        common = (
            b"Host: k\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Sec-WebSocket-Protocol: v5.channel.k8s.io\r\nContent-Length: 0\r\n\r\n"
        )
        response = await raw_exchange(kubelet, head + common)  # type: ignore[arg-type]
        assert response.startswith(answer)
        assert fake.sessions == []
