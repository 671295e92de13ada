"""Pods with ResourceClaims: prepared by a registered DRA driver (FakeDraPlugin, the real
gRPC API on a unix socket) before the sandbox, CDI devices into CreateContainer,
unprepared once the last pod using the claim is gone; failures as upstream's
``FailedPrepareDynamicResources`` event and retried. API pods against FakeApiServer
and FakeRuntime; fake clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio_asyncio
from grpclib.client import Channel

from kubelet.cm.dra import DraManager
from kubelet.metrics import exposition
from kubelet.server.podresources import podresources_api_pb2 as pb
from kubelet.server.podresources.podresources_api_grpc import PodResourcesListerStub
from kubelet.testing import FakeDevice, FakeDraPlugin, FakeRuntime

from .cluster_harness import Cluster, running_cluster, start_cluster_kubelet
from .kubelet_harness import NODE

REASON = "FailedPrepareDynamicResources"
DRIVER = "gpu.example.com"
PREPARE = "NodePrepareResources"
UNPREPARE = "NodeUnprepareResources"
DEVICES = (
    FakeDevice("pool", "gpu-0", (f"{DRIVER}/gpu=gpu-0",), ("gpu",)),
    FakeDevice("pool", "nic-0", (f"{DRIVER}/nic=nic-0",), ("nic",)),
)


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return ("registry.k8s.io/pause:3.9", "busybox:1.35")


def events(c: Cluster, reason: str) -> list[str]:
    return [e["message"] for e in c.api.list("events", "default") if e.get("reason") == reason]


def dra(c: Cluster) -> DraManager:
    assert c.components is not None
    handler = c.components.cm.plugin_handlers()["DRAPlugin"]
    manager = next(m for m in c.components.cm.managers if isinstance(m, DraManager))
    assert manager.registration is handler
    return manager


async def register(c: Cluster, plugin: FakeDraPlugin) -> None:
    await plugin.start()
    await dra(c).registration.register(plugin.driver, plugin.endpoint, plugin.services)


def make_claim(c: Cluster, name: str, users: list[str], *, node: str = NODE) -> str:
    """A claim allocated by the scheduler (to ``node``) and reserved for ``users``."""
    obj = c.api.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu"}, {"name": "nic"}]}},
        }
    )
    reserved = []
    for user in users:
        pod = c.pod(user)
        assert pod is not None
        reserved.append({"resource": "pods", "name": user, "uid": pod["metadata"]["uid"]})
    status = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": "pool", "device": "gpu-0"},
                    {"request": "nic", "driver": DRIVER, "pool": "pool", "device": "nic-0"},
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        },
        "reservedFor": reserved,
    }
    c.api.update_status("ResourceClaim", "default", name, lambda s: s.update(status))
    return str(obj["metadata"]["uid"])


def claim_pod(c: Cluster, name: str, claim: str, request: str = "") -> None:
    ref: dict[str, Any] = {"name": "gpu", **({"request": request} if request else {})}
    c.create_pod(
        name,
        resourceClaims=[{"name": "gpu", "resourceClaimName": claim}],
        containers=[{"name": "app", "image": "busybox:1.35", "resources": {"claims": [ref]}}],
    )


async def list_pod_resources(root: Path) -> Any:
    """List on the kubelet's pod-resources socket, through a real gRPC client."""

    async def go() -> Any:
        channel = Channel(path=str(root / "pod-resources" / "kubelet.sock"))
        try:
            return await PodResourcesListerStub(channel).List(
                pb.ListPodResourcesRequest(), timeout=10
            )
        finally:
            channel.close()

    return await trio_asyncio.aio_as_trio(go)()


def cdi_of(fake: FakeRuntime, pod: str) -> list[list[str]]:
    return [
        [d.name for d in x.config.CDI_devices]
        for x in fake.containers.values()
        if x.config.labels.get("io.kubernetes.pod.name") == pod
    ]


