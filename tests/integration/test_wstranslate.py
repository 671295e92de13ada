"""WebSocket v5 exec and attach translated to SPDY by the kubelet, on a fake clock.

A WebSocket channel client (what kubectl speaks) talks to our own HTTP server, whose app
serves the request with ``kubelet.server.wstranslate.translate_remote_command`` against the
fake CRI streaming server, which speaks SPDY remotecommand (v4) as containerd 1.6 does.
Everything is in-process on 127.0.0.1 (ephemeral ports) under ``autojump_clock``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from kubelet.cri import api
from kubelet.server.asgi import Receive, Scope, Send, send_response
from kubelet.server.limits import Limits
from kubelet.server.serve import bind, serve_socket
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


async def test_a_runtime_refusal_is_a_status_after_the_upgrade(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with setup(exec_request("cat")) as (fake, kubelet):
        kubelet.route = lambda: f"{fake.base_url}/exec/unknown1"
        client = await kubelet.client()
        await client.run()
        assert client.status() == internal_error("unable to upgrade connection: 404 page not found")
        assert fake.sessions == []


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

    async def flood(io: StreamIO) -> int:
        for _ in range(1000):
            await io.stdout(b"y" * 65536)
            written[0] += 65536
        return 0

    fake = FakeStreamingServer(exec_handler=flood)
    async with setup(exec_request("flood", stdin=False), fake) as (_, kubelet):
        client = await kubelet.client()
        await trio.sleep(30)
        assert written[0] < 32 << 20  # socket buffers, not the kubelet's memory
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await client.closed.wait()
        assert len(client.received[ch.STDOUT]) == 1000 * 65536
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
