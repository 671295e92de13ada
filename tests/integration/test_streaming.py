"""Exec, attach and port-forward through the kubelet's proxy, end to end on a fake clock.

A WebSocket channel client (what kubectl speaks first) talks to our own HTTP server, whose
app proxies the upgrade (``kubelet.server.streaming.proxy_upgrade``) to the fake CRI
streaming server (``kubelet.testing.fakestreaming``) at the URL a CRI call would return.
Everything is in-process on 127.0.0.1 (ephemeral ports) under ``autojump_clock``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from kubelet.cri import api
from kubelet.server.asgi import Receive, Scope, Send, send_response
from kubelet.server.fdlimits import Descriptors
from kubelet.server.limits import Limits
from kubelet.server.servers import bind, serve_socket
from kubelet.server.streaming import (
    TAKEOVER,
    RelayResult,
    UpgradeRequest,
    parse_response_head,
    proxy_upgrade,
    relay,
)
from kubelet.testing import wschannels as ch
from kubelet.testing.fakestreaming import FakeStreamingServer, StreamIO

PLENTY = Descriptors(reserve=0, limit=lambda: 1_000_000, count=lambda: 10)


@attrs.define
class Kubelet:
    """Our HTTP server with a proxying app; ``route(scope)`` gives the runtime URL."""

    route: Callable[[Scope], str]
    idle_timeout: float = 4 * 3600.0
    port: int = 0
    in_flight: int = 0
    results: list[Any] = attrs.field(factory=list)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.in_flight += 1
        try:
            response = await proxy_upgrade(
                UpgradeRequest.from_scope(scope),
                scope["extensions"].get(TAKEOVER),
                self.route(scope),
                idle_timeout=self.idle_timeout,
            )
            self.results.append(response)
            if response is not None:
                await send_response(response, receive, send)
        finally:
            self.in_flight -= 1

    async def connect(self) -> trio.SocketStream:
        return await trio.open_tcp_stream("127.0.0.1", self.port)


@asynccontextmanager
async def kubelet_for(route: Callable[[Scope], str], **kw: Any) -> AsyncIterator[Kubelet]:
    kubelet = Kubelet(route, **kw)
    sock = bind("127.0.0.1", 0)
    kubelet.port = int(sock.getsockname()[1])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_socket, kubelet.app, sock, None, Limits(), PLENTY)
        yield kubelet
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def setup(
    request: Any, kind: str = "exec", fake: FakeStreamingServer | None = None, **kw: Any
) -> AsyncIterator[tuple[FakeStreamingServer, Kubelet]]:
    """A fake runtime streaming server and a kubelet whose every request maps to a fresh
    URL for ``request`` (as the CRI call would give)."""
    server = fake or FakeStreamingServer()
    async with (
        server.serve(),
        kubelet_for(lambda scope: server.register(kind, request), **kw) as kubelet,
    ):
        yield server, kubelet


async def open_client(
    kubelet: Kubelet, path: str, protocols: list[str] | None = None
) -> ch.ChannelClient:
    stream = await kubelet.connect()
    return await ch.ChannelClient.connect(stream, path, protocols or [ch.V5])


async def eventually(check: Callable[[], bool], timeout: float = 30) -> None:
    with trio.fail_after(timeout):
        while not check():
            await trio.sleep(0.01)


def exec_request(*cmd: str, tty: bool = False, stdin: bool = True) -> api.ExecRequest:
    return api.ExecRequest(
        container_id="c1", cmd=list(cmd), tty=tty, stdin=stdin, stdout=True, stderr=not tty
    )


# -- exec ------------------------------------------------------------------------------------------


async def test_exec_with_stdin_and_exit_code(autojump_clock: trio.testing.MockClock) -> None:
    async with setup(exec_request("cat")) as (fake, kubelet):
        client = await open_client(kubelet, "/exec/default/web/app?command=cat&stdin=1&stdout=1")
        assert client.protocol == ch.V5
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await client.send(ch.STDIN, b"hello ")
            await client.send(ch.STDIN, b"world")
            await client.close_channel(ch.STDIN)  # v5: end of stdin; cat exits 0
            await client.closed.wait()
        assert client.text(ch.STDOUT) == "hello world"
        assert client.status() == ch.success_status()
        assert client.close_code == 1000
        assert fake.sessions[0].exit_code == 0
        await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0)
        method, target, headers = fake.requests[0]
        assert (method, target.split("/")[1]) == ("GET", "exec")
        assert (b"sec-websocket-protocol", b"v5.channel.k8s.io") in headers
        assert (b"x-forwarded-for", b"127.0.0.1") in headers


async def test_a_non_zero_exit_is_the_status_on_the_error_channel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with setup(exec_request("sh", "-c", "exit 3", stdin=False)) as (_, kubelet):
        for protocol in (ch.V5, ch.V4):
            client = await open_client(kubelet, "/exec/default/web/app", [protocol])
            await client.run()
            assert client.protocol == protocol
            status = client.status()
            assert status is not None
            assert ch.status_exit_code(status) == 3
            assert status["message"].endswith("command [sh -c exit 3], exit code 3")
        v1 = await open_client(kubelet, "/exec/default/web/app", [ch.V1])
        await v1.run()
        assert v1.text(ch.ERROR).startswith("command terminated with non-zero exit code")


async def test_a_terminal_resize_reaches_the_command(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sizes: list[tuple[int, int]] = []

    async def shell(io: StreamIO) -> int:
        while len(sizes) < 2:
            await io.resized.wait()
            assert io.size is not None
            sizes.append(io.size)
            await io.stdout(b"%d %d\r\n" % (io.size[1], io.size[0]))
        return 0

    fake = FakeStreamingServer(exec_handler=shell)
    async with setup(exec_request("sh", tty=True), fake=fake) as (_, kubelet):
        client = await open_client(kubelet, "/exec/default/web/app?command=sh&tty=1&stdin=1")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await client.resize(80, 24)
            await eventually(lambda: b"24 80" in client.received.get(ch.STDOUT, b""))
            await client.resize(132, 43)
            await client.closed.wait()
        assert sizes == [(80, 24), (132, 43)]
        assert client.text(ch.STDOUT) == "24 80\r\n43 132\r\n"
        assert fake.sessions[0].resizes == [(80, 24), (132, 43)]
        assert fake.sessions[0].tty


# -- attach ----------------------------------------------------------------------------------------


async def test_attach(autojump_clock: trio.testing.MockClock) -> None:
    request = api.AttachRequest(container_id="c1", stdin=True, stdout=True, stderr=True)
    async with setup(request, kind="attach") as (fake, kubelet):
        client = await open_client(kubelet, "/attach/default/web/app?stdin=1&stdout=1&stderr=1")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await client.send(ch.STDIN, b"ping\n")
            await eventually(lambda: client.received.get(ch.STDOUT) == b"ping\n")
            await client.close_channel(ch.STDIN)
            await client.closed.wait()
        assert fake.sessions[0].kind == "attach"
        await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0)


# -- port-forward ----------------------------------------------------------------------------------


@asynccontextmanager
async def echo_server() -> AsyncIterator[int]:
    async def echo(stream: trio.SocketStream) -> None:
        async with stream:
            while data := await stream.receive_some(65536):
                await stream.send_all(data)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, echo, listeners)
        yield int(listeners[0].socket.getsockname()[1])
        nursery.cancel_scope.cancel()


async def test_port_forward_to_a_tcp_server(autojump_clock: trio.testing.MockClock) -> None:
    async with echo_server() as echo_port:
        fake = FakeStreamingServer(port_target=lambda sandbox, port: ("127.0.0.1", echo_port))
        request = api.PortForwardRequest(pod_sandbox_id="s1", port=[80])
        async with setup(request, kind="portforward", fake=fake) as (_, kubelet):
            client = await open_client(kubelet, "/portForward/default/web?port=80", [ch.V4])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.run)
                await eventually(lambda: client.received.get(1) == b"\x50\x00")
                payload = b"GET / HTTP/1.0\r\n\r\n" * 1000
                await client.send(0, payload)
                await eventually(lambda: client.received.get(0) == b"\x50\x00" + payload)
                await client.close()
                await client.closed.wait()
            assert fake.sessions[0].ports == (80,)
            await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0)


# -- clients that go away, never read, or idle -----------------------------------------------------


async def test_a_client_that_disconnects_mid_stream_leaves_nothing_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with setup(exec_request("cat")) as (fake, kubelet):
        client = await open_client(kubelet, "/exec/default/web/app?command=cat&stdin=1")
        await client.send(ch.STDIN, b"half a line")
        await eventually(lambda: fake.active == 1)
        await trio.aclose_forcefully(client.stream)
        await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0)
        assert fake.sessions[0].ended == "client gone"
        assert fake.sessions[0].exit_code is None
        result = kubelet.results[0]
        assert result is None  # the stream ran on the taken-over connection


async def test_a_client_that_never_reads_holds_memory_bounded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    produced = 0

    async def firehose(io: StreamIO) -> int:
        nonlocal produced
        chunk = b"x" * 65536
        while True:
            await io.stdout(chunk)
            produced += len(chunk)

    fake = FakeStreamingServer(exec_handler=firehose)
    async with setup(exec_request("yes", stdin=False), fake=fake) as (_, kubelet):
        client = await open_client(kubelet, "/exec/default/web/app?command=yes&stdout=1")
        # The client reads nothing; the fake clock jumps. Real sockets sit between the hops, so
        # the kernel may still hand over a chunk after every task has blocked: the producer must
        # come to a stop, not stop within one jump.
        stalled = -1
        for _ in range(10):
            if produced == stalled:
                break
            stalled = produced
            await trio.sleep(600)
        assert produced == stalled  # the producer is blocked, not buffered somewhere
        # what is in flight is the sockets' kernel buffers plus one chunk per direction
        assert produced < 64 << 20
        await trio.aclose_forcefully(client.stream)
        await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0)


async def test_an_idle_stream_is_closed_after_the_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with setup(exec_request("cat"), idle_timeout=300) as (fake, kubelet):
        client = await open_client(kubelet, "/exec/default/web/app?command=cat&stdin=1")
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.run)
            await trio.sleep(200)
            await client.send(ch.STDIN, b"still here")  # traffic restarts the clock
            await client.closed.wait()
        assert 499 <= trio.current_time() - started < 520
        assert client.text(ch.STDOUT) == "still here"
        await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0)


# -- what the proxy refuses or relays as refused ---------------------------------------------------


async def raw_exchange(kubelet: Kubelet, request: bytes) -> bytes:
    """Send ``request`` as it is; the whole response (by its Content-Length, or to EOF)."""
    stream = await kubelet.connect()
    await stream.send_all(request)
    answer = b""
    with trio.fail_after(60):
        while (head := parse_response_head(answer)) is None:
            data = await stream.receive_some(65536)
            assert data, f"connection closed after {answer!r}"
            answer += data
        length = head.header(b"content-length")
        while length is None or len(answer) < head.length + int(length):
            data = await stream.receive_some(65536)
            if not data:
                break
            answer += data
    await stream.aclose()
    return answer


async def test_malformed_upgrade_requests(autojump_clock: trio.testing.MockClock) -> None:
    async with setup(exec_request("cat")) as (fake, kubelet):
        plain = await raw_exchange(kubelet, b"GET /exec/d/web/app HTTP/1.1\r\nHost: k\r\n\r\n")
        assert plain.startswith(b"HTTP/1.1 500 ")
        assert plain.endswith(b"Upgrade request required\n")
        no_upgrade_header = await raw_exchange(
            kubelet, b"GET /exec/x HTTP/1.1\r\nHost: k\r\nConnection: Upgrade\r\n\r\n"
        )
        assert no_upgrade_header.endswith(b"Upgrade request required\n")
        # a WebSocket request without its key: the runtime says 400, the client hears it
        keyless = await raw_exchange(
            kubelet,
            b"GET /exec/x HTTP/1.1\r\nHost: k\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Sec-WebSocket-Version: 13\r\n\r\n",
        )
        assert keyless.startswith(b"HTTP/1.1 400 ")
        assert keyless.endswith(b"Missing header, 'Sec-WebSocket-Key'\n")
        # SPDY goes through untouched: this fake runtime refuses an unknown version in words
        spdy = await raw_exchange(
            kubelet,
            b"POST /exec/x HTTP/1.1\r\nHost: k\r\nContent-Length: 0\r\nConnection: Upgrade\r\n"
            b"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v9.channel.k8s.io\r\n\r\n",
        )
        assert spdy.startswith(b"HTTP/1.1 403 ")
        assert b"unable to negotiate protocol: client supports ['v9.channel.k8s.io']" in spdy
        assert fake.active == 0


async def test_unknown_subprotocols_get_the_runtimes_403(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with setup(exec_request("cat")) as (fake, kubelet):
        with pytest.raises(ch.HandshakeRefused) as refused:
            await open_client(kubelet, "/exec/default/web/app", ["v9.channel.k8s.io"])
        assert refused.value.status == 403
        assert fake.sessions == []
        await eventually(lambda: kubelet.in_flight == 0)


async def test_runtime_failures_before_the_upgrade_are_500s(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sock = bind("127.0.0.1", 0)  # bound, never listening: connection refused
    dead = f"http://127.0.0.1:{sock.getsockname()[1]}/exec/abc"
    upgrade = b"GET /exec/x HTTP/1.1\r\nHost: k\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
    async with kubelet_for(lambda scope: dead) as kubelet:
        refused = await raw_exchange(kubelet, upgrade + b"\r\n")
        assert refused.startswith(b"HTTP/1.1 500 ")
        assert b"error dialing backend: " in refused
    sock.close()

    async def answer(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    for handler, expected in (
        (answer, b"invalid upgrade response: status code 200\n"),
        (silent, b"error dialing backend: no answer within 30s\n"),
    ):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/exec/abc"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, handler, listeners)
            async with kubelet_for(lambda scope, url=url: url) as kubelet:
                answered = await raw_exchange(kubelet, upgrade + b"\r\n")
                assert answered.startswith(b"HTTP/1.1 500 ")
                assert answered.endswith(expected)
            nursery.cancel_scope.cancel()


async def test_a_used_token_is_refused_by_the_runtime(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with FakeStreamingServer().serve() as fake:
        url = fake.register("exec", exec_request("cat"))
        async with kubelet_for(lambda scope: url) as kubelet:
            first = await open_client(kubelet, "/exec/a", [ch.V4])
            with pytest.raises(ch.HandshakeRefused) as second:
                await open_client(kubelet, "/exec/a", [ch.V4])
            assert second.value.status == 404
            assert second.value.body == b"404 page not found\n"
            await trio.aclose_forcefully(first.stream)
            await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0)


# -- the relay itself: half-close, and either side closing -----------------------------------------


class WholeStream(trio.abc.Stream):
    """A stream that cannot half-close (as TLS): EOF in one direction ends both."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_the_clients_half_close_passes_on_and_the_runtime_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client_far, client_near = trio.testing.memory_stream_pair()
    runtime_near, runtime_far = trio.testing.memory_stream_pair()
    results: list[RelayResult] = []

    async def run() -> None:
        results.append(await relay(client_near, runtime_near, idle_timeout=0))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await client_far.send_all(b"input")
        await client_far.send_eof()  # the client is done sending
        assert await runtime_far.receive_some() == b"input"
        assert await runtime_far.receive_some() == b""  # ... and the runtime hears it
        await runtime_far.send_all(b"output after the client's EOF")
        assert await client_far.receive_some() == b"output after the client's EOF"
        await runtime_far.send_eof()  # the runtime is done: the stream ends
    assert results == [RelayResult(5, 29, "closed")]


