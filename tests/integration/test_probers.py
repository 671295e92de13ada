"""Probers and hooks against real endpoints: FakeRuntime ExecSync, local HTTP/TCP servers
and a grpclib health server on 127.0.0.1 (ephemeral ports), all in this process."""

from __future__ import annotations

import contextlib
import functools
import gzip
import math
import random
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio_asyncio
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.health.v1.health_grpc import HealthBase
from grpclib.health.v1.health_pb2 import HealthCheckResponse
from grpclib.server import Server

from kubelet.api import (
    Container,
    ContainerPort,
    ExecAction,
    HTTPGetAction,
    LifecycleHandler,
    ObjectMeta,
    Pod,
    PodSpec,
    Probe,
    TCPSocketAction,
)
from kubelet.api.pod import GRPCAction, HTTPHeader
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    ImageClient,
    RuntimeClient,
    RuntimePodStatus,
    SandboxInfo,
    SandboxState,
)
from kubelet.handlers import HttpGetter, ProbeOutcome, ProbeTarget
from kubelet.handlers import grpc as grpc_probe
from kubelet.handlers import tcp as tcp_probe
from kubelet.prober import ActionProber, ProbeError, ProbeKind, ProbeResult, ProberManager, Result
from kubelet.runtime.hooks import run_handler
from kubelet.testing import ExecResult, FakeRuntime, TestCA

from .helpers import container_config, sandbox_config

EPOCH = 1_800_000_000.0
Clients = tuple[RuntimeClient, ImageClient]
LIVE = ProbeKind.LIVENESS


class NoJitter(random.Random):
    def random(self) -> float:
        return 0.0


def pod_with(container: Container, uid: str = "uid-1") -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid=uid),
        spec=PodSpec(containers=(container,)),
    )


def target(container: Container, cid: str = "c1", ip: str = "127.0.0.1") -> ProbeTarget:
    return ProbeTarget(pod_with(container), container, cid, ip)


@contextlib.asynccontextmanager
async def action_prober(runtime: RuntimeClient | None = None) -> AsyncIterator[ActionProber]:
    yield ActionProber(runtime)


# -- exec through FakeRuntime ---------------------------------------------------------------------


async def start_container(runtime: RuntimeClient, name: str = "app") -> str:
    config = sandbox_config()
    sandbox = await runtime.run_pod_sandbox(config)
    cid = await runtime.create_container(sandbox, container_config(name), config)
    await runtime.start_container(cid)
    return cid


def exec_probe(*cmd: str, timeout: int = 1, **kw: Any) -> Probe:
    return attrs.evolve(Probe(exec=ExecAction(command=cmd), timeout_seconds=timeout), **kw)


