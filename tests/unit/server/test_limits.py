"""The server's limits on a fake clock: header deadline, idle timeout, connection bound,
descriptor reserve, quiet accept errors, the open-files limit, the raw-stream takeover.

In-process servers on 127.0.0.1 (ephemeral ports) with ``autojump_clock``: loopback I/O
between tasks of the same run is instantaneous, so the clock jumps only when every task
waits on time.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import resource
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import h11
import pytest
import trio
import trio.testing

from kubelet.boundedio import inline
from kubelet.logs.fields import record_fields
from kubelet.process import apply_open_files_limit, raise_open_files_limit
from kubelet.server.accept import AcceptLoop
from kubelet.server.asgi import Receive, Scope, Send
from kubelet.server.fdlimits import Descriptors, default_reserve
from kubelet.server.healthz import HealthzApp
from kubelet.server.limits import Limits
from kubelet.server.memtrim import MemoryTrim
from kubelet.server.servers import bind, serve_socket
from kubelet.testing import H2Client

PLENTY = Descriptors(reserve=0, limit=lambda: 1_000_000, count=lambda: 10)


@asynccontextmanager
async def served(
    app: Any = None,
    limits: Limits | None = None,
    descriptors: Descriptors | None = None,
) -> AsyncIterator[int]:
    """A server for ``app`` (HealthzApp by default) on an ephemeral port; yields the port."""
    sock = bind("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            serve_socket, app or HealthzApp(), sock, None, limits or Limits(), descriptors or PLENTY
        )
        yield port
        nursery.cancel_scope.cancel()


async def connect(port: int) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", port)


async def closed_by_server(stream: trio.SocketStream) -> bool:
    """Read until EOF; True when the server closed (not an error of ours)."""
    try:
        while await stream.receive_some(65536):
            pass
    except trio.BrokenResourceError:
        pass
    return True


async def get(stream: trio.abc.Stream, path: str = "/healthz") -> tuple[int, bytes]:
    """One HTTP/1.1 GET over ``stream`` (kept open); status and body."""
    client = h11.Connection(h11.CLIENT)
    request = h11.Request(method="GET", target=path, headers=[("Host", "x")])
    await stream.send_all(client.send(request) + client.send(h11.EndOfMessage()))
    status, body = 0, b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return status, body
        else:
            raise AssertionError(event)


# -- header deadline and idle timeout ----------------------------------------------------------


async def test_silent_connection_closed_at_the_header_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with served() as port:
        stream = await connect(port)
        t0 = trio.current_time()
        assert await closed_by_server(stream)
        assert 32.0 <= trio.current_time() - t0 < 33.0


async def test_dribbling_headers_do_not_extend_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with served() as port:
        stream = await connect(port)
        t0 = trio.current_time()
        closed_at: list[float] = []

        async def dribble() -> None:
            try:
                for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000:
                    await stream.send_all(bytes([byte]))
                    await trio.sleep(1)
            except trio.BrokenResourceError:
                pass

        async def watch() -> None:
            await closed_by_server(stream)
            closed_at.append(trio.current_time() - t0)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            nursery.start_soon(dribble)
        assert 32.0 <= closed_at[0] < 33.0


async def test_http2_preface_must_arrive_in_time(autojump_clock: trio.testing.MockClock) -> None:
    async with served() as port:
        stream = await connect(port)
        await stream.send_all(b"PRI * HTTP/2.0\r\n")  # half a preface, then nothing
        t0 = trio.current_time()
        assert await closed_by_server(stream)
        assert 32.0 <= trio.current_time() - t0 < 33.0


async def test_keep_alive_idle_timeout(autojump_clock: trio.testing.MockClock) -> None:
    async with served() as port:
        stream = await connect(port)
        await trio.sleep(20)
        assert await get(stream) == (200, b"ok")
        await trio.sleep(80)  # idle, but within 90 s: still served
        assert await get(stream) == (200, b"ok")
        t0 = trio.current_time()
        assert await closed_by_server(stream)
        assert 90.0 <= trio.current_time() - t0 < 91.0


async def test_http2_idle_connection_gets_goaway(autojump_clock: trio.testing.MockClock) -> None:
    async with served() as port:
        client = await H2Client.connect("127.0.0.1", port)
        response = await client.request("GET", "/healthz")
        assert (response.status, response.body) == (200, b"ok")
        t0 = trio.current_time()
        while client.terminated is None and not client.closed:
            await client._pump({})
        assert client.terminated is not None and client.terminated.error_code == 0
        assert 90.0 <= trio.current_time() - t0 < 91.0


# -- the connection bound ------------------------------------------------------------------


async def test_connections_beyond_the_bound_wait_in_the_backlog(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kubelet.server.accept")
    async with served(limits=Limits(max_connections=2)) as port:
        idle = [await connect(port), await connect(port)]
        await trio.sleep(1)
        waiting = await connect(port)  # the kernel completes it; the server does not accept it
        answered: list[float] = []

        async def ask() -> None:
            assert await get(waiting) == (200, b"ok")
            answered.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.sleep(5)
            assert answered == []
            t0 = trio.current_time()
            await idle[0].aclose()
        assert answered[0] - t0 < 0.5
        for stream in idle[1:]:
            await stream.aclose()
        await waiting.aclose()
        await trio.sleep(1)
    messages = [r.getMessage() for r in caplog.records]
    assert (
        messages.count("connection limit reached; new connections wait in the listen backlog") == 1
    )
    assert messages.count("accepting connections again") == 1


async def test_idle_keep_alive_connections_make_room_for_a_waiting_client(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request a minute kept a slot for good (the idle clock restarts with each one);
    at the bound, the connection idle the longest now goes for a client that waits."""
    async with served(limits=Limits(max_connections=2)) as port:
        first = await connect(port)
        assert await get(first) == (200, b"ok")
        await trio.sleep(1)
        second = await H2Client.connect("127.0.0.1", port)
        assert (await second.request("GET", "/healthz")).status == 200
        await trio.sleep(1)
        t0 = trio.current_time()
        third = await connect(port)
        with trio.fail_after(30):
            assert await get(third) == (200, b"ok")
        assert trio.current_time() - t0 < 0.5
        assert await closed_by_server(first)  # idle the longest: closed, as after 90 s
        # next the HTTP/2 one, with a GOAWAY (its client does not close: 1 s later)
        fourth = await connect(port)
        with trio.fail_after(30):
            assert await get(fourth) == (200, b"ok")
        while second.terminated is None and not second.closed:
            await second._pump({})
        assert second.terminated is not None and second.terminated.error_code == 0
        assert await get(third) == (200, b"ok")  # one closed for each client, no more
        for stream in (third, fourth):
            await stream.aclose()