async def test_the_runtime_closing_ends_the_stream_whatever_the_client_does(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client_far, client_near = trio.testing.memory_stream_pair()
    runtime_near, runtime_far = trio.testing.memory_stream_pair()
    results: list[RelayResult] = []

    async def run() -> None:
        results.append(await relay(client_near, runtime_near))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await runtime_far.send_all(b"bye")
        await runtime_far.send_eof()
        assert await client_far.receive_some() == b"bye"
    assert results[0].reason == "closed"
    assert trio.current_time() < 1  # no waiting for the client, which never closed


async def test_a_side_that_cannot_half_close_ends_both(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client_far, client_near = trio.testing.memory_stream_pair()
    runtime_near, runtime_far = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        results: list[RelayResult] = []

        async def run() -> None:
            results.append(await relay(WholeStream(client_near), runtime_near))

        nursery.start_soon(run)
        await client_far.send_all(b"last words")
        await client_far.send_eof()  # TLS cannot pass this on: both ends close
        assert await runtime_far.receive_some() == b"last words"
    assert results[0].reason == "closed"


class ResetPeer(trio.abc.Stream):
    """A runtime connection that was reset: reads wait (nothing comes), writes fail."""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        raise trio.BrokenResourceError("connection reset by peer")

    async def wait_send_all_might_not_block(self) -> None:
        pass

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        pass


async def test_a_broken_side_ends_both(autojump_clock: trio.testing.MockClock) -> None:
    client_far, client_near = trio.testing.memory_stream_pair()
    results: list[RelayResult] = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            results.append(await relay(client_near, ResetPeer()))

        nursery.start_soon(run)
        await client_far.send_all(b"into the void")
    assert results == [RelayResult(0, 0, "to_runtime: BrokenResourceError")]
    assert trio.current_time() < 1


# -- many streams at once --------------------------------------------------------------------------


async def test_many_concurrent_streams(autojump_clock: trio.testing.MockClock) -> None:
    async with setup(exec_request("cat")) as (fake, kubelet):
        clients = [await open_client(kubelet, f"/exec/default/web/app?n={i}") for i in range(100)]
        await eventually(lambda: fake.active == 100 and kubelet.in_flight == 100)
        async with trio.open_nursery() as nursery:
            for i, client in enumerate(clients):
                nursery.start_soon(client.run)
                await client.send(ch.STDIN, b"%d" % i)
                await client.close_channel(ch.STDIN)
        assert [c.text(ch.STDOUT) for c in clients] == [str(i) for i in range(100)]
        assert all(c.status() == ch.success_status() for c in clients)
        await eventually(lambda: kubelet.in_flight == 0 and fake.active == 0)


def test_status_json_is_what_kubectl_decodes() -> None:
    assert json.loads(json.dumps(ch.exit_status(0, []))) == {"metadata": {}, "status": "Success"}
