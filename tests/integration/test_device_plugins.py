"""Device plugins through a whole kubelet on a fake clock: a FakeDevicePlugin speaking
v1beta1 gRPC on a unix socket registers with the kubelet's device manager, its devices
become the Node's extended resources, pods get them (or are refused), the pod-resources
API shows them, and plugin and kubelet restarts keep what running pods hold."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio_asyncio
from grpclib.client import Channel
from grpclib.exceptions import GRPCError
from prometheus_client import generate_latest

from kubelet.cm.devices import CHECKPOINT_FILE, GRACE_PERIOD, HEALTHY, SOCKET_NAME, UNHEALTHY
from kubelet.testing import FakeRuntime
from kubelet.testing.fakedeviceplugin import FakeDevicePlugin

from .cluster_harness import Cluster, running_cluster, start_cluster_kubelet
from .kubelet_harness import KUBELET_IMAGES, NODE

RESOURCE = "example.com/resource"


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def _plugins_dir(c: Cluster) -> str:
    return str(c.tmp / "root" / "device-plugins")


def _node_status(c: Cluster) -> dict[str, Any]:
    return dict((c.api.get("nodes", None, NODE) or {}).get("status") or {})


def _counts(c: Cluster) -> tuple[str | None, str | None]:
    status = _node_status(c)
    return (status.get("capacity") or {}).get(RESOURCE), (status.get("allocatable") or {}).get(
        RESOURCE
    )


def _asking(c: Cluster, name: str, count: int) -> None:
    c.create_pod(
        name,
        containers=[
            {
                "name": "app",
                "image": "busybox:1.35",
                "resources": {"limits": {RESOURCE: str(count)}},
            }
        ],
    )


async def test_plugin_devices_become_node_resources_and_pods_get_them(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        plugin = FakeDevicePlugin(
            _plugins_dir(c), mounts=(("/opt/example", str(short_tmp / "libs"), True),)
        )
        async with plugin.running():
            await c.wait_for(lambda: _counts(c) == ("2", "2"))
            _asking(c, "one", 1)
            await c.wait_for(lambda: c.phase("one") == "Running")
            (app,) = [x for x in c.fake.running() if x.config.metadata.name == "app"]
            config = app.config
            assert [(d.container_path, d.host_path, d.permissions) for d in config.devices] == [
                ("/dev/example0", "/dev/null", "rw")
            ]
            assert ("/opt/example", str(short_tmp / "libs"), True) in [
                (m.container_path, m.host_path, m.readonly) for m in config.mounts
            ]
            envs = {kv.key: bytes(kv.value).decode() for kv in config.envs}
            assert envs["EXAMPLE_DEVICES"] in ("dev0", "dev1")
            assert config.annotations["example.com/devices"] == envs["EXAMPLE_DEVICES"]
            assert [d.name for d in config.CDI_devices] == [
                f"example.com/device={envs['EXAMPLE_DEVICES']}"
            ]
            assert plugin.allocations == [[[envs["EXAMPLE_DEVICES"]]]]
            assert c.components is not None
            metrics = generate_latest(c.components.core.metrics.registry).decode()
            count = "kubelet_device_plugin_alloc_duration_seconds_count"
            assert f'{count}{{resource_name="{RESOURCE}"}} 1.0' in metrics
            _asking(c, "two", 2)
            await c.wait_for(lambda: c.phase("two") == "Failed")
            status = (c.pod("two") or {})["status"]
            assert status["reason"] == "UnexpectedAdmissionError"
            assert status["message"] == (
                "Pod was rejected: Allocate failed due to requested number of devices "
                "unavailable for "
                "example.com/resource. Requested: 2, Available: 1, which is unexpected"
            )
            checkpoint = json.loads((Path(_plugins_dir(c)) / CHECKPOINT_FILE).read_text())
            (entry,) = checkpoint["Data"]["PodDeviceEntries"]
            assert entry["ResourceName"] == RESOURCE
            assert entry["DeviceIDs"] == {"-1": [envs["EXAMPLE_DEVICES"]]}
            assert checkpoint["Data"]["RegisteredDevices"] == {RESOURCE: ["dev0", "dev1"]}


def _app(c: Cluster, pod: str) -> Any:
    (container,) = [
        x
        for x in c.fake.running()
        if x.config.metadata.name == "app" and x.config.labels.get("io.kubernetes.pod.name") == pod
    ]
    return container


async def _pod_resources(c: Cluster, rpc: str, request: Any) -> Any:
    from kubelet.server.podresources import podresources_api_pb2 as pb
    from kubelet.server.podresources.podresources_api_grpc import PodResourcesListerStub

    channel = Channel(path=str(c.tmp / "root" / "pod-resources" / "kubelet.sock"))
    try:
        method = getattr(PodResourcesListerStub(channel), rpc)
        return await trio_asyncio.aio_as_trio(method)(getattr(pb, request)())
    finally:
        channel.close()


async def test_pod_resources_show_the_devices_and_plugin_restarts_keep_running_pods(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        plugin = FakeDevicePlugin(_plugins_dir(c), topology={"dev0": 0, "dev1": 1})
        await plugin.start()
        await plugin.register()
        await c.wait_for(lambda: _counts(c) == ("2", "2"))
        _asking(c, "one", 1)
        await c.wait_for(lambda: c.phase("one") == "Running")
        app = _app(c, "one")
        listed = await _pod_resources(c, "List", "ListPodResourcesRequest")
        (pod,) = [p for p in listed.pod_resources if p.name == "one"]
        ((container),) = pod.containers
        (device,) = container.devices
        assert device.resource_name == RESOURCE
        held = device.device_ids[0]
        assert [n.ID for n in device.topology.nodes] == [int(held[-1])]
        allocatable = await _pod_resources(
            c, "GetAllocatableResources", "AllocatableResourcesRequest"
        )
        assert sorted(d.device_ids[0] for d in allocatable.devices) == ["dev0", "dev1"]

        await plugin.crash()  # capacity kept, allocatable drops, the pod runs on
        await c.wait_for(lambda: _counts(c) == ("2", "0"), timeout=15)
        await plugin.start()
        await plugin.register()
        await c.wait_for(lambda: _counts(c) == ("2", "2"), timeout=15)
        assert _app(c, "one").id == app.id
        assert c.phase("one") == "Running"
        _asking(c, "two", 2)  # the running pod still holds its device
        await c.wait_for(lambda: c.phase("two") == "Failed")
        assert "Requested: 2, Available: 1" in (c.pod("two") or {})["status"]["message"]

        await plugin.crash()  # gone past the grace period: the resource is removed
        await c.wait_for(lambda: _counts(c) == ("2", "0"), timeout=15)
        await trio.sleep(GRACE_PERIOD)
        await c.wait_for(lambda: _counts(c) == (None, None), timeout=30)
        assert _app(c, "one").id == app.id


async def test_a_restarted_kubelet_keeps_the_allocations_of_its_checkpoint(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        plugin = FakeDevicePlugin(_plugins_dir(c))
        async with plugin.running():
            await c.wait_for(lambda: _counts(c) == ("2", "2"))
            _asking(c, "one", 1)
            await c.wait_for(lambda: c.phase("one") == "Running")
            app = _app(c, "one")
            assert c.scope is not None
            c.scope.cancel()
            await trio.sleep(1)
            await start_cluster_kubelet(c)
            # the socket is made anew: the plugin registers again, as plugins watching it do
            await c.wait_for(lambda: os.path.exists(os.path.join(_plugins_dir(c), SOCKET_NAME)))
            await plugin.register()
            await c.wait_for(lambda: _counts(c) == ("2", "2"), timeout=15)
            assert c.components is not None
            cm = c.components.cm
            # node status may still show the counts from before the restart: wait for the
            # plugin's own list of healthy devices to reach the new kubelet
            await c.wait_for(lambda: len(cm.allocatable_devices()) == 2, timeout=15)
            held = c.components.cm.container_devices(
                app.config.labels["io.kubernetes.pod.uid"], "app"
            )
            assert [d.device_id for d in held] == [_env(app)["EXAMPLE_DEVICES"]]
            _asking(c, "two", 2)
            await c.wait_for(lambda: c.phase("two") == "Failed")
            assert "Requested: 2, Available: 1" in (c.pod("two") or {})["status"]["message"]
            assert _app(c, "one").id == app.id
            assert len(plugin.allocations) == 1  # not allocated again


def _env(container: Any) -> dict[str, str]:
    return {kv.key: bytes(kv.value).decode() for kv in container.config.envs}


async def test_registrations_are_checked_and_a_storm_leaves_one_plugin(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        plugin = FakeDevicePlugin(_plugins_dir(c))
        await plugin.start()
        with pytest.raises(GRPCError) as refused:
            await plugin.register(version="v1alpha1")
        assert refused.value.message == (
            'requested API version "v1alpha1" is not supported by kubelet. '
            'Supported versions are ["v1beta1"]'
        )
        with pytest.raises(GRPCError) as refused:
            await plugin.register(resource="resource")
        assert refused.value.message == 'the ResourceName "resource" is invalid'
        with pytest.raises(GRPCError):
            await plugin.register(resource="kubernetes.io/resource")
        with pytest.raises(GRPCError, match="outside"):
            plugin.endpoint = "../escape.sock"
            await plugin.register()
        plugin.endpoint = "example.sock"
        for _ in range(20):
            await plugin.register()
        await c.wait_for(lambda: _counts(c) == ("2", "2"))
        await trio.sleep(5)
        assert plugin.watchers == 1
        plugin.set_health("dev1", UNHEALTHY)
        await c.wait_for(lambda: _counts(c) == ("2", "1"), timeout=15)
        assert c.components is not None
        text = generate_latest(c.components.core.metrics.registry).decode()
        assert f'kubelet_device_plugin_registration_total{{resource_name="{RESOURCE}"}} 22.0' in (
            text
        )
        await plugin.crash()


async def test_a_slow_or_failing_allocate_holds_only_its_own_pod(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        plugin = FakeDevicePlugin(_plugins_dir(c))
        async with plugin.running():
            await c.wait_for(lambda: _counts(c) == ("2", "2"))
            plugin.allocate_delay = 20.0
            started = trio.current_time()
            _asking(c, "slow", 1)
            c.create_pod("plain")
            ran = await c.wait_for(lambda: c.phase("plain") == "Running")
            assert ran - started < 10
            assert c.phase("slow") == "Pending"
            done = await c.wait_for(lambda: c.phase("slow") == "Running")
            assert done - started >= 20
            plugin.allocate_delay = 0.0
            plugin.allocate_error = "device on fire"
            _asking(c, "failing", 1)
            await c.wait_for(lambda: len(plugin.allocations) >= 3)
            await trio.sleep(5)
            assert c.phase("failing") == "Pending" and not [
                x
                for x in c.fake.containers.values()
                if x.config.labels.get("io.kubernetes.pod.name") == "failing"
            ]
            plugin.allocate_error = ""
            await c.wait_for(lambda: c.phase("failing") == "Running", timeout=120)


async def test_a_plugins_preferred_allocation_is_used_and_pre_start_called(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        devices = {f"dev{n}": HEALTHY for n in range(4)}
        plugin = FakeDevicePlugin(
            _plugins_dir(c), devices=devices, preferred=True, pre_start_required=True
        )
        async with plugin.running():
            await c.wait_for(lambda: _counts(c) == ("4", "4"))
            _asking(c, "one", 2)
            await c.wait_for(lambda: c.phase("one") == "Running")
            (request,) = plugin.preferred_requests
            (ask,) = request.container_requests
            assert sorted(ask.available_deviceIDs) == ["dev0", "dev1", "dev2", "dev3"]
            assert ask.allocation_size == 2
            # the fake prefers the last devices; admission alone would give dev0, dev1
            assert plugin.allocations == [[["dev3", "dev2"]]]
            assert plugin.pre_starts == [["dev3", "dev2"]]
            assert _env(_app(c, "one"))["EXAMPLE_DEVICES"] == "dev3,dev2"


async def test_a_hung_plugin_holds_no_other_and_a_gone_pod_gives_its_devices_back(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        hung = FakeDevicePlugin(_plugins_dir(c), "example.com/hung", endpoint="hung.sock")
        hung.options_delay = 3600.0
        await hung.start()
        plugin = FakeDevicePlugin(_plugins_dir(c))
        async with trio.open_nursery() as nursery, plugin.running():
            started = trio.current_time()

            async def register_hung() -> None:
                with pytest.raises(GRPCError, match="failed to dial device plugin"):
                    await hung.register()

            nursery.start_soon(register_hung)
            await c.wait_for(lambda: _counts(c) == ("2", "2"))
            assert trio.current_time() - started < 5
            _asking(c, "one", 1)
            await c.wait_for(lambda: c.phase("one") == "Running")
            uid = (c.pod("one") or {})["metadata"]["uid"]
            assert c.components is not None
            cm = c.components.cm
            assert cm.container_devices(uid, "app")
            c.api.delete("pods", "default", "one", grace=0)
            await c.wait_for(lambda: not cm.container_devices(uid, "app"), timeout=120)
            _asking(c, "two", 2)  # both devices free again once its teardown is done
            await c.wait_for(lambda: c.phase("two") == "Running")
            status = _node_status(c)
            assert "example.com/hung" not in status["capacity"]
        await hung.crash()


async def test_a_corrupt_checkpoint_is_ignored(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugins = short_tmp / "root" / "device-plugins"
    plugins.mkdir(parents=True)
    (plugins / CHECKPOINT_FILE).write_text('{"Data": {"PodDeviceEntries": [')
    async with running_cluster(fake, short_tmp) as c:
        plugin = FakeDevicePlugin(_plugins_dir(c))
        async with plugin.running():
            await c.wait_for(lambda: _counts(c) == ("2", "2"))
            await c.wait_for(lambda: "dev0" in (plugins / CHECKPOINT_FILE).read_text())
            doc = json.loads((plugins / CHECKPOINT_FILE).read_text())
            assert doc["Data"]["RegisteredDevices"] == {RESOURCE: ["dev0", "dev1"]}
