"""Which pod a stream request reaches, and for how long: ``/run`` and the ``{uid}`` forms.

The kubelet's app (``KubeletApp`` with debugging handlers, plain HTTP on 127.0.0.1) over
the real CRI client and FakeRuntime, under ``autojump_clock``; raw HTTP/1.1 clients so a
test decides exactly when the client goes away.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio
from prometheus_client import CollectorRegistry

from kubelet.api import Pod
from kubelet.config import KubeletConfiguration
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.server.app import KubeletApp
from kubelet.server.fdlimits import Descriptors
from kubelet.server.limits import Limits
from kubelet.server.servers import bind, serve_socket
from kubelet.stats import SummaryProvider
from kubelet.testing import ExecResult, FakeRuntime
from kubelet.testing.builders import make_container, make_pod

from .helpers import container_config, sandbox_config

PLENTY = Descriptors(reserve=0, limit=lambda: 1_000_000, count=lambda: 10)


@attrs.define
class Backend:
    runtime: RuntimeClient
    images: ImageClient | None
    pods: list[Pod] = attrs.field(factory=list)
    registry: CollectorRegistry = attrs.field(factory=CollectorRegistry)
    probe_registry: CollectorRegistry | None = None

    def desired_pods(self) -> Sequence[Pod]:
        return self.pods

    def pod_by_name(self, namespace: str, name: str) -> Pod | None:
        for pod in self.pods:
            if (pod.metadata.namespace, pod.metadata.name) == (namespace, name):
                return pod
        return None

    def sync_loop_last_iteration(self) -> float | None:
        return None


@attrs.define
class Node:
    backend: Backend
    port: int

    async def start_pod(self, pod: Pod) -> str:
        """Run ``pod``'s sandbox and its first container on the runtime; the container id."""
        runtime, meta = self.backend.runtime, pod.metadata
        sandbox = sandbox_config(meta.name, pod.uid, meta.namespace)
        sid = await runtime.run_pod_sandbox(sandbox)
        name = pod.spec.containers[0].name
        config = container_config(name, pod=meta.name, uid=pod.uid)
        config.labels["io.kubernetes.pod.namespace"] = meta.namespace
        cid = await runtime.create_container(sid, config, sandbox)
        await runtime.start_container(cid)
        self.backend.pods.append(pod)
        return cid

    async def request(self, method: str, path: str) -> trio.SocketStream:
        """A connection that has sent ``method path`` (no body)."""
        stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        head = f"{method} {path} HTTP/1.1\r\nHost: node\r\nContent-Length: 0\r\n\r\n"
        await stream.send_all(head.encode())
        return stream


async def read_all(stream: trio.abc.Stream) -> bytes:
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
        if b"\r\n\r\n" in data:
            head, _, body = data.partition(b"\r\n\r\n")
            length = [
                int(line.split(b":")[1]) for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ]  # fmt: skip
            if length and len(body) >= length[0]:
                break
    return data


@pytest.fixture
async def node(clients: tuple[RuntimeClient, ImageClient], short_tmp: Path) -> AsyncIterator[Node]:
    async with serving(Backend(*clients), short_tmp) as found:
        yield found


@asynccontextmanager
async def serving(backend: Backend, tmp: Path) -> AsyncIterator[Node]:
    stats = SummaryProvider(
        backend.runtime, None, node_name="node1", root_dir=str(tmp), pod_logs_dir=str(tmp)
    )
    app = KubeletApp(backend, KubeletConfiguration(), "node1", stats, [], debugging=True)
    sock = bind("127.0.0.1", 0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_socket, app, sock, None, Limits(), PLENTY)
        yield Node(backend, int(sock.getsockname()[1]))
        nursery.cancel_scope.cancel()


# -- /run ------------------------------------------------------------------------------------


async def test_run_cancels_exec_sync_when_the_client_goes(
    fake: FakeRuntime, node: Node, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(stdout=b"never\n", takes=math.inf), cmd=["tail", "-f"])
    await node.start_pod(make_pod(make_container("app")))
    stream = await node.request("POST", "/run/default/web/app?cmd=tail%20-f")
    await trio.sleep(30)
    [call] = fake.calls_of("ExecSync")
    assert call.outcome == "pending"
    left = trio.current_time()
    await stream.aclose()
    with trio.fail_after(5):
        while call.outcome == "pending":
            await trio.sleep(0.1)
    assert call.outcome == "cancelled"
    assert call.finished is not None and call.finished - left < 1


async def test_run_still_answers_a_client_that_stays(
    fake: FakeRuntime, node: Node, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(stdout=b"done\n", takes=90), cmd=["slow"])
    await node.start_pod(make_pod(make_container("app")))
    stream = await node.request("POST", "/run/default/web/app?cmd=slow")
    answer = await read_all(stream)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert answer.endswith(b"\r\n\r\ndone\n")
    assert [c.outcome for c in fake.calls_of("ExecSync")] == ["ok"]
