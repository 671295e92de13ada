"""The kubelet's /exec, /attach, /portForward and /run, called directly on :10250.

Our kubelet in-process (FakeApiServer, FakeRuntime with its streaming server), clients
presenting the apiserver's kubelet client certificate over TLS: httpx for the plain
answers, the WebSocket channel client (``kubelet.testing.wschannels``) for streams.
Real clock (TLS over loopback).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

from kubelet.testing import ChannelClient, ExecResult, FakeRuntime, HandshakeRefused
from kubelet.testing import wschannels as ch
from kubelet.testing.spdytunnel import TUNNEL_PROTOCOL, forward_once, tunnel_spdy

from .kubelet_harness import KUBELET_IMAGES, NODE
from .streams_harness import Node, kubectl_node
from .test_kubectl_streams import eventually, stream_tasks


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def client_for(node: Node, *, anonymous: bool = False) -> httpx.AsyncClient:
    context = node.api.kubelets.ssl_context()
    if anonymous:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return httpx.AsyncClient(base_url=node.kubelet_url(""), verify=context)


async def open_ws(node: Node, path: str, protocols: list[str]) -> ChannelClient:
    stream = await trio.open_ssl_over_tcp_stream(
        "127.0.0.1", node.port, ssl_context=node.api.kubelets.ssl_context(),
        https_compatible=True,
    )  # fmt: skip
    return await ChannelClient.connect(stream, path, protocols)


@asynccontextmanager
async def web_node(fake: FakeRuntime, tmp: Path, *extra: str) -> AsyncIterator[Node]:
    async with kubectl_node(fake, tmp, extra=extra) as node:
        await node.running_pod("web", {"restartPolicy": "Never"})
        yield node


async def test_errors_are_upstreams(fake: FakeRuntime, short_tmp: Path) -> None:
    async with web_node(fake, short_tmp) as node, client_for(node) as client:
        uid = (node.cluster.pod("web") or {})["metadata"]["uid"]
        cases = [
            ("GET", "/exec/default/nosuch/app?output=1", 404, "pod does not exist"),
            ("GET", "/exec/default/web/app?command=ls", 400,
             "you must specify at least 1 of stdin, stdout, stderr"),
            ("POST", "/attach/default/web/app?tty=1&error=1", 400,
             "you must specify at least 1 of stdin, stdout, stderr"),
            ("GET", "/exec/default/web/other?output=1", 500, 'container not found ("other")'),
            ("GET", "/exec/default/web/not-the-uid/app?output=1", 500,
             'container not found ("app")'),
            ("POST", f"/exec/default/web/{uid}/app?output=1", 500, "Upgrade request required"),
            ("GET", "/attach/default/web/app?output=1", 500, "Upgrade request required"),
            ("GET", "/portForward/default/web", 500, "Upgrade request required"),
            ("GET", "/portForward/default/web/not-the-uid", 404, "pod not found"),
            ("GET", "/portForward/default/nosuch", 404, "pod does not exist"),
            ("PUT", "/exec/default/web/app?output=1", 405, "405: Method Not Allowed"),
            ("GET", "/run/default/web/app?cmd=ls", 405, "405: Method Not Allowed"),
            ("GET", "/exec/default/web", 404, "404 page not found"),
            ("POST", "/run/default/nosuch/app?cmd=ls", 404, "pod does not exist"),
        ]  # fmt: skip
        for method, path, status, body in cases:
            response = await client.request(method, path)
            assert (path, response.status_code, response.text.strip()) == (path, status, body)


async def test_anonymous_requests_are_refused(fake: FakeRuntime, short_tmp: Path) -> None:
    async with web_node(fake, short_tmp) as node, client_for(node, anonymous=True) as client:
        response = await client.get("/exec/default/web/app?output=1")
        assert (response.status_code, response.text) == (401, "Unauthorized")


async def test_run_answers_the_output(fake: FakeRuntime, short_tmp: Path) -> None:
    fake.script_exec(ExecResult(stdout=b"hello\n"), cmd=["echo", "hello"])
    fake.script_exec(ExecResult(exit_code=2, stderr=b"no such file\n"), cmd=["ls", "/x"])
    async with web_node(fake, short_tmp) as node, client_for(node) as client:
        uid = (node.cluster.pod("web") or {})["metadata"]["uid"]
        response = await client.post("/run/default/web/app?cmd=echo%20hello")
        assert (response.status_code, response.content) == (200, b"hello\n")
        assert response.headers["content-type"] == "application/json"
        response = await client.post(f"/run/default/web/{uid}/app?cmd=ls%20/x")
        assert response.status_code == 500
        assert response.text == "command 'ls /x' exited with 2: no such file\n"
        assert [c.args.get("cmd") for c in fake.calls if c.rpc == "ExecSync"][-2:] == [
            ["echo", "hello"], ["ls", "/x"],
        ]  # fmt: skip


async def test_a_direct_websocket_exec_by_uid(fake: FakeRuntime, short_tmp: Path) -> None:
    async with web_node(fake, short_tmp) as node:
        uid = (node.cluster.pod("web") or {})["metadata"]["uid"]
        path = f"/exec/default/web/{uid}/app?command=echo&command=hi&output=1&error=1"
        client = await open_ws(node, path, [ch.V4])
        await client.run()
        assert client.protocol == ch.V4
        assert client.text(ch.STDOUT) == "hi\n"
        assert client.status() == ch.success_status()
        assert fake.streaming.sessions[0].cmd == ("echo", "hi")
        await eventually(lambda: not stream_tasks())


@pytest.mark.parametrize(
    ("gates", "runtime_saw"),
    [((), "v4.channel.k8s.io (SPDY)"),
     (("--feature-gates=ExtendWebSocketsToKubelet=false",), "v5.channel.k8s.io")],
)  # fmt: skip
async def test_v5_is_translated_to_spdy_unless_the_gate_is_off(
    fake: FakeRuntime, short_tmp: Path, gates: tuple[str, ...], runtime_saw: str
) -> None:
    async with web_node(fake, short_tmp, *gates) as node:
        path = "/exec/default/web/app?command=sh&command=-c&command=exit%204&output=1"
        client = await open_ws(node, path, [ch.V5])
        await client.run()
        assert client.protocol == ch.V5
        status = client.status()
        assert status is not None and ch.status_exit_code(status) == 4
        assert fake.streaming.sessions[0].protocol == runtime_saw
        await eventually(lambda: fake.streaming.active == 0 and not stream_tasks())


async def test_what_the_runtime_refuses_reaches_the_client(
    fake: FakeRuntime, short_tmp: Path
) -> None:
    async with web_node(fake, short_tmp) as node:
        with pytest.raises(HandshakeRefused) as refused:
            await open_ws(node, "/exec/default/web/app?command=true&output=1", ["v9.unknown"])
        assert refused.value.status == 403  # as containerd 1.6 answers an unknown protocol
        stream = await trio.open_ssl_over_tcp_stream(
            "127.0.0.1", node.port, ssl_context=node.api.kubelets.ssl_context(),
            https_compatible=True,
        )  # fmt: skip
        await stream.send_all(
            b"GET /exec/default/web/app?command=true&output=1 HTTP/1.1\r\nHost: x\r\n"
            b"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n"  # no Sec-WebSocket-Key
        )
        answer = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 400 ")
        await eventually(lambda: not stream_tasks())


async def test_port_forward_over_websocket(fake: FakeRuntime, short_tmp: Path) -> None:
    async def echo(stream: trio.SocketStream) -> None:
        async with stream:
            while data := await stream.receive_some(65536):
                await stream.send_all(data)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    echo_port = int(listeners[0].socket.getsockname()[1])
    fake.streaming.port_target = lambda sandbox, port: ("127.0.0.1", echo_port)
    async with web_node(fake, short_tmp) as node, trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, echo, listeners)
        for bad, message in (
            ("", 'query parameter "port" is required'),
            ("?port=abc", 'unable to parse "abc" as a port: strconv.ParseUint: '
             'parsing "abc": invalid syntax'),
            ("?port=0", 'port "0" must be > 0'),
            ("?port=80,70000", 'unable to parse "80,70000" as a port: strconv.ParseUint: '
             'parsing "70000": value out of range'),
        ):  # fmt: skip
            with pytest.raises(HandshakeRefused) as refused:
                await open_ws(node, "/portForward/default/web" + bad, [ch.V4])
            assert (refused.value.status, refused.value.body.decode()) == (400, message)
        client = await open_ws(node, "/portForward/default/web?port=8080", [ch.V4])
        async with trio.open_nursery() as inner:
            inner.start_soon(client.run)
            await eventually(lambda: client.received.get(1) == b"\x90\x1f")
            payload = b"x" * 300_000
            await client.send(0, payload)
            await eventually(lambda: client.received.get(0) == b"\x90\x1f" + payload)
            await client.close()
            await client.closed.wait()
        assert fake.streaming.sessions[0].ports == (8080,)
        await eventually(lambda: fake.streaming.active == 0 and not stream_tasks())
        nursery.cancel_scope.cancel()


async def test_port_forward_tunnel_from_a_direct_client(
    fake: FakeRuntime, short_tmp: Path
) -> None:
    """client-go's SPDY-over-WebSocket dialer, on the kubelet's own endpoint: the runtime
    gets SPDY, two forwarded connections (one of 300 kB) come back echoed."""

    async def echo(stream: trio.SocketStream) -> None:
        async with stream:
            while data := await stream.receive_some(65536):
                await stream.send_all(data)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    echo_port = int(listeners[0].socket.getsockname()[1])
    fake.streaming.port_target = lambda sandbox, port: ("127.0.0.1", echo_port)
    async with web_node(fake, short_tmp) as node, trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, echo, listeners)
        client = await open_ws(node, "/portForward/default/web", [TUNNEL_PROTOCOL])
        assert client.protocol == TUNNEL_PROTOCOL
        spdy = tunnel_spdy(client)
        with trio.fail_after(20):
            assert await forward_once(spdy, 8080, b"hello", 0, until=b"hello") == b"hello"
            big = b"y" * 300_000 + b"end"
            assert await forward_once(spdy, 8080, big, 1, until=b"end") == big
        await client.stream.aclose()
        await eventually(lambda: fake.streaming.active == 0 and not stream_tasks())
        assert fake.streaming.sessions[-1].ports == (8080, 8080)
        nursery.cancel_scope.cancel()


async def test_a_tunnel_without_a_kubernetes_spdy_protocol(
    fake: FakeRuntime, short_tmp: Path
) -> None:
    """ExtendWebSocketsToKubelet: a ``SPDY/3.1+`` subprotocol is a tunnel (no ``port``
    asked for), but only ``….k8s.io`` ones are tunnelled; gate off, it needs a port."""
    odd = ["SPDY/3.1+portforward.example.com"]
    async with web_node(fake, short_tmp) as node:
        with pytest.raises(HandshakeRefused) as refused:
            await open_ws(node, "/portForward/default/web", odd)
        assert (refused.value.status, refused.value.body.decode()) == (
            400, "unable to upgrade: no tunneling spdy protocols provided\n",
        )  # fmt: skip
    async with web_node(fake, short_tmp, "--feature-gates=ExtendWebSocketsToKubelet=false") as node:
        with pytest.raises(HandshakeRefused) as refused:
            await open_ws(node, "/portForward/default/web", odd)
        assert refused.value.status == 400
        assert refused.value.body.decode() == 'query parameter "port" is required'


async def test_idle_streams_are_closed_after_the_idle_timeout(
    fake: FakeRuntime, short_tmp: Path
) -> None:
    async with web_node(fake, short_tmp, "--streaming-connection-idle-timeout=1s") as node:
        client = await open_ws(node, "/exec/default/web/app?command=cat&input=1&output=1", [ch.V5])
        started = time.monotonic()
        with trio.fail_after(10):
            await client.run()
        assert 0.9 <= time.monotonic() - started < 5
        assert fake.streaming.sessions[0].exit_code is None  # cut, not finished
        await eventually(lambda: fake.streaming.active == 0 and not stream_tasks())


async def test_many_idle_streams_leave_healthz_fast(fake: FakeRuntime, short_tmp: Path) -> None:
    async with web_node(fake, short_tmp) as node, client_for(node) as client:
        streams = [
            await open_ws(node, "/exec/default/web/app?command=cat&input=1&output=1", [ch.V5])
            for _ in range(100)
        ]
        await eventually(lambda: fake.streaming.active == 100)
        worst = 0.0
        for _ in range(20):
            started = time.monotonic()
            response = await client.get("/healthz")
            worst = max(worst, time.monotonic() - started)
            assert response.text == "ok"
        assert worst < 0.5
        for stream in streams:
            await trio.aclose_forcefully(stream.stream)
        await eventually(lambda: fake.streaming.active == 0 and not stream_tasks(), timeout=30)


async def test_a_static_pod_is_reached_by_its_mirror_pods_uid(
    fake: FakeRuntime, short_tmp: Path
) -> None:
    """exec, attach and run translate a mirror pod's UID to its static pod's (upstream's
    ``TranslatePodUID`` in ``findContainer``); port-forward compares the UID with the static
    pod's before any translation, so a mirror UID gets upstream's 404 ``pod not found``."""
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n"
        "  - name: app\n    image: busybox:1.35\n"
    )
    fake.script_exec(ExecResult(stdout=b"static\n"), cmd=["hostname"])
    async with kubectl_node(fake, short_tmp, manifests=manifests) as node:
        name = f"web-{NODE}"
        await node.cluster.wait_for(lambda: node.cluster.phase(name) == "Running", timeout=30)
        mirror_uid = (node.cluster.pod(name) or {})["metadata"]["uid"]
        static_uid = fake.running()[0].config.labels["io.kubernetes.pod.uid"]
        assert mirror_uid != static_uid
        async with client_for(node) as client:
            response = await client.post(f"/run/default/{name}/{mirror_uid}/app?cmd=hostname")
            assert (response.status_code, response.text) == (200, "static\n")
            response = await client.get(f"/portForward/default/{name}/{mirror_uid}")
            assert (response.status_code, response.text) == (404, "pod not found")
        path = f"/exec/default/{name}/{mirror_uid}/app?command=echo&command=hi&output=1"
        client = await open_ws(node, path, [ch.V4])
        await client.run()
        assert (client.text(ch.STDOUT), client.status()) == ("hi\n", ch.success_status())
        client = await open_ws(node, f"/attach/default/{name}/{mirror_uid}/app?output=1", [ch.V4])
        await eventually(lambda: len(fake.streaming.sessions) == 2)
        await trio.aclose_forcefully(client.stream)
        sessions = fake.streaming.sessions
        assert [(s.kind, s.target) for s in sessions] == [
            ("exec", fake.running()[0].id), ("attach", fake.running()[0].id),
        ]  # fmt: skip
        await eventually(lambda: not stream_tasks())
