"""The kubelet's HTTP endpoints against REAL containerd: container logs and stats.

Pods are created with our CRI client (no kubelet process); the servers run in-process on
127.0.0.1 with ephemeral ports, anonymous access and AlwaysAllow. Real clock.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import attrs
import httpx
import pytest
import trio
from prometheus_client import CollectorRegistry

from kubelet.api import Container, ObjectMeta, Pod, PodSpec
from kubelet.config import (
    KubeletAnonymousAuthentication,
    KubeletAuthentication,
    KubeletAuthorization,
    KubeletConfiguration,
    KubeletWebhookAuthentication,
    Options,
)
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.metrics import KubeletMetrics
from kubelet.server import ServerParts, serve

from .conftest import NAMESPACE, PodHandle

pytestmark = pytest.mark.containerd

Clients = tuple[RuntimeClient, ImageClient]


@attrs.define
class Backend:
    runtime: RuntimeClient
    images: ImageClient | None
    registry: CollectorRegistry
    pods: list[Pod] = attrs.field(factory=list)
    probe_registry: CollectorRegistry | None = None

    def desired_pods(self) -> Sequence[Pod]:
        return self.pods

    def pod_by_name(self, namespace: str, name: str) -> Pod | None:
        for p in self.pods:
            if (p.metadata.namespace, p.metadata.name) == (namespace, name):
                return p
        return None

    def translate_pod_uid(self, uid: str) -> str:
        return uid

    def sync_loop_last_iteration(self) -> float | None:
        return None


@attrs.define
class Server:
    backend: Backend
    client: httpx.AsyncClient
    base: str

    def want(self, pod: PodHandle, *containers: str) -> None:
        spec = PodSpec(containers=tuple(Container(name=c, image="busybox") for c in containers))
        meta = ObjectMeta(name=pod.name, namespace=NAMESPACE, uid=pod.uid)
        self.backend.pods.append(Pod(metadata=meta, spec=spec))

    def logs_url(self, pod: PodHandle, container: str, query: str = "") -> str:
        return f"{self.base}/containerLogs/{NAMESPACE}/{pod.name}/{container}{query}"


@pytest.fixture
async def server(cri: Clients, short_tmp: Path) -> AsyncIterator[Server]:
    runtime, images = cri
    metrics = KubeletMetrics("e2e-node")
    backend = Backend(runtime, images, metrics.registry)
    config = KubeletConfiguration(
        address="127.0.0.1",
        healthz_bind_address="127.0.0.1",
        authentication=KubeletAuthentication(
            webhook=KubeletWebhookAuthentication(enabled=False),
            anonymous=KubeletAnonymousAuthentication(enabled=True),
        ),
        authorization=KubeletAuthorization(mode="AlwaysAllow"),
        pod_logs_dir=str(short_tmp / "pods"),
    )
    options = Options(
        config=config,
        node_name="e2e-node",
        root_dir=str(short_tmp),
        cert_dir=str(short_tmp / "pki"),
    )
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    async with trio.open_nursery() as nursery:
        addresses = await nursery.start(
            serve,
            ServerParts(backend=backend, options=options, metrics=metrics, ephemeral_ports=True),
        )
        async with httpx.AsyncClient(verify=context, timeout=30) as client:
            yield Server(backend, client, f"https://{addresses.main}")
        nursery.cancel_scope.cancel()


POLITE = "trap 'exit 0' TERM"


async def test_container_logs_options(server: Server, pod: PodHandle) -> None:
    # stdout and stderr reach containerd through separate pipes: pause so their order is fixed
    script = (
        f"{POLITE}; for i in 1 2 3 4 5; do echo line $i; done; sleep 0.3; echo oops >&2; "
        "sleep 30 & wait"
    )
    cid = await pod.start_container("app", script)
    server.want(pod, "app")
    with trio.fail_after(10):
        while (
            pod.log_file("app").stat().st_size == 0
            or b"oops" not in pod.log_file("app").read_bytes()
        ):
            await trio.sleep(0.05)
    get = server.client.get
    everything = (await get(server.logs_url(pod, "app"))).text
    assert everything.splitlines() == ["line 1", "line 2", "line 3", "line 4", "line 5", "oops"]
    assert (await get(server.logs_url(pod, "app", "?tailLines=2"))).text == "line 5\noops\n"
    assert (await get(server.logs_url(pod, "app", "?limitBytes=8"))).text == "line 1\nl"
    assert (await get(server.logs_url(pod, "app", "?stream=Stderr"))).text == "oops\n"
    stamped = (await get(server.logs_url(pod, "app", "?timestamps=1&tailLines=1"))).text
    stamp, _, text = stamped.partition(" ")
    assert text == "oops\n" and len(stamp.split(".")[1].rstrip("Z")) >= 9
    assert (await get(server.logs_url(pod, "app", "?sinceSeconds=3600"))).text == everything
    r = await get(server.logs_url(pod, "app", "?previous=true"))
    assert r.status_code == 400 and "previous terminated container" in r.text
    assert (await get(server.logs_url(pod, "nope"))).status_code == 404
    await server.backend.runtime.stop_container(cid, 5)


async def test_follow_ends_when_the_container_exits(server: Server, pod: PodHandle) -> None:
    script = f"{POLITE}; for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.3; done"
    await pod.start_container("app", script)
    server.want(pod, "app")
    received: list[str] = []
    t0 = trio.current_time()
    with trio.fail_after(20):
        async with server.client.stream("GET", server.logs_url(pod, "app", "?follow=true")) as r:
            assert r.status_code == 200
            async for chunk in r.aiter_text():
                received.append(chunk)
    assert "".join(received).splitlines() == [f"tick {i}" for i in range(1, 7)]
    # it followed the container's life (~1.8 s), ending within the running check's period
    assert 1.0 < trio.current_time() - t0 < 6.0


async def test_previous_instance(server: Server, pod: PodHandle) -> None:
    runtime = server.backend.runtime
    first = await pod.start_container("app", "echo first run; exit 1")
    await pod.wait_exited(first)
    config = pod.container_config("app", f"{POLITE}; echo second run; sleep 30 & wait", attempt=1)
    second = await runtime.create_container(pod.sandbox_id, config, pod.config)
    await runtime.start_container(second)
    server.want(pod, "app")
    with trio.fail_after(10):
        while not pod.log_file("app", 1).exists() or not pod.log_file("app", 1).read_bytes():
            await trio.sleep(0.05)
    assert (await server.client.get(server.logs_url(pod, "app"))).text == "second run\n"
    previous = await server.client.get(server.logs_url(pod, "app", "?previous=true"))
    assert previous.text == "first run\n"
    await runtime.stop_container(second, 5)


async def test_stats_summary(server: Server, pod: PodHandle) -> None:
    await pod.start_container("app", f"{POLITE}; while true; do :; done")  # burns CPU
    server.want(pod, "app")
    await trio.sleep(1.0)
    first = (await server.client.get(f"{server.base}/stats/summary")).json()
    await trio.sleep(1.5)
    summary = (await server.client.get(f"{server.base}/stats/summary")).json()
    node = summary["node"]
    assert node["nodeName"] == "e2e-node"
    assert node["cpu"]["usageCoreNanoSeconds"] > 0 and node["memory"]["workingSetBytes"] > 0
    assert node["fs"]["capacityBytes"] > 0
    assert node["runtime"]["imageFs"]["usedBytes"] > 0
    [mine] = [p for p in summary["pods"] if p["podRef"]["uid"] == pod.uid]
    assert mine["podRef"] == {"name": pod.name, "namespace": NAMESPACE, "uid": pod.uid}
    [app] = mine["containers"]
    assert app["name"] == "app"
    assert app["cpu"]["usageCoreNanoSeconds"] > 0
    assert app["cpu"]["usageNanoCores"] > 100_000_000, "a busy loop uses a good part of a core"
    assert app["memory"]["workingSetBytes"] > 0
    assert mine["cpu"]["usageCoreNanoSeconds"] > 0 and mine["memory"]["workingSetBytes"] > 0
    assert app["rootfs"]["usedBytes"] >= 0 and "logs" in app
    assert [p for p in first["pods"] if p["podRef"]["uid"] == pod.uid]
    resource = (await server.client.get(f"{server.base}/metrics/resource")).text
    assert (
        f'container_cpu_usage_seconds_total{{container="app",namespace="{NAMESPACE}",pod="{pod.name}"}}'
        in resource
    )
    running = (await server.client.get(f"{server.base}/runningpods/")).json()
    assert pod.uid in {p["metadata"]["uid"] for p in running["items"]}


async def test_checkpoint_on_containerd_without_the_call(server: Server, pod: PodHandle) -> None:
    """containerd 1.6 has no CRI CheckpointContainer: upstream's 500 with its gRPC error."""
    cid = await pod.start_container("app", f"{POLITE}; sleep 30 & wait")
    server.want(pod, "app")
    r = await server.client.post(f"{server.base}/checkpoint/{NAMESPACE}/{pod.name}/app")
    assert r.status_code == 500
    assert r.text == (
        f"checkpointing of {NAMESPACE}/{pod.name}/app failed (rpc error: code = Unimplemented "
        "desc = method CheckpointContainer not implemented)"
    )
    await server.backend.runtime.stop_container(cid, 5)
