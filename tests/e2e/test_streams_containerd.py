"""kubectl exec, attach, cp and port-forward to a busybox pod on containerd, and a direct client.

Processes: FakeApiServer (proxying ``pods/{name}/exec|attach|portforward`` to the node's
kubelet as kube-apiserver does), the ``kubelet`` (its :10250 server on a free loopback port,
x509 client certificates only), containerd 1.6 with its streaming server. kubectl 1.37
offers WebSocket v5 first; containerd 1.6 does not know v5 (it answers 403), so the
kubelet answers the WebSocket itself and speaks SPDY to containerd
(``ExtendWebSocketsToKubelet``). Port-forward's WebSocket tunnel is unwrapped by the
kubelet under the same gate and reaches containerd as SPDY, to a busybox httpd.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient
from kubelet.cri.__main__ import cleanup
from kubelet.testing import CertPair
from kubelet.testing import wschannels as ch
from kubelet.testing.spdytunnel import TUNNEL_PROTOCOL, forward_once, tunnel_spdy

from .cluster import CONTAINERD_ENDPOINT, Processes, node_registered

pytestmark = pytest.mark.containerd

WEB = (
    "mkdir -p /www && echo hello-from-busybox > /www/index.html; trap 'exit 0' TERM; "
    "httpd -f -p 8080 -h /www & wait"
)


def kubectl_binary() -> str:
    found = Path(sys.executable).parent / "kubectl"
    return str(found) if found.exists() else (shutil.which("kubectl") or "kubectl")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@attrs.define
class StreamNode:
    api_url: str
    node: str
    kubelet_port: int
    kubeconfig: Path
    client_ca_dir: Path
    procs: Processes

    async def kubectl(
        self, *args: str, stdin: bytes = b"", timeout: float = 60
    ) -> subprocess.CompletedProcess[bytes]:
        with trio.fail_after(timeout):
            return await trio.run_process(
                [kubectl_binary(), "--kubeconfig", str(self.kubeconfig), *args],
                stdin=stdin, capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip

    def client_pair(self) -> CertPair:
        """A kubelet client certificate from the same CA as the apiserver's."""
        return CertPair(
            self.client_ca_dir / "apiserver-kubelet-client.crt",
            self.client_ca_dir / "apiserver-kubelet-client.key",
        )


@pytest.fixture
async def stream_node(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> AsyncIterator[StreamNode]:
    runtime, _ = cri
    procs = Processes()
    node = f"e2e-{uuid.uuid4().hex[:6]}"
    port_file, ca_dir = short_tmp / "port", short_tmp / "kubelet-client"
    procs.start(
        [
            sys.executable, "-m", "kubelet.testing.fakeapiserver", "--listen", "127.0.0.1:0",
            "--port-file", str(port_file), "--host", f"{node}=127.0.0.1",
            "--kubelet-client-ca-dir", str(ca_dir),
        ],
        short_tmp / "apiserver.log",
    )  # fmt: skip
    with trio.fail_after(20):
        while not port_file.exists() or not port_file.read_text().strip():
            await trio.sleep(0.05)
    url = f"http://127.0.0.1:{port_file.read_text().strip()}"
    kubelet_conf, kubectl_conf = short_tmp / "kubelet.conf", short_tmp / "kubectl.conf"
    for path, user in ((kubelet_conf, "kubelet"), (kubectl_conf, "admin")):
        path.write_text(json.dumps(_kubeconfig(url, user)))
    port = free_port()
    procs.start(
        [
            sys.executable, "-m", "kubelet", "--kubeconfig", str(kubelet_conf),
            "--hostname-override", node, "--healthz-port=0", "--read-only-port=0",
            "--address", "127.0.0.1", "--port", str(port),
            "--client-ca-file", str(ca_dir / "ca.crt"), "--anonymous-auth=false",
            "--authorization-mode", "AlwaysAllow",
            "--root-dir", str(short_tmp / "root"),
            "--container-runtime-endpoint", CONTAINERD_ENDPOINT,
            "--fail-swap-on=false",  # as upstream's node e2e: a CI machine may swap
            "--fail-cgroupv1=false",  # this machine is cgroup v1 (hybrid)
        ],
        short_tmp / "kubelet.log",
    )  # fmt: skip
    try:
        yield StreamNode(url, node, port, kubectl_conf, ca_dir, procs)
    finally:
        procs.stop_all()
        await cleanup(runtime, kubelet_only=True)


def _kubeconfig(url: str, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "e2e",
        "clusters": [{"name": "e2e", "cluster": {"server": url}}],
        "users": [{"name": user, "user": {"token": f"e2e-{user}"}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
    }


async def _running_pod(node: StreamNode) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "nodeName": node.node,
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {"name": "httpd", "image": "docker.io/library/busybox:1.35",
                 "command": ["sh", "-c", WEB]},
                {"name": "echo", "image": "docker.io/library/busybox:1.35",
                 "command": ["cat"], "stdin": True},
            ],
        },
    }  # fmt: skip
    async with httpx.AsyncClient(base_url=node.api_url, timeout=10) as api:
        await node_registered(api, node.node)
        created = await api.post("/api/v1/namespaces/default/pods", json=pod)
        assert created.status_code == 201, created.text
        with trio.fail_after(60):
            while True:
                got = (await api.get("/api/v1/namespaces/default/pods/web")).json()
                if (got.get("status") or {}).get("phase") == "Running":
                    break
                await trio.sleep(0.2)


