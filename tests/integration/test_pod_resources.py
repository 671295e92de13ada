"""The pod-resources API through a real grpclib client on the kubelet's unix socket."""

from __future__ import annotations

import os
import stat
import struct
from typing import Any

import pytest
import trio
import trio_asyncio
from grpclib.client import Channel, UnaryUnaryMethod
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, PodStatus
from kubelet.cm import AssignedClaim, AssignedDevice, AssignedMemory, ClaimDevice
from kubelet.config import FeatureGates, Options
from kubelet.metrics import KubeletMetrics, exposition
from kubelet.server import Addresses, ServerParts, serve
from kubelet.server.podresources import Lister, TokenBucket, serve_pod_resources
from kubelet.server.podresources import podresources_api_pb2 as pb
from kubelet.server.podresources.podresources_api_grpc import PodResourcesListerStub

from . import test_server
from .test_server import NODE, Env, config

env = test_server.env
pki = test_server.pki

pytestmark = pytest.mark.trio

LIST = "/v1.PodResourcesLister/List"


def _pod(name: str, phase: str = "Running") -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"),
        spec=PodSpec(
            init_containers=(
                Container(name="init", image="busybox"),
                Container(name="proxy", image="busybox", restart_policy="Always"),
            ),
            containers=(Container(name="app", image="busybox"),),
        ),
        status=PodStatus(phase=phase),
    )


class Pinned:
    """The container manager's answers: ``app`` of pod web on CPUs 2-3 with 1 GiB of
    memory on NUMA node 1, no devices."""

    def container_devices(self, pod_uid: str, container: str) -> list[AssignedDevice]:
        return []

    def allocatable_devices(self) -> list[AssignedDevice]:
        return []

    def exclusive_cpus(self, pod_uid: str, container: str) -> frozenset[int]:
        return frozenset({3, 2}) if (pod_uid, container) == ("uid-web", "app") else frozenset()

    def allocatable_cpus(self) -> frozenset[int]:
        return frozenset({1, 2, 3})

    def container_memory(self, pod_uid: str, container: str) -> list[AssignedMemory]:
        if (pod_uid, container) == ("uid-web", "app"):
            return [AssignedMemory("memory", 1 << 30, (1,))]
        return []

    def allocatable_memory(self) -> list[AssignedMemory]:
        return [AssignedMemory("memory", 3 << 30, (0,)), AssignedMemory("memory", 4 << 30, (1,))]

    def dynamic_resources(self, pod: Pod, container: Container) -> list[AssignedClaim]:
        if (pod.uid, container.name) != ("uid-web", "app"):
            return []
        devices = (
            ClaimDevice("gpu.example.com", "pool", "gpu-0", ("gpu.example.com/gpu=gpu-0",)),
            ClaimDevice("gpu.example.com", "pool", "gpu-1", ("gpu.example.com/gpu=gpu-1",)),
        )
        return [AssignedClaim("web-gpu", "default", devices)]


async def _start(
    env: Env,
    gates: dict[str, bool] | None = None,
    metrics: KubeletMetrics | None = None,
    assigned: Pinned | None = None,
) -> str:
    options = Options(
        config=config(),
        node_name=NODE,
        root_dir=str(env.tmp),
        cert_dir=str(env.tmp / "pki"),
        features=FeatureGates(gates or {}),
    )
    _: Addresses = await env.nursery.start(
        serve,
        ServerParts(
            backend=env.backend,
            options=options,
            reviews=env.reviews,
            metrics=metrics,
            ephemeral_ports=True,
            assigned=assigned,
        ),
    )
    return str(env.tmp / "pod-resources" / "kubelet.sock")


async def _call(path: str, rpc: str, request: Any) -> Any:
    async def go() -> Any:
        channel = Channel(path=path)
        try:
            return await getattr(PodResourcesListerStub(channel), rpc)(request, timeout=10)
        finally:
            channel.close()

    return await trio_asyncio.aio_as_trio(go)()