async def test_a_pod_with_a_claim_runs_with_its_devices_and_the_claim_is_unprepared_after(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    async with running_cluster(fake, short_tmp) as c:
        await register(c, plugin)
        claim_pod(c, "gpu", "gpu-claim", request="gpu")
        uid = make_claim(c, "gpu-claim", ["gpu"])
        await c.wait_for(lambda: c.phase("gpu") == "Running")
        assert plugin.count(PREPARE) == 1 and plugin.prepared == {uid}
        assert plugin.calls[0].claims == (("default", uid, "gpu-claim"),)
        assert plugin.calls[0].service == "v1"  # the newest both speak
        assert cdi_of(fake, "gpu") == [[f"{DRIVER}/gpu=gpu-0"]]  # only its request's device
        (container,) = fake.containers.values()
        assert container.config.annotations[f"cdi.k8s.io/{DRIVER}_{uid}"] == f"{DRIVER}/gpu=gpu-0"
        await trio.sleep(120)  # periodic syncs do not prepare again
        assert plugin.count(PREPARE) == 1
        assert c.components is not None
        text = exposition(c.components.metrics.registry).decode()
        assert f'dra_resource_claims_in_use{{driver_name="{DRIVER}"}} 1.0' in text
        assert 'dra_operations_duration_seconds_count{is_error="false",' in text
        c.api.delete("pods", "default", "gpu", grace=0)
        await c.wait_for(lambda: plugin.count(UNPREPARE) == 1)
        assert plugin.prepared == set()
        assert dra(c).claims == {}


async def test_pod_resources_lists_the_claims_each_container_uses(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    async with running_cluster(fake, short_tmp) as c:
        await register(c, plugin)
        c.create_pod(
            "gpu",
            resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}],
            containers=[
                {
                    "name": "app",
                    "image": "busybox:1.35",
                    "resources": {"claims": [{"name": "gpu", "request": "gpu"}]},
                },
                {"name": "side", "image": "busybox:1.35"},
            ],
        )
        make_claim(c, "gpu-claim", ["gpu"])
        await c.wait_for(lambda: c.phase("gpu") == "Running")
        listed = await list_pod_resources(short_tmp / "root")
        (pod,) = listed.pod_resources
        app, side = pod.containers
        assert list(side.dynamic_resources) == []
        (claim,) = app.dynamic_resources
        # the whole claim, as upstream: both requests' devices, each with its CDI IDs
        assert (claim.claim_name, claim.claim_namespace) == ("gpu-claim", "default")
        assert [
            (r.driver_name, r.pool_name, r.device_name, [d.name for d in r.cdi_devices])
            for r in claim.claim_resources
        ] == [
            (DRIVER, "pool", "gpu-0", [f"{DRIVER}/gpu=gpu-0"]),
            (DRIVER, "pool", "nic-0", [f"{DRIVER}/nic=nic-0"]),
        ]


async def test_claims_are_prepared_after_the_volumes_right_before_the_sandbox(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    async with running_cluster(fake, short_tmp) as c:
        await register(c, plugin)
        c.create_pod(
            "gpu",
            resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}],
            volumes=[{"name": "settings", "configMap": {"name": "settings"}}],
            containers=[
                {
                    "name": "app",
                    "image": "busybox:1.35",
                    "resources": {"claims": [{"name": "gpu"}]},
                    "volumeMounts": [{"name": "settings", "mountPath": "/etc/settings"}],
                }
            ],
        )
        make_claim(c, "gpu-claim", ["gpu"])
        await c.wait_for(lambda: events(c, "FailedMount"), timeout=60)
        await trio.sleep(30)
        assert plugin.count(PREPARE) == 0  # the volumes first, as upstream
        c.api.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"color": "blue"},
            }
        )
        await c.wait_for(lambda: c.phase("gpu") == "Running", timeout=120)
        assert plugin.count(PREPARE) == 1