async def test_kubectl_exec_attach_cp_on_containerd(
    stream_node: StreamNode, short_tmp: Path
) -> None:
    node = stream_node
    await _running_pod(node)
    done = await node.kubectl("exec", "-i", "web", "-c", "httpd", "--", "cat", stdin=b"ping\n")
    assert (done.returncode, done.stdout) == (0, b"ping\n"), done.stderr
    done = await node.kubectl("exec", "web", "-c", "httpd", "--", "sh", "-c", "exit 7")
    assert done.returncode == 7, done.stderr
    assert b"command terminated with exit code 7" in done.stderr
    assert await _attach_echoes(node, b"to cat\n")
    local = short_tmp / "up.txt"
    local.write_bytes(b"0123456789" * 50_000)
    done = await node.kubectl("cp", str(local), "default/web:/tmp/up.txt", "-c", "httpd")
    assert done.returncode == 0, done.stderr
    done = await node.kubectl("exec", "web", "-c", "httpd", "--", "wc", "-c", "/tmp/up.txt")
    assert done.stdout.split()[0] == b"500000", done.stderr
    back = short_tmp / "down.txt"
    done = await node.kubectl("cp", "default/web:/tmp/up.txt", str(back), "-c", "httpd")
    assert done.returncode == 0, done.stderr
    assert back.read_bytes() == local.read_bytes()