async def test_list_get_and_allocatable(env: Env) -> None:
    env.backend.pods.extend([_pod("web"), _pod("done", phase="Succeeded")])
    metrics = KubeletMetrics(NODE, process=False)
    path = await _start(env, metrics=metrics)
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    listed = await _call(path, "List", pb.ListPodResourcesRequest())
    assert [p.name for p in listed.pod_resources] == ["web"]  # active pods only
    (web,) = listed.pod_resources
    assert (web.namespace, [c.name for c in web.containers]) == ("default", ["proxy", "app"])
    for c in web.containers:
        assert (list(c.devices), list(c.cpu_ids), list(c.memory), list(c.dynamic_resources)) == (
            [],
            [],
            [],
            [],
        )
    got = await _call(
        path, "Get", pb.GetPodResourcesRequest(pod_name="web", pod_namespace="default")
    )
    assert got.pod_resources == web
    allocatable = await _call(path, "GetAllocatableResources", pb.AllocatableResourcesRequest())
    assert allocatable == pb.AllocatableResourcesResponse()
    with pytest.raises(GRPCError) as failed:
        await _call(path, "Get", pb.GetPodResourcesRequest(pod_name="x", pod_namespace="ns"))
    assert (failed.value.status, failed.value.message) == (
        Status.UNKNOWN,
        "pod x in namespace ns not found",
    )
    text = exposition(metrics.registry).decode()
    for line in (
        'kubelet_pod_resources_endpoint_requests_total{server_api_version="v1"} 4.0',
        'kubelet_pod_resources_endpoint_requests_list{server_api_version="v1"} 1.0',
        'kubelet_pod_resources_endpoint_requests_get{server_api_version="v1"} 2.0',
        'kubelet_pod_resources_endpoint_errors_get{server_api_version="v1"} 1.0',
        'kubelet_pod_resources_endpoint_requests_get_allocatable{server_api_version="v1"} 1.0',
    ):
        assert line in text


async def test_the_cpu_and_memory_managers_assignments(env: Env) -> None:
    env.backend.pods.append(_pod("web"))
    path = await _start(env, assigned=Pinned())
    listed = await _call(path, "List", pb.ListPodResourcesRequest())
    (web,) = listed.pod_resources
    assert {c.name: list(c.cpu_ids) for c in web.containers} == {"proxy": [], "app": [2, 3]}
    memory = {
        c.name: [(m.memory_type, m.size, [n.ID for n in m.topology.nodes]) for m in c.memory]
        for c in web.containers
    }
    assert memory == {"proxy": [], "app": [("memory", 1 << 30, [1])]}
    got = await _call(
        path, "Get", pb.GetPodResourcesRequest(pod_name="web", pod_namespace="default")
    )
    assert got.pod_resources == web
    allocatable = await _call(path, "GetAllocatableResources", pb.AllocatableResourcesRequest())
    assert list(allocatable.cpu_ids) == [1, 2, 3]
    assert [(m.size, m.topology.nodes[0].ID) for m in allocatable.memory] == [
        (3 << 30, 0),
        (4 << 30, 1),
    ]


async def test_the_claims_each_container_uses_unless_the_gate_is_off(env: Env) -> None:
    env.backend.pods.append(_pod("web"))
    path = await _start(env, assigned=Pinned())
    listed = await _call(path, "List", pb.ListPodResourcesRequest())
    (web,) = listed.pod_resources
    by_name = {c.name: list(c.dynamic_resources) for c in web.containers}
    assert by_name["proxy"] == []
    (claim,) = by_name["app"]
    assert (claim.claim_name, claim.claim_namespace) == ("web-gpu", "default")
    assert [
        (r.driver_name, r.pool_name, r.device_name, [d.name for d in r.cdi_devices])
        for r in claim.claim_resources
    ] == [
        ("gpu.example.com", "pool", "gpu-0", ["gpu.example.com/gpu=gpu-0"]),
        ("gpu.example.com", "pool", "gpu-1", ["gpu.example.com/gpu=gpu-1"]),
    ]
    got = await _call(
        path, "Get", pb.GetPodResourcesRequest(pod_name="web", pod_namespace="default")
    )
    assert got.pod_resources == web