async def test_exec_probes_through_execsync(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    cid = await start_container(runtime)
    fake.script_exec(ExecResult(exit_code=0, stdout=b"ok"), cmd=["healthy"])
    fake.script_exec(ExecResult(exit_code=1, stdout=b"not ", stderr=b"yet"), cmd=["sick"])
    fake.script_exec(ExecResult(takes=5), cmd=["slow"])
    app = Container(name="app")
    async with action_prober(runtime) as prober:
        ok = await prober(LIVE, exec_probe("healthy"), target(app, cid))
        assert ok == ProbeOutcome(ProbeResult.SUCCESS, "ok")
        sick = await prober(LIVE, exec_probe("sick"), target(app, cid))
        assert sick == ProbeOutcome(ProbeResult.FAILURE, "not yet")

        start = trio.current_time()
        slow = await prober(LIVE, exec_probe("slow", "-v", timeout=2), target(app, cid))
        assert slow == ProbeOutcome(ProbeResult.FAILURE, 'command "slow -v" timed out')
        assert trio.current_time() - start == 2
        assert fake.calls_of("ExecSync")[-1].args["timeout"] == 2

        fake.exit_container(cid, 0)
        with pytest.raises(ProbeError, match="rpc error: code = Unknown desc = failed to exec"):
            await prober(LIVE, exec_probe("healthy"), target(app, cid))


async def test_manager_kills_nothing_but_reports_liveness_failure(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    """The whole path: a worker, ExecSync on FakeRuntime, thresholds, the update stream."""
    runtime, _ = clients
    cid = await start_container(runtime)
    fake.script_exec(ExecResult(exit_code=1, stdout=b"dead"), cmd=["check"])
    events: list[str] = []
    container = Container(name="app", liveness_probe=exec_probe("check", period_seconds=5))
    pod = pod_with(container)
    status = RuntimePodStatus(
        uid="uid-1",
        sandboxes=(SandboxInfo(id="s", state=SandboxState.READY, ip="10.88.0.2"),),
        containers=(
            ContainerInfo(
                id=cid,
                name="app",
                state=ContainerRunState.RUNNING,
                started_at=fake.containers[cid].started_at,
            ),
        ),
    )
    m = ProberManager(
        runtime,
        wall_clock=lambda: EPOCH + trio.current_time(),
        rng=NoJitter(),
        on_event=lambda p, c, t, r, msg: events.append(msg),
    )
    t0 = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        m.update_pod_status(pod.uid, status)
        m.add_pod(pod)
        updates = []
        with trio.fail_after(60):
            async for update in m.liveness_results.updates:
                updates.append((trio.current_time() - t0, update.result))
                if update.result is Result.FAILURE:
                    break
        assert updates == [(0, Result.SUCCESS), (10, Result.FAILURE)]
        assert m.liveness_failed(status) == {cid}
        assert events == ["Liveness probe failed: dead"] * 3
        assert len(fake.calls_of("ExecSync")) == 3
        nursery.cancel_scope.cancel()


# -- a tiny HTTP server -------------------------------------------------------------------------


@attrs.define
class Seen:
    path: str
    headers: dict[str, str]


Handler = Callable[[str, dict[str, str], int], Awaitable[tuple[int, dict[str, str], bytes]]]


async def routes(
    path: str, headers: dict[str, str], port: int
) -> tuple[int, dict[str, str], bytes]:
    if path == "/ok":
        return 200, {}, b"fine"
    if path == "/fail":
        return 503, {}, b"down"
    if path == "/same-host":
        return 302, {"Location": "/ok"}, b""
    if path == "/other-host":
        return 301, {"Location": f"http://127.0.0.2:{port}/ok"}, b"elsewhere"
    if path.startswith("/loop/"):
        n = int(path.rsplit("/", 1)[1])
        return 302, {"Location": f"/loop/{n + 1}"}, b""
    if path == "/big":
        return 200, {}, b"x" * (1 << 20)
    if path == "/no-length":  # HTTP/1.0 style: the body ends when the connection does
        return 200, {"Content-Length": ""}, b"fine till the end"
    if path == "/cut-short":
        return 200, {"Content-Length": "100"}, b"only ten."
    if path == "/to-ftp":
        return 302, {"Location": "ftp://127.0.0.1/file"}, b""
    if path == "/bad-port":
        return 302, {"Location": "http://127.0.0.1:99999/"}, b""
    if path == "/gzip":
        if "gzip" not in headers.get("accept-encoding", ""):
            return 200, {}, b"plain"
        return 200, {"Content-Encoding": "gzip"}, gzip.compress(b"fine" * 5000)
    if path == "/slow":
        await trio.sleep_forever()
    return 404, {}, b"no such page"


@attrs.define
class HttpServer:
    port: int = 0
    seen: list[Seen] = attrs.field(factory=list)

    async def handle(self, stream: trio.abc.Stream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
                if not data[:1].isalpha():  # a TLS handshake, as a plain HTTP server sees it
                    await stream.send_all(b"HTTP/1.0 400 Bad Request\r\n\r\n")
                    return
            head = data.split(b"\r\n\r\n", 1)[0].decode()
            request_line, *lines = head.split("\r\n")
            path = request_line.split(" ")[1]
            headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines)}
            self.seen.append(Seen(path, headers))
            code, extra, body = await routes(path, headers, self.port)
            fields = {"Content-Length": str(len(body)), **extra}
            fields = {k: v for k, v in fields.items() if v}  # "": leave the header out
            head_out = f"HTTP/1.1 {code} X\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in fields.items()
            )
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(head_out.encode() + b"\r\n" + body)


