"""Device plugin health in pod status (gate ResourceHealthStatus): a device the plugin's
ListAndWatch lists Unhealthy shows in ``status.containerStatuses[].allocatedResourcesStatus``
of the pod holding it. FakeDevicePlugin (real gRPC), FakeApiServer, FakeRuntime; fake
clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.cm.devices import GRACE_PERIOD, HEALTHY, UNHEALTHY
from kubelet.testing import ContainerBehaviour, FakeRuntime
from kubelet.testing.fakedeviceplugin import FakeDevicePlugin

from .cluster_harness import Cluster, running_cluster
from .test_dra_health import health_of

RESOURCE = "example.com/resource"


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return ("registry.k8s.io/pause:3.9", "busybox:1.35")


async def _pod(c: Cluster, plugin: FakeDevicePlugin, name: str = "one") -> None:
    """A pod whose init and app containers each hold a device, running."""
    await c.wait_for(lambda: plugin.watchers > 0)
    await trio.sleep(1)
    c.fake.behave(ContainerBehaviour(exit_after=1), container="init")
    limits = {"limits": {RESOURCE: "1"}}
    c.create_pod(
        name,
        initContainers=[{"name": "init", "image": "busybox:1.35", "resources": limits}],
        containers=[{"name": "app", "image": "busybox:1.35", "resources": limits}],
    )
    await c.wait_for(lambda: c.phase(name) == "Running")


def _entry(device: str, health: str) -> list[dict[str, Any]]:
    return [{"name": RESOURCE, "resources": [{"resourceID": device, "health": health}]}]


def _device(plugin: FakeDevicePlugin) -> str:
    ((device,),) = plugin.allocations[-1]  # the app container's
    return device


async def test_an_unhealthy_device_plugin_device_shows_in_its_containers_status(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        plugin = FakeDevicePlugin(str(c.tmp / "root" / "device-plugins"))
        async with plugin.running():
            await _pod(c, plugin)
            device = _device(plugin)
            await c.wait_for(lambda: health_of(c, "one") == _entry(device, "Healthy"))
            plugin.set_health(device, UNHEALTHY)
            # pushed at once, not at the next periodic sync
            unhealthy = _entry(device, "Unhealthy")
            assert await c.wait_for(lambda: health_of(c, "one") == unhealthy, timeout=5) < 5
            obj = c.pod("one")
            assert obj is not None
            (init,) = obj["status"]["initContainerStatuses"]
            assert "allocatedResourcesStatus" not in init  # regular containers only
            plugin.set_health(device, HEALTHY)
            await c.wait_for(lambda: health_of(c, "one") == _entry(device, "Healthy"), timeout=5)
        # the plugin gone: its devices unhealthy, until the resource is removed
        await c.wait_for(lambda: health_of(c, "one") == unhealthy, timeout=5)
        await trio.sleep(GRACE_PERIOD + 1)
        await c.wait_for(lambda: health_of(c, "one") == _entry(device, "Healthy"), timeout=5)


async def test_device_plugin_health_gate_off_nothing(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    extra = ["--feature-gates=ResourceHealthStatus=false,ResourceHealthStatusMessage=false"]
    async with running_cluster(fake, short_tmp, extra=extra) as c:
        plugin = FakeDevicePlugin(str(c.tmp / "root" / "device-plugins"))
        async with plugin.running():
            await _pod(c, plugin)
            plugin.set_health(_device(plugin), UNHEALTHY)
            await trio.sleep(30)
            assert health_of(c, "one") is None