async def _attach_echoes(node: StreamNode, line: bytes) -> bool:
    """kubectl attach -i to the ``cat`` container: what we type comes back."""
    args = [kubectl_binary(), "--kubeconfig", str(node.kubeconfig)]
    proc = await trio.lowlevel.open_process(
        [*args, "attach", "-i", "web", "-c", "echo"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    seen = b""
    try:
        with trio.move_on_after(30):
            while line not in seen:
                await proc.stdin.send_all(line)
                with trio.move_on_after(1):
                    seen += await proc.stdout.receive_some(4096)
    finally:
        proc.kill()
        await proc.wait()
    return line in seen


async def test_kubectl_port_forward_to_busybox_httpd(stream_node: StreamNode) -> None:
    node = stream_node
    await _running_pod(node)
    args = [kubectl_binary(), "--kubeconfig", str(node.kubeconfig)]
    args += ["port-forward", "pod/web", "0:8080"]
    async with trio.open_nursery() as nursery:
        proc = await trio.lowlevel.open_process(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            assert proc.stdout is not None
            line = b""
            with trio.fail_after(30):
                while b"\n" not in line:
                    line += await proc.stdout.receive_some(4096)
            # "Forwarding from 127.0.0.1:NNNNN -> 8080"
            local = int(line.split(b"127.0.0.1:")[1].split(b" ")[0])
            async with httpx.AsyncClient(timeout=10) as client:
                for _ in range(3):
                    answer = await client.get(f"http://127.0.0.1:{local}/")
                    assert answer.text == "hello-from-busybox\n"
        finally:
            proc.kill()
            await proc.wait()
        nursery.cancel_scope.cancel()


async def test_direct_websocket_client_on_containerd(stream_node: StreamNode) -> None:
    """The kubelet's own endpoint, without an apiserver: WebSocket v4 (containerd's)."""
    node = stream_node
    await _running_pod(node)
    pair = node.client_pair()
    context = _client_context(pair)
    stream = await trio.open_ssl_over_tcp_stream(
        "127.0.0.1", node.kubelet_port, ssl_context=context, https_compatible=True
    )
    path = "/exec/default/web/httpd?command=sh&command=-c&command=echo+hi%3B+exit+4&output=1"
    client = await ch.ChannelClient.connect(stream, path, [ch.V4])
    with trio.fail_after(20):
        await client.run()
    assert client.text(ch.STDOUT) == "hi\n"
    status = client.status()
    assert status is not None and ch.status_exit_code(status) == 4
    async with httpx.AsyncClient(verify=context, timeout=10) as http:
        url = f"https://127.0.0.1:{node.kubelet_port}/run/default/web/httpd?cmd=echo%20run-ok"
        answer = await http.post(url)
        assert (answer.status_code, answer.text) == (200, "run-ok\n")


async def test_port_forward_tunnel_to_busybox_httpd_on_containerd(
    stream_node: StreamNode,
) -> None:
    """kubectl's WebSocket tunnel (``SPDY/3.1+portforward.k8s.io``) on the kubelet's own
    endpoint: the kubelet asks containerd 1.6 for SPDY (it refuses the tunnel itself with
    403), and busybox httpd answers through it, twice on one tunnel."""
    node = stream_node
    await _running_pod(node)
    stream = await trio.open_ssl_over_tcp_stream(
        "127.0.0.1", node.kubelet_port, ssl_context=_client_context(node.client_pair()),
        https_compatible=True,
    )  # fmt: skip
    client = await ch.ChannelClient.connect(stream, "/portForward/default/web", [TUNNEL_PROTOCOL])
    assert client.protocol == TUNNEL_PROTOCOL
    spdy = tunnel_spdy(client)
    request = b"GET / HTTP/1.0\r\nHost: web\r\n\r\n"
    with trio.fail_after(20):
        for request_id in range(2):
            answer = await forward_once(spdy, 8080, request, request_id)
            assert answer.startswith(b"HTTP/1.1 200 OK"), answer[:200]
            assert answer.endswith(b"\r\n\r\nhello-from-busybox\n")
    await trio.aclose_forcefully(stream)


def _client_context(pair: CertPair) -> Any:
    import ssl

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(pair.cert, pair.key)
    context.set_alpn_protocols(["http/1.1"])
    return context


async def _v5_client(node: StreamNode, path: str) -> ch.ChannelClient:
    context = _client_context(node.client_pair())
    stream = await trio.open_ssl_over_tcp_stream(
        "127.0.0.1", node.kubelet_port, ssl_context=context, https_compatible=True
    )
    return await ch.ChannelClient.connect(stream, path, [ch.V5])


async def test_websocket_v5_is_translated_to_spdy_for_containerd(stream_node: StreamNode) -> None:
    """containerd 1.6 refuses v5 (403); the kubelet answers it and speaks SPDY instead."""
    node = stream_node
    await _running_pod(node)
    client = await _v5_client(node, "/exec/default/web/httpd?command=cat&input=1&output=1")
    assert client.protocol == ch.V5
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.run)
        await client.send(ch.STDIN, b"through ")
        await client.send(ch.STDIN, b"spdy\n")
        await client.close_channel(ch.STDIN)  # v5 half-close: cat sees its end of input
        with trio.fail_after(20):
            await client.closed.wait()
    assert client.text(ch.STDOUT) == "through spdy\n"
    assert client.status() == {"metadata": {}, "status": "Success"}
    path = "/exec/default/web/httpd?command=sh&command=-c&command=echo+out%3B+exit+5&output=1"
    client = await _v5_client(node, path + "&error=1")
    with trio.fail_after(20):
        await client.run()
    assert client.text(ch.STDOUT) == "out\n"
    status = client.status()
    assert status is not None and ch.status_exit_code(status) == 5
    assert status["message"].endswith("command terminated with exit code 5")


async def test_websocket_v5_tty_resize_on_containerd(stream_node: StreamNode) -> None:
    node = stream_node
    await _running_pod(node)
    script = "read+line%3B+stty+size"
    path = f"/exec/default/web/httpd?command=sh&command=-c&command={script}&input=1&output=1&tty=1"
    client = await _v5_client(node, path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.run)
        await client.resize(100, 40)
        await trio.sleep(0.5)  # the runtime applies the size before the command reads on
        await client.send(ch.STDIN, b"go\n")
        with trio.fail_after(20):
            await client.closed.wait()
    assert b"40 100" in client.received.get(ch.STDOUT, b""), client.received
    assert client.status() == {"metadata": {}, "status": "Success"}