@contextlib.asynccontextmanager
async def http_server(tls: ssl.SSLContext | None = None) -> AsyncIterator[HttpServer]:
    server = HttpServer()
    async with trio.open_nursery() as nursery:
        if tls is None:
            serve = functools.partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1")
            listeners = await nursery.start(serve)
            server.port = listeners[0].socket.getsockname()[1]
        else:
            # like most servers: no TLS close_notify before closing
            serve = functools.partial(
                trio.serve_ssl_over_tcp,
                server.handle,
                0,
                tls,
                host="127.0.0.1",
                https_compatible=True,
            )
            listeners = await nursery.start(serve)
            server.port = listeners[0].transport_listener.socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


def http_probe(path: str, port: int | str, **kw: Any) -> Probe:
    headers = kw.pop("headers", ())
    return Probe(http_get=HTTPGetAction(port=port, path=path, http_headers=headers), **kw)


async def test_http_probes(autojump_clock: trio.abc.Clock) -> None:
    async with http_server() as server, action_prober() as prober:
        app = Container(name="app", ports=(ContainerPort(container_port=server.port, name="web"),))
        t = target(app)

        async def run(path: str, **kw: Any) -> ProbeOutcome:
            return await prober(LIVE, http_probe(path, "web", **kw), t)

        assert await run("/ok") == ProbeOutcome(ProbeResult.SUCCESS, "fine")
        assert await run("/fail") == ProbeOutcome(
            ProbeResult.FAILURE, "HTTP probe failed with statuscode: 503"
        )
        # same host: followed; another host: not followed, a warning
        assert await run("/same-host") == ProbeOutcome(ProbeResult.SUCCESS, "fine")
        assert await run("/other-host") == ProbeOutcome(
            ProbeResult.WARNING, "Probe terminated redirects, Response body: elsewhere"
        )
        assert [s.path for s in server.seen[-3:]] == ["/same-host", "/ok", "/other-host"]
        # at most ten redirects
        looped = await run("/loop/0")
        assert looped.result is ProbeResult.FAILURE
        # Go sends 10 requests and names the 10th answer's Location as it came
        assert looped.output == 'Get "/loop/10": stopped after 10 redirects'
        assert server.seen[-1].path == "/loop/9"
        # a big body is cut at 10 KiB without an error
        big = await run("/big")
        assert big.result is ProbeResult.SUCCESS and len(big.output) == 10 * 1024
        # a server that never answers: the probe's timeout
        start = trio.current_time()
        slow = await run("/slow", timeout_seconds=2)
        assert trio.current_time() - start == pytest.approx(2)
        assert slow == ProbeOutcome(
            ProbeResult.FAILURE,
            f'Get "http://127.0.0.1:{server.port}/slow": context deadline exceeded '
            "(Client.Timeout exceeded while awaiting headers)",
        )


async def test_http_probe_headers(autojump_clock: trio.abc.Clock) -> None:
    async with http_server() as server, action_prober() as prober:
        app = Container(name="app")
        await prober(LIVE, http_probe("/ok?x=1", server.port), target(app))
        seen = server.seen[-1]
        assert seen.path == "/ok?x=1"
        assert seen.headers["user-agent"] == "kube-probe/1.36"
        assert seen.headers["accept"] == "*/*"
        assert seen.headers["host"] == f"127.0.0.1:{server.port}"
        assert seen.headers["connection"] == "close"
        custom = (
            HTTPHeader(name="Host", value="virtual.test"),
            HTTPHeader(name="Accept", value=""),
            HTTPHeader(name="X-Token", value="t"),
        )
        await prober(LIVE, http_probe("/ok", server.port, headers=custom), target(app))
        seen = server.seen[-1]
        assert seen.headers["host"] == "virtual.test"
        assert seen.headers["x-token"] == "t"
        assert "accept" not in seen.headers