async def test_a_shared_claim_is_prepared_once_and_unprepared_when_the_last_pod_goes(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    async with running_cluster(fake, short_tmp) as c:
        await register(c, plugin)
        claim_pod(c, "a", "shared")
        claim_pod(c, "b", "shared")
        make_claim(c, "shared", ["a", "b"])
        await c.wait_for(lambda: c.phase("a") == "Running" and c.phase("b") == "Running")
        assert plugin.count(PREPARE) == 1
        assert cdi_of(fake, "a") == [[f"{DRIVER}/gpu=gpu-0", f"{DRIVER}/nic=nic-0"]]
        c.api.delete("pods", "default", "a", grace=0)
        await c.wait_for(lambda: c.pod("a") is None)
        await trio.sleep(30)
        assert plugin.count(UNPREPARE) == 0  # b still uses it
        c.api.delete("pods", "default", "b", grace=0)
        await c.wait_for(lambda: plugin.count(UNPREPARE) == 1)


async def test_a_restart_keeps_the_claim_prepared_and_unprepares_when_the_pod_goes(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    async with running_cluster(fake, short_tmp) as c:
        await register(c, plugin)
        claim_pod(c, "gpu", "gpu-claim")
        make_claim(c, "gpu-claim", ["gpu"])
        await c.wait_for(lambda: c.phase("gpu") == "Running")
        assert (short_tmp / "root" / "dra_manager_state").exists()
        assert c.scope is not None
        c.scope.cancel()
        await trio.sleep(5)
        await start_cluster_kubelet(c)
        await dra(c).registration.register(plugin.driver, plugin.endpoint, plugin.services)
        await trio.sleep(180)  # syncs and reconcile passes of the running pod
        assert plugin.count(PREPARE) == 1 and plugin.count(UNPREPARE) == 0
        c.api.delete("pods", "default", "gpu", grace=0)
        await c.wait_for(lambda: plugin.count(UNPREPARE) == 1)
        assert plugin.prepared == set()


async def test_a_failing_driver_gives_upstreams_event_and_the_prepare_is_retried(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    plugin.fail["gpu-claim"] = "device is on fire"
    async with running_cluster(fake, short_tmp) as c:
        await register(c, plugin)
        claim_pod(c, "gpu", "gpu-claim")
        make_claim(c, "gpu-claim", ["gpu"])
        await c.wait_for(lambda: events(c, REASON))
        assert events(c, REASON)[0] == (
            "Failed to prepare dynamic resources: prepare dynamic resources: "
            "NodePrepareResources failed for ResourceClaim gpu-claim: device is on fire"
        )
        assert fake.calls_of("RunPodSandbox") == []
        plugin.fail.clear()
        await c.wait_for(lambda: c.phase("gpu") == "Running")
        assert plugin.count(PREPARE) >= 2


async def test_an_unregistered_driver_or_an_unreserved_claim_keeps_the_pod_waiting(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    async with running_cluster(fake, short_tmp) as c:
        claim_pod(c, "gpu", "gpu-claim")
        make_claim(c, "gpu-claim", ["gpu"])
        await c.wait_for(lambda: events(c, REASON))
        assert events(c, REASON)[0].endswith(f"DRA driver {DRIVER} is not registered")
        claim_pod(c, "other", "not-mine")
        make_claim(c, "not-mine", ["gpu"])
        want = "pod other ("
        await c.wait_for(lambda: any(want in m for m in events(c, REASON)))
        await register(c, plugin)
        await c.wait_for(lambda: c.phase("gpu") == "Running")
        await trio.sleep(30)
        assert c.phase("other") == "Pending"
        assert plugin.count(PREPARE) == 1  # only the reserved claim


async def test_a_slow_or_crashed_driver_fails_the_prepare_and_it_is_retried(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    plugin.delay = 100.0  # beyond the 45 s call timeout
    async with running_cluster(fake, short_tmp) as c:
        await register(c, plugin)
        claim_pod(c, "gpu", "gpu-claim")
        make_claim(c, "gpu-claim", ["gpu"])
        await c.wait_for(lambda: events(c, REASON), timeout=120)
        assert "NodePrepareResources: " in events(c, REASON)[0]
        plugin.crash()
        plugin.delay = 0.0
        await trio.sleep(30)
        assert c.phase("gpu") == "Pending"
        await plugin.start()
        await c.wait_for(lambda: c.phase("gpu") == "Running", timeout=300)


async def test_extended_resources_claimed_by_the_scheduler_reach_their_containers(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    # DRAExtendedResource: the scheduler makes a claim for an extended resource no device
    # plugin offers and records it, with each container's request, in the pod's status.
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    async with running_cluster(fake, short_tmp) as c:
        await register(c, plugin)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "ext", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "busybox:1.35",
                        "resources": {"requests": {"example.com/gpu": "1"}},
                    },
                    {"name": "side", "image": "busybox:1.35"},
                ]
            },
        }
        c.api.create(body)
        claim = {
            "resourceClaimName": "ext-extended-resources-x7k2p",
            "requestMappings": [
                {"containerName": "app", "resourceName": "example.com/gpu", "requestName": "gpu"}
            ],
        }
        c.api.update_status(
            "Pod", "default", "ext", lambda s: s.update(extendedResourceClaimStatus=claim)
        )
        make_claim(c, "ext-extended-resources-x7k2p", ["ext"])
        c.api.patch("Pod", "default", "ext", {"spec": {"nodeName": NODE}})
        await c.wait_for(lambda: c.phase("ext") == "Running")
        assert plugin.count(PREPARE) == 1
        by_name = {
            x.config.metadata.name: [d.name for d in x.config.CDI_devices]
            for x in fake.containers.values()
        }
        assert by_name == {"app": [f"{DRIVER}/gpu=gpu-0"], "side": []}
        status = (c.pod("ext") or {}).get("status") or {}
        assert status.get("extendedResourceClaimStatus") == claim  # the kubelet keeps it