async def test_http1_response_nobody_reads_frees_the_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    finished: list[float] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        body = b"x" * (32 << 20)  # more than the kernel buffers of both ends
        headers = [(b"content-length", str(len(body)).encode())]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        finally:  # cancelled when the client took nothing for 10 s
            finished.append(trio.current_time())

    async with served(app, Limits(send_timeout=10)) as port:
        stream = await connect(port)
        await stream.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        t0 = trio.current_time()
        with trio.fail_after(60):
            while not finished:
                await trio.sleep(1)
        assert 10 <= finished[0] - t0 < 11
        assert await closed_by_server(stream)


# -- the descriptor reserve and accept errors --------------------------------------------------


async def test_accept_pauses_while_descriptors_are_short(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kubelet.server.accept")
    in_use = [50]
    descriptors = Descriptors(reserve=20, limit=lambda: 100, count=lambda: in_use[0])
    async with served(descriptors=descriptors) as port:
        stream = await connect(port)
        assert await get(stream) == (200, b"ok")
        in_use[0] = 90  # the rest of the kubelet took descriptors: 10 free, reserve 20
        await trio.sleep(1)
        later = await connect(port)
        with trio.move_on_after(30) as waited:
            await get(later)
        assert waited.cancelled_caught  # not accepted while short
        in_use[0] = 60
        with trio.fail_after(1):
            assert await get(later) == (200, b"ok")
        assert await get(stream) == (200, b"ok")  # open connections were served throughout
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("accept paused: too many open files") == 1
    assert messages.count("accept resumed") == 1


class FailingListener(trio.abc.Listener[trio.SocketStream]):
    """A real listener whose next ``failures`` accepts fail with EMFILE."""

    def __init__(self, sock: trio.socket.SocketType, failures: int) -> None:
        self.listener = trio.SocketListener(sock)
        self.socket = sock
        self.failures = failures

    async def accept(self) -> trio.SocketStream:
        if self.failures:
            self.failures -= 1
            await trio.lowlevel.checkpoint()
            raise OSError(errno.EMFILE, "Too many open files")
        return await self.listener.accept()

    async def aclose(self) -> None:
        await self.listener.aclose()


async def test_accept_errors_are_logged_once_per_state_change(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sock = bind("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    listener = FailingListener(trio.socket.from_stdlib_socket(sock), failures=200)
    served_at: list[float] = []

    async def handler(stream: trio.SocketStream) -> None:
        served_at.append(trio.current_time())

    loop = AcceptLoop(listener, handler, name="test", max_connections=10, descriptors=PLENTY)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop.run)
        t0 = trio.current_time()
        client = await connect(port)
        with trio.fail_after(120):
            while not served_at:
                await trio.sleep(0.1)
        await client.aclose()
        nursery.cancel_scope.cancel()
    assert served_at[0] - t0 < 100  # retried with a capped back-off (0.5 s), not given up
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert lines == ["accept paused: too many open files", "accept resumed"]
    paused = next(r for r in caplog.records if r.getMessage().startswith("accept paused"))
    assert "EMFILE" in record_fields(paused)["reason"]


def test_descriptors_count_again_only_when_stale() -> None:
    counts = iter([10, 500])
    descriptors = Descriptors(reserve=8, limit=lambda: 100, count=lambda: next(counts))
    assert descriptors.free(0.0) == 90
    descriptors.opened()
    descriptors.opened()
    assert descriptors.free(0.1) == 88  # our own connections, between counts
    assert not descriptors.short(0.2)
    descriptors.closed()
    assert descriptors.short(0.3)  # counted again: 500 in use
    assert descriptors.free(0.4) == -400


# -- the open-files limit ------------------------------------------------------------------


def test_soft_open_files_limit_raised_to_the_hard_limit() -> None:
    calls: list[tuple[int, tuple[int, int]]] = []

    def getrlimit(which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return (1024, 524288)

    def setrlimit(which: int, limits: tuple[int, int]) -> None:
        calls.append((which, limits))

    assert raise_open_files_limit(getrlimit, setrlimit) == 524288
    assert calls == [(resource.RLIMIT_NOFILE, (524288, 524288))]


def test_open_files_limit_refused_or_already_raised() -> None:
    def refuse(which: int, limits: tuple[int, int]) -> None:
        raise ValueError("not allowed to raise maximum limit")

    infinite = resource.RLIM_INFINITY
    assert raise_open_files_limit(lambda _: (1024, infinite), refuse) == 1024
    untouched: list[Any] = []
    assert raise_open_files_limit(lambda _: (4096, 4096), lambda *a: untouched.append(a)) == 4096
    assert untouched == []


class _Limits:
    """RLIMIT_NOFILE as a process without CAP_SYS_RESOURCE sees it."""

    def __init__(self, soft: int, hard: int, may_raise_hard: bool) -> None:
        self.soft, self.hard, self.may_raise_hard = soft, hard, may_raise_hard

    def get(self, which: int) -> tuple[int, int]:
        return (self.soft, self.hard)

    def set(self, which: int, limits: tuple[int, int]) -> None:
        if limits[1] > self.hard and not self.may_raise_hard:
            raise ValueError("not allowed to raise maximum limit")
        self.soft, self.hard = limits


def test_max_open_files_becomes_both_limits_as_upstream() -> None:
    limits = _Limits(1024, 1 << 20, may_raise_hard=False)
    assert apply_open_files_limit(1000000, limits.get, limits.set) == 1000000
    assert (limits.soft, limits.hard) == (1000000, 1000000)


def test_max_open_files_refused_keeps_the_raised_soft_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limits = _Limits(1024, 20000, may_raise_hard=False)
    assert apply_open_files_limit(1000000, limits.get, limits.set) == 20000
    assert (limits.soft, limits.hard) == (20000, 20000)
    assert any("Failed to set rlimit on max file handles" in r.getMessage() for r in caplog.records)


def test_reserve_is_a_share_of_the_limit() -> None:
    assert [default_reserve(n) for n in (100, 256, 1024, 20000, 1 << 20)] == [
        25,
        64,
        128,
        2000,
        104857,
    ]


def test_connection_bound_is_a_share_of_the_limit() -> None:
    assert Limits.for_descriptors(1024).max_connections == 128
    assert Limits.for_descriptors(8000).max_connections == 1000
    assert Limits.for_descriptors(1 << 20).max_connections == 2048
    assert Limits.for_descriptors(64).max_connections == 16


# -- the raw-stream takeover (where exec/attach/port-forward proxies plug in) ------------------


def echo_upgrade_app() -> Callable[[Scope, Receive, Send], Any]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        takeover = scope["extensions"].get("kubelet.takeover")
        if takeover is None or scope["path"] == "/refuse":
            body = b"no takeover" if takeover is None else b"refused"
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", str(len(body)).encode())]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})
            return
        stream, buffered = await takeover()
        await stream.send_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\n\r\n")
        await stream.send_all(b"echo:" + buffered)
        while data := await stream.receive_some(65536):
            await stream.send_all(b"echo:" + data)

    return app


async def test_upgrade_requests_can_take_over_the_raw_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with served(echo_upgrade_app()) as port:
        plain = await connect(port)
        assert await get(plain, "/x") == (200, b"no takeover")
        # an upgrade the handler answers itself (a 401, say): the connection stays HTTP/1.1
        await plain.send_all(b"GET /refuse HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
                             b"Upgrade: echo\r\n\r\n")  # fmt: skip
        answer = b""
        while not answer.endswith(b"refused"):
            answer += await plain.receive_some(65536)
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert await get(plain, "/x") == (200, b"no takeover")
        stream = await connect(port)
        head = (
            b"GET /exec/ns/pod/c HTTP/1.1\r\nHost: x\r\n"
            b"Connection: Upgrade\r\nUpgrade: echo\r\n\r\n"
        )
        await stream.send_all(head + b"early")
        received = b""
        while b"echo:early" not in received:
            received += await stream.receive_some(65536)
        assert received.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
        await stream.send_all(b"more")
        assert await stream.receive_some(65536) == b"echo:more"
        await stream.aclose()


# -- HTTP/2: a client that resets its stream stops a streaming response ------------------------


async def test_http2_reset_stops_the_stream(autojump_clock: trio.testing.MockClock) -> None:
    stopped = trio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] == "/healthz":
            await HealthzApp()(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})

        async def produce() -> None:
            while True:
                await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
                await trio.sleep(1)

        try:  # the reset cancels the handler (or it sees http.disconnect first)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(produce)
                while (await receive())["type"] != "http.disconnect":
                    pass
                nursery.cancel_scope.cancel()
        finally:
            stopped.set()

    async with served(app) as port:
        client = await H2Client.connect("127.0.0.1", port)
        stream_id = client.conn.get_next_available_stream_id()
        client.conn.send_headers(
            stream_id,
            [(":method", "GET"), (":path", "/follow"), (":scheme", "http"), (":authority", "x")],
            end_stream=True,
        )
        await client._flush()
        await trio.sleep(3.5)
        client.conn.reset_stream(stream_id)
        await client._flush()
        with trio.fail_after(1):
            await stopped.wait()
        response = await client.request("GET", "/healthz")  # the connection goes on
        assert response.status == 200


async def test_http2_streams_count_until_their_handler_returns(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """h2 forgets a stream the client reset; its handler may still run: a request beyond
    the bound is refused (REFUSED_STREAM) until handlers returned, not started."""
    running, most = [0], [0]

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] == "/healthz":
            await HealthzApp()(scope, receive, send)
            return
        running[0] += 1
        most[0] = max(most[0], running[0])
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(5)  # slow to stop
            running[0] -= 1

    async with served(app, Limits(max_streams=4)) as port:
        client = await H2Client.connect("127.0.0.1", port)
        ids = []
        head = [(":method", "GET"), (":path", "/slow"), (":scheme", "http"), (":authority", "x")]
        for _ in range(4):
            ids.append(client.conn.get_next_available_stream_id())
            client.conn.send_headers(ids[-1], head, end_stream=True)
        await client._flush()
        await trio.sleep(1)
        assert running[0] == 4
        for stream_id in ids:
            client.conn.reset_stream(stream_id)
        await client._flush()
        await trio.sleep(1)
        refused = await client.request("GET", "/healthz")
        assert (refused.status, refused.reset_code) == (0, 7)  # REFUSED_STREAM
        await trio.sleep(5)
        assert running[0] == 0
        assert (await client.request("GET", "/healthz")).status == 200
        assert most[0] == 4


# -- memory after a burst ------------------------------------------------------------------


async def test_heap_trimmed_after_a_burst_of_connections(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trims: list[tuple[float, int]] = []
    memory = MemoryTrim(
        burst=32,
        trim=lambda: trims.append((trio.current_time(), memory.open)),
        collect=lambda generation: None,
        trim_io=inline,
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(memory.run)
        for _ in range(10):  # little traffic: never
            memory.opened()
            memory.closed()
        await trio.sleep(10)
        assert trims == []
        t0 = trio.current_time()
        for _ in range(200):  # a burst: once it is over, once
            memory.opened()
        await trio.sleep(5)
        assert trims == []  # still busy
        for _ in range(200):
            memory.closed()
        await trio.sleep(10)
        assert [(round(t - t0), n) for t, n in trims] == [(6, 0)]
        for _ in range(100):  # one at a time, as garbage TLS comes
            memory.opened()
            memory.closed()
            await trio.sleep(0.01)
        await trio.sleep(10)
        assert len(trims) == 2
        nursery.cancel_scope.cancel()


async def test_a_burst_is_collected_young_generations_first_the_old_one_when_promoted_to(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A full collection walks everything the kubelet made since start-up: it runs in a
    step of its own, and only when the collector moved objects to the old generation
    since the last one (a burst's garbage is otherwise all young)."""
    steps: list[list[int]] = []
    middle = [0]  # collections of the middle generation since the last full one

    def collect(generation: int) -> None:
        middle[0] = 0 if generation == 2 else middle[0] + (generation == 1)
        steps[-1].append(generation)

    memory = MemoryTrim(burst=2, delay=1, trim=None, collect=collect, promotions=lambda: middle[0])

    class Steps(trio.abc.Instrument):
        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            steps.append([])

    async def burst() -> list[int]:
        for _ in range(2):
            memory.opened()
            memory.closed()
        trims = memory.trims
        while memory.trims == trims:
            await trio.sleep(0.5)
        return [g for step in steps for g in step]

    trio.lowlevel.add_instrument(Steps())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(memory.run)
        assert await burst() == [0, 1]  # nothing promoted since start-up: young only
        steps.clear()
        assert await burst() == [0, 1]  # its own collection of the middle one not counted
        steps.clear()
        middle[0] += 1  # the collector's own collection of the middle generation
        assert await burst() == [0, 1, 2]
        assert [s for s in steps if s] == [[0], [1], [2]]  # one generation per step
        steps.clear()
        assert await burst() == [0, 1]
        nursery.cancel_scope.cancel()


async def test_heap_trimmed_in_a_worker_thread() -> None:
    """glibc's trim walks the whole heap: not on the event loop."""
    trimmed_in: list[int] = []
    memory = MemoryTrim(burst=2, delay=0, trim=lambda: trimmed_in.append(threading.get_ident()))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(memory.run)
            for _ in range(2):
                memory.opened()
                memory.closed()
            while memory.trims == 0:
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    assert trimmed_in and threading.get_ident() not in trimmed_in


async def test_absolute_form_request_target(autojump_clock: trio.testing.MockClock) -> None:
    async with served() as port:
        stream = await connect(port)
        await stream.send_all(b"GET http://node:10248/healthz HTTP/1.1\r\nHost: node\r\n\r\n")
        data = b""
        while not data.endswith(b"ok"):
            data += await stream.receive_some(65536)
        assert data.startswith(b"HTTP/1.1 200 ")


async def test_header_bytes_up_to_one_mebibyte(autojump_clock: trio.testing.MockClock) -> None:
    async def ask(extra: int, head: bytes = b"") -> bytes:
        stream = await connect(port)
        head = head or b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * extra + b"\r\n\r\n"
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(head)
        data = b""
        with contextlib.suppress(trio.BrokenResourceError):
            while chunk := await stream.receive_some(65536):
                data += chunk
                if data.endswith(b"ok"):
                    break
        await stream.aclose()
        return data

    async with served() as port:
        assert (await ask(1000 * 1024)).startswith(b"HTTP/1.1 200 ")
        refused = await ask(1100 * 1024)
        assert refused.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
        assert refused.endswith(b"\r\n\r\n431 Request Header Fields Too Large")
        garbage = await ask(0, b"\x16\x03\x01 not HTTP at all\r\n\r\n")
        assert garbage.startswith(b"HTTP/1.1 400 Bad Request\r\n")
        client = await H2Client.connect("127.0.0.1", port)
        encode = client.conn.encoder.encode  # hpack's Huffman coder is quadratic: plain
        client.conn.encoder.encode = lambda headers, huffman=True: encode(headers, huffman=False)
        r = await client.request("GET", "/healthz", headers=[("x-big", "a" * (1000 * 1024))])
        assert (r.status, r.body) == (200, b"ok")


async def test_handler_failure_is_a_500_and_the_connection_goes_on(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] == "/boom":
            raise ValueError("handler bug")
        if scope["path"] == "/half":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"par", "more_body": True})
            raise ValueError("handler bug mid-body")
        await HealthzApp()(scope, receive, send)

    async with served(app) as port:
        client = await H2Client.connect("127.0.0.1", port)
        assert (await client.request("GET", "/boom")).status == 500
        half = await client.request("GET", "/half")
        assert (half.status, half.body, half.reset_code) == (200, b"par", 2)  # INTERNAL_ERROR
        assert (await client.request("GET", "/healthz")).body == b"ok"
        stream = await connect(port)
        assert await get(stream, "/boom") == (500, b"")
    failures = [r for r in caplog.records if r.getMessage() == "request handler failed"]
    assert len(failures) == 3
