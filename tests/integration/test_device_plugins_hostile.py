"""Device plugins that misbehave, through a whole kubelet on a fake clock: a plugin may
cost the kubelet a bounded amount of work and memory, never lead it to a socket outside
its directory, and never keep other plugins from registering."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
from grpclib.exceptions import GRPCError
from prometheus_client import generate_latest

from kubelet.cm.devices import HEALTHY, MAX_DEVICES, MAX_DIALS, MAX_RESOURCES, SOCKET_NAME
from kubelet.testing import FakeRuntime
from kubelet.testing.fakedeviceplugin import FakeDevicePlugin

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES, NODE

RESOURCE = "example.com/resource"


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def _plugins_dir(c: Cluster) -> str:
    return str(c.tmp / "root" / "device-plugins")


async def _serving(c: Cluster) -> None:
    await c.wait_for(lambda: os.path.exists(os.path.join(_plugins_dir(c), SOCKET_NAME)))


def _capacity(c: Cluster, resource: str = RESOURCE) -> str | None:
    status = (c.api.get("nodes", None, NODE) or {}).get("status") or {}
    return (status.get("capacity") or {}).get(resource)


async def test_a_socket_behind_a_symbolic_link_or_a_plain_file_is_not_dialled(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        await _serving(c)
        outside = short_tmp / "outside"
        outside.mkdir()
        plugin = FakeDevicePlugin(str(outside))
        await plugin.start()
        os.symlink(plugin.path, os.path.join(_plugins_dir(c), "link.sock"))
        Path(_plugins_dir(c), "plain.sock").write_text("")
        for endpoint, why in (("link.sock", "symbolic link"), ("plain.sock", "not a unix")):
            naming = FakeDevicePlugin(_plugins_dir(c), endpoint=endpoint)
            with pytest.raises(GRPCError, match=why):
                await naming.register()
        assert plugin.watchers == 0
        assert _capacity(c) is None
        await plugin.crash()


async def test_a_device_list_over_the_bound_fails_the_plugin_not_the_kubelet(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        await _serving(c)
        devices = {f"dev{i}": HEALTHY for i in range(MAX_DEVICES + 1)}
        big = FakeDevicePlugin(_plugins_dir(c), "example.com/big", devices, endpoint="big.sock")
        plugin = FakeDevicePlugin(_plugins_dir(c))
        async with big.running(), plugin.running():
            await c.wait_for(lambda: _capacity(c) == "2")
            await c.wait_for(lambda: big.watchers == 0)
            await trio.sleep(5)
            assert _capacity(c, "example.com/big") in (None, "0")


async def test_a_registration_flood_is_bounded_and_a_good_plugin_still_registers(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        await _serving(c)
        hung = FakeDevicePlugin(_plugins_dir(c), endpoint="hung.sock")
        hung.options_delay = 3600.0
        await hung.start()
        refused: list[str] = []

        async def register(resource: str) -> None:
            try:
                await hung.register(resource=resource)
            except GRPCError as exc:
                refused.append(str(exc.message))

        async with trio.open_nursery() as nursery:
            for i in range(MAX_DIALS + 20):
                nursery.start_soon(register, f"example.com/flood-{i}")
        in_progress = [m for m in refused if "registrations in progress" in m]
        assert len(in_progress) == 20
        assert len(refused) == MAX_DIALS + 20  # the rest gave up dialling
        plugin = FakeDevicePlugin(_plugins_dir(c))
        async with plugin.running():
            await c.wait_for(lambda: _capacity(c) == "2")
        await hung.crash()


async def test_made_up_resource_names_are_counted_in_a_bounded_number_of_series(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        await _serving(c)
        plugin = FakeDevicePlugin(_plugins_dir(c), endpoint="none.sock")
        for i in range(MAX_RESOURCES + 50):
            with pytest.raises(GRPCError):
                await plugin.register(resource=f"example.com/made-up-{i}")
        assert c.components is not None
        text = generate_latest(c.components.core.metrics.registry).decode()
        assert text.count("kubelet_device_plugin_registration_total{") == MAX_RESOURCES, SOCKET_NAME