async def test_http_probe_failures_never_escape_as_errors(autojump_clock: trio.abc.Clock) -> None:
    async with http_server() as server, action_prober() as prober:
        app = Container(name="app")

        async def run(path: str, **kw: Any) -> ProbeOutcome:
            return await prober(LIVE, http_probe(path, server.port, **kw), target(app))

        assert await run("/to-ftp") == ProbeOutcome(
            ProbeResult.FAILURE, 'Get "ftp://127.0.0.1/file": unsupported protocol scheme "ftp"'
        )
        bad_port = await run("/bad-port")
        assert bad_port.result is ProbeResult.FAILURE
        assert bad_port.output.startswith('Get "http://127.0.0.1:99999/": ')
        # a body cut short: an error (the result is unknown, retried, then thrown away)
        with pytest.raises(ProbeError, match="unexpected EOF"):
            await run("/cut-short")
        assert (await run("/no-length")).output == "fine till the end"
        bad_header = await run("/ok", headers=(HTTPHeader(name="X-Bad", value="a\r\nb"),))
        assert bad_header.result is ProbeResult.FAILURE
        assert bad_header.output.startswith(f'Get "http://127.0.0.1:{server.port}/ok": ')


async def test_http_probe_undoes_the_gzip_it_asked_for(autojump_clock: trio.abc.Clock) -> None:
    async with http_server() as server, action_prober() as prober:
        app = Container(name="app")
        asked = await prober(LIVE, http_probe("/gzip", server.port), target(app))
        assert server.seen[-1].headers["accept-encoding"] == "gzip"
        # inflated, and cut at 10 KiB of the inflated body
        assert asked == ProbeOutcome(ProbeResult.SUCCESS, ("fine" * 5000)[: 10 * 1024])
        # the action asked for gzip itself: the body is passed on as it came (as Go does)
        own = (HTTPHeader(name="Accept-Encoding", value="gzip"),)
        raw = await prober(LIVE, http_probe("/gzip", server.port, headers=own), target(app))
        assert raw.result is ProbeResult.SUCCESS
        assert raw.output.encode("utf-8", "replace")[:2] != b"fi"


async def test_https_probe_does_not_verify_the_certificate(
    autojump_clock: trio.abc.Clock, tmp_path: Path
) -> None:
    ca = TestCA(tmp_path)
    tls = ca.server_context(ca.issue("server", "pod", hosts=["pod.invalid"], server=True))
    async with http_server(tls) as server, action_prober() as prober:
        app = Container(name="app")
        spec = Probe(http_get=HTTPGetAction(port=server.port, path="/ok", scheme="HTTPS"))
        assert await prober(LIVE, spec, target(app)) == ProbeOutcome(ProbeResult.SUCCESS, "fine")
        assert server.seen[-1].headers["host"] == f"127.0.0.1:{server.port}"
        # a body that ends with the connection, without close_notify: fine, as in Go
        spec = Probe(http_get=HTTPGetAction(port=server.port, path="/no-length", scheme="HTTPS"))
        assert await prober(LIVE, spec, target(app)) == ProbeOutcome(
            ProbeResult.SUCCESS, "fine till the end"
        )
    # HTTPS against a plain HTTP server: Go's words
    async with http_server() as server, action_prober() as prober:
        spec = Probe(http_get=HTTPGetAction(port=server.port, path="/ok", scheme="HTTPS"))
        outcome = await prober(LIVE, spec, target(app))
        assert outcome == ProbeOutcome(
            ProbeResult.FAILURE,
            f'Get "https://127.0.0.1:{server.port}/ok": '
            "http: server gave HTTP response to HTTPS client",
        )


async def test_http_connection_refused(autojump_clock: trio.abc.Clock) -> None:
    port = await closed_port()
    async with action_prober() as prober:
        outcome = await prober(LIVE, http_probe("/healthz", port), target(Container(name="a")))
    assert outcome == ProbeOutcome(
        ProbeResult.FAILURE,
        f'Get "http://127.0.0.1:{port}/healthz": dial tcp 127.0.0.1:{port}: '
        "connect: connection refused",
    )


async def closed_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    return port


# -- TCP ----------------------------------------------------------------------------------------