async def test_no_claims_with_the_dynamic_resources_gate_off(env: Env) -> None:
    env.backend.pods.append(_pod("web"))
    path = await _start(env, {"KubeletPodResourcesDynamicResources": False}, assigned=Pinned())
    listed = await _call(path, "List", pb.ListPodResourcesRequest())
    assert [list(c.dynamic_resources) for c in listed.pod_resources[0].containers] == [[], []]
    assert list(listed.pod_resources[0].containers[1].cpu_ids) == [2, 3]


async def test_get_with_the_gate_off(env: Env) -> None:
    env.backend.pods.append(_pod("web"))
    path = await _start(env, {"KubeletPodResourcesGet": False})
    with pytest.raises(GRPCError) as failed:
        await _call(path, "Get", pb.GetPodResourcesRequest(pod_name="web", pod_namespace="default"))
    assert failed.value.message == "PodResources API Get method disabled"


async def test_rate_limit(env: Env) -> None:
    """Upstream's limit (bursts of 10, 100 a second) on a clock the test moves, so the
    figures hold however slow the machine is."""
    now = [0.0]
    lister = Lister(
        lambda: list(env.backend.pods),
        lambda ns, name: None,
        limiter=TokenBucket(clock=lambda: now[0]),
    )
    path = await env.nursery.start(serve_pod_resources, str(env.tmp), lister)

    async def many(n: int) -> list[Status | None]:
        channel = Channel(path=path)
        stub = PodResourcesListerStub(channel)
        out: list[Status | None] = []
        try:
            for _ in range(n):
                try:
                    await stub.List(pb.ListPodResourcesRequest(), timeout=10)
                    out.append(None)
                except GRPCError as exc:
                    out.append(exc.status)
                    assert exc.message == "rejected by rate limit"
        finally:
            channel.close()
        return out

    results = await trio_asyncio.aio_as_trio(many)(12)
    assert results == [None] * 10 + [Status.RESOURCE_EXHAUSTED] * 2
    now[0] += 0.05  # tokens come back at 100 a second: 5 of them
    results = await trio_asyncio.aio_as_trio(many)(6)
    assert results == [None] * 5 + [Status.RESOURCE_EXHAUSTED]


async def test_requests_over_4_mib_are_refused(env: Env) -> None:
    path = await _start(env)
    # a List request padded with a field List does not know (the server skips it)
    padded = pb.GetPodResourcesRequest(pod_name="x" * (4 * 1024 * 1024))

    async def go() -> Any:
        channel = Channel(path=path)
        try:
            method = UnaryUnaryMethod(
                channel, LIST, pb.GetPodResourcesRequest, pb.ListPodResourcesResponse
            )
            return await method(padded, timeout=10)
        finally:
            channel.close()

    with pytest.raises(GRPCError) as failed:
        await trio_asyncio.aio_as_trio(go)()
    assert (failed.value.status, failed.value.message) == (
        Status.RESOURCE_EXHAUSTED,
        f"grpc: received message larger than max ({padded.ByteSize()} vs. {4 * 1024 * 1024})",
    )
    assert await _call(path, "List", pb.ListPodResourcesRequest()) is not None


async def test_an_announced_gibibyte_is_refused_before_it_is_sent(env: Env) -> None:
    """The prefix alone decides: the server answers while the 1 GiB is still unsent."""
    path = await _start(env)

    async def announce() -> GRPCError:
        channel = Channel(path=path)
        try:
            async with PodResourcesListerStub(channel).List.open(timeout=10) as stream:
                await stream.send_request()
                await stream._stream.send_data(struct.pack(">?I", False, 1 << 30) + b"\0" * 64)
                await stream.recv_initial_metadata()
        except GRPCError as exc:
            return exc
        finally:
            channel.close()
        raise AssertionError("the server answered the request")

    with trio.fail_after(5):
        refused = await trio_asyncio.aio_as_trio(announce)()
    assert (refused.status, refused.message) == (
        Status.RESOURCE_EXHAUSTED,
        f"grpc: received message larger than max ({1 << 30} vs. {4 * 1024 * 1024})",
    )