async def test_tcp_probes(autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    async with http_server() as server, action_prober() as prober:
        app = Container(name="app", ports=(ContainerPort(container_port=server.port, name="p"),))
        spec = Probe(tcp_socket=TCPSocketAction(port="p"))
        assert await prober(LIVE, spec, target(app)) == ProbeOutcome(ProbeResult.SUCCESS)
        port = await closed_port()
        refused = await prober(LIVE, Probe(tcp_socket=TCPSocketAction(port=port)), target(app))
        assert refused == ProbeOutcome(
            ProbeResult.FAILURE, f"dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
        # an explicit host wins over the pod IP
        explicit = Probe(tcp_socket=TCPSocketAction(port=server.port, host="127.0.0.1"))
        outcome = await prober(LIVE, explicit, target(app, ip="10.255.255.1"))
        assert outcome.result is ProbeResult.SUCCESS

    async def never(host: str, port: int) -> None:
        await trio.sleep_forever()

    monkeypatch.setattr(trio, "open_tcp_stream", never)
    start = trio.current_time()
    outcome = await tcp_probe.connect("10.0.0.9", 80, 3)
    assert outcome == ProbeOutcome(ProbeResult.FAILURE, "dial tcp 10.0.0.9:80: i/o timeout")
    assert trio.current_time() - start == 3


# -- gRPC health -----------------------------------------------------------------------------------


class FakeHealth(HealthBase):
    def __init__(self, statuses: dict[str, Any], hang: bool = False) -> None:
        self.statuses = statuses
        self.hang = hang
        self.unimplemented = False

    async def Check(self, stream: Any) -> None:
        request = await stream.recv_message()
        if self.hang:
            await trio_asyncio.trio_as_aio(trio.sleep_forever)()
        if self.unimplemented:
            raise GRPCError(Status.UNIMPLEMENTED, "Method not found")
        if request.service not in self.statuses:
            raise GRPCError(Status.NOT_FOUND, "unknown service")
        await stream.send_message(HealthCheckResponse(status=self.statuses[request.service]))

    async def Watch(self, stream: Any) -> None:  # pragma: no cover - not used by probes
        raise GRPCError(Status.UNIMPLEMENTED)


@contextlib.asynccontextmanager
async def grpc_server(handlers: list[Any]) -> AsyncIterator[int]:
    server = Server(handlers)
    await trio_asyncio.aio_as_trio(server.start)("127.0.0.1", 0)
    try:
        yield server._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        server.close()
        await trio_asyncio.aio_as_trio(server.wait_closed)()


async def test_grpc_probes(aio_loop: None, autojump_clock: trio.abc.Clock) -> None:
    health = FakeHealth({"": HealthCheckResponse.SERVING, "db": HealthCheckResponse.NOT_SERVING})
    async with grpc_server([health]) as port, action_prober() as prober:
        app = Container(name="app")

        async def check(service: str | None = None) -> ProbeOutcome:
            spec = Probe(grpc=GRPCAction(port=port, service=service))
            return await prober(LIVE, spec, target(app))

        assert await check() == ProbeOutcome(ProbeResult.SUCCESS, "service healthy")
        assert await check("db") == ProbeOutcome(
            ProbeResult.FAILURE, 'service unhealthy (responded with "NOT_SERVING")'
        )
        assert await check("nope") == ProbeOutcome(
            ProbeResult.FAILURE,
            "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service",
        )
        health.unimplemented = True
        assert await check() == ProbeOutcome(
            ProbeResult.FAILURE,
            "error: this server does not implement the grpc health protocol "
            "(grpc.health.v1.Health): Method not found",
        )
        health.hang = True
        start = trio.current_time()
        assert await check() == ProbeOutcome(
            ProbeResult.FAILURE, "timeout: health rpc did not complete within 1s"
        )
        assert trio.current_time() - start == pytest.approx(1)


async def test_grpc_without_health_service_or_server(
    aio_loop: None, autojump_clock: trio.abc.Clock
) -> None:
    async with grpc_server([]) as port:
        outcome = await grpc_probe.check("127.0.0.1", port, "", 1)
    # grpclib's server omits content-type when it aborts an unknown method, and grpclib's
    # client reports that before the status; still a failure
    assert outcome.result is ProbeResult.FAILURE
    assert outcome.output.startswith("error: health rpc probe failed: rpc error: code = ")
    port = await closed_port()
    outcome = await grpc_probe.check("127.0.0.1", port, "", 1)
    assert outcome == ProbeOutcome(
        ProbeResult.FAILURE,
        f'error: failed to connect service at "127.0.0.1:{port}": '
        f"dial tcp 127.0.0.1:{port}: connect: connection refused",
    )


async def test_grpc_needs_the_bridge() -> None:
    with pytest.raises(ProbeError, match="trio-asyncio"):
        await grpc_probe.check("127.0.0.1", 1, "", 1)


# -- HTTP hooks ----------------------------------------------------------------------------------


async def test_http_hooks_only_fail_on_transport_errors(autojump_clock: trio.abc.Clock) -> None:
    runner: Any = None  # HTTP hooks never exec
    async with http_server() as server:
        getter = HttpGetter()
        app = Container(name="app")
        pod = pod_with(app)

        async def hook(path: str, port: int, scheme: str = "HTTP") -> str | None:
            action = HTTPGetAction(port=port, path=path, scheme=scheme)
            handler = LifecycleHandler(http_get=action)
            return await run_handler(
                handler, runner, pod, app, "c1", pod_ip="127.0.0.1", http=getter
            )

        assert await hook("/ok", server.port) is None
        assert await hook("/fail", server.port) is None  # any status code will do
        assert server.seen[-1].headers["user-agent"] == "kube-lifecycle/1.36"
        # an HTTPS hook answered in plain HTTP is retried over HTTP
        assert await hook("/ok", server.port, "HTTPS") is None
        assert server.seen[-1].path == "/ok"
        port = await closed_port()
        message = await hook("/stop", port)
        assert message == (
            'HTTP lifecycle hook (/stop) for Container "app" in Pod "web_default(uid-1)" '
            f'failed - error: Get "http://127.0.0.1:{port}/stop": dial tcp 127.0.0.1:{port}: '
            "connect: connection refused"
        )


# -- readiness end to end ----------------------------------------------------------------------


async def test_readiness_over_http_end_to_end(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock, short_tmp: Path
) -> None:
    runtime, _ = clients
    cid = await start_container(runtime)
    async with http_server() as server:
        spec = Probe(
            http_get=HTTPGetAction(port=server.port, path="/ok", host="127.0.0.1"),
            period_seconds=3,
        )
        container = Container(name="app", readiness_probe=spec)
        pod = pod_with(container)
        info = ContainerInfo(
            id=cid,
            name="app",
            state=ContainerRunState.RUNNING,
            started_at=fake.containers[cid].started_at,
        )
        status = RuntimePodStatus(uid=pod.uid, containers=(info,))
        m = ProberManager(runtime, wall_clock=lambda: EPOCH + trio.current_time())
        async with trio.open_nursery() as nursery:
            await nursery.start(m.run)
            m.update_pod_status(pod.uid, status)
            m.add_pod(pod)
            with trio.fail_after(10):
                while not m.is_ready(pod, info, trigger=False):
                    await trio.sleep(0.5)
            assert m.probe_status(pod, status).ready == {cid}
            assert math.isclose(
                m.metrics.value(
                    ProbeKind.READINESS,
                    Result.SUCCESS,
                    container="app",
                    pod="web",
                    namespace="default",
                ),
                1,
            )
            nursery.cancel_scope.cancel()


class HugeHealth(FakeHealth):
    """SERVING, padded with an unknown field of 5 MiB: more than a probe may read."""

    async def Check(self, stream: Any) -> None:
        await stream.recv_message()
        pad = 5 << 20
        varint = bytearray()
        n = pad
        while True:
            byte, n = n & 0x7F, n >> 7
            varint.append(byte | (0x80 if n else 0))
            if not n:
                break
        raw = bytes([0x08, HealthCheckResponse.SERVING, 0x7A]) + bytes(varint) + b"x" * pad
        await stream.send_message(HealthCheckResponse.FromString(raw))


async def test_a_grpc_answer_over_4_mib_fails_the_probe_unread(
    aio_loop: None, autojump_clock: trio.abc.Clock
) -> None:
    async with grpc_server([HugeHealth({})]) as port:
        outcome = await grpc_probe.check("127.0.0.1", port, "", 10)
    assert outcome.result == ProbeResult.FAILURE
    assert "larger than max" in outcome.output and str(4 << 20) in outcome.output
