"""DRA device health in pod status (gate ResourceHealthStatus): a driver's
``v1alpha1.DRAResourceHealth`` stream (FakeDraPlugin, real gRPC on a unix socket) reaches
``status.containerStatuses[].allocatedResourcesStatus`` of the pods using its devices.
FakeApiServer and FakeRuntime; fake clock."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.testing import FakeDevice, FakeDraPlugin, FakeRuntime

from .cluster_harness import Cluster, running_cluster
from .test_dynamic_resources import DRIVER, claim_pod, dra, make_claim, register

DEVICES = (
    FakeDevice("pool", "gpu-0", (f"{DRIVER}/gpu=gpu-0",), ("gpu",)),
    FakeDevice("pool", "nic-0", (), ("nic",)),  # no CDI ID: named <driver>/<pool>/<device>
)
IDS = {"gpu-0": f"{DRIVER}/gpu=gpu-0", "nic-0": f"{DRIVER}/pool/nic-0"}


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return ("registry.k8s.io/pause:3.9", "busybox:1.35")


def health_of(c: Cluster, pod: str, container: str = "app") -> Any:
    """The container's ``allocatedResourcesStatus`` as the API server holds it."""
    obj = c.pod(pod)
    assert obj is not None
    for status in obj.get("status", {}).get("containerStatuses", ()):
        if status["name"] == container:
            return status.get("allocatedResourcesStatus")
    return None


def entry(name: str, gpu: str, nic: str) -> list[dict[str, Any]]:
    """The one entry a container using the claim gets: every device of the claim, even
    when it names one request (as upstream)."""
    health = {"gpu-0": gpu, "nic-0": nic}
    return [{"name": name, "resources": [{"resourceID": IDS[d], "health": health[d]} for d in IDS]}]


async def run_pod(
    c: Cluster, plugin: FakeDraPlugin, request: str = "gpu", claims: Sequence[str] = ()
) -> None:
    await register(c, plugin)
    claim_pod(c, "gpu", "gpu-claim", request=request)
    make_claim(c, "gpu-claim", ["gpu"])
    await c.wait_for(lambda: c.phase("gpu") == "Running")


async def test_an_unhealthy_device_shows_in_its_containers_status(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    plugin.health = {("pool", "gpu-0"): "Healthy", ("pool", "nic-0"): "Healthy"}
    async with running_cluster(fake, short_tmp) as c:
        await run_pod(c, plugin)
        assert plugin.health_streams == 1
        healthy = entry("claim:gpu/gpu", "Healthy", "Healthy")
        await c.wait_for(lambda: health_of(c, "gpu") == healthy)
        plugin.set_health("pool", "gpu-0", "Unhealthy")
        # pushed by the stream, well before a periodic resync would have come
        sick = entry("claim:gpu/gpu", "Unhealthy", "Healthy")
        assert await c.wait_for(lambda: health_of(c, "gpu") == sick, timeout=5) < 5
        plugin.set_health("pool", "nic-0", "Unhealthy")  # another request's device
        both = entry("claim:gpu/gpu", "Unhealthy", "Unhealthy")
        await c.wait_for(lambda: health_of(c, "gpu") == both, timeout=5)
        plugin.set_health("pool", "gpu-0", "Healthy")
        plugin.set_health("pool", "nic-0", "Healthy")
        await c.wait_for(lambda: health_of(c, "gpu") == healthy, timeout=5)


async def test_a_whole_claim_lists_every_device_and_silence_goes_unknown(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    plugin.health = {("pool", "gpu-0"): "Unhealthy", ("pool", "nic-0"): "Healthy"}
    async with running_cluster(fake, short_tmp) as c:
        await run_pod(c, plugin, request="")
        both = entry("claim:gpu", "Unhealthy", "Healthy")
        await c.wait_for(lambda: health_of(c, "gpu") == both)
        plugin.health_silent = True  # the driver stops reporting: entries go stale
        unknown = entry("claim:gpu", "Unknown", "Unknown")
        await c.wait_for(lambda: health_of(c, "gpu") == unknown, timeout=120)


async def test_a_broken_stream_is_opened_again_and_a_driver_gone_reads_unknown(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    plugin.health = {("pool", "gpu-0"): "Healthy", ("pool", "nic-0"): "Healthy"}
    async with running_cluster(fake, short_tmp) as c:
        await run_pod(c, plugin)
        plugin.break_health()
        await trio.sleep(1)
        plugin.mend_health()
        plugin.set_health("pool", "gpu-0", "Unhealthy")
        await c.wait_for(lambda: plugin.health_streams >= 2, timeout=30)
        unhealthy = entry("claim:gpu/gpu", "Unhealthy", "Healthy")
        await c.wait_for(lambda: health_of(c, "gpu") == unhealthy, timeout=30)
        await dra(c).registration.deregister(DRIVER)
        gone = entry("claim:gpu/gpu", "Unknown", "Unknown")
        await c.wait_for(lambda: health_of(c, "gpu") == gone, timeout=5)


async def test_a_driver_without_the_health_service_gives_no_entries(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)  # health None
    async with running_cluster(fake, short_tmp) as c:
        await run_pod(c, plugin)
        await trio.sleep(30)
        assert health_of(c, "gpu") == entry("claim:gpu/gpu", "Unknown", "Unknown")


async def test_gate_off_no_stream_and_no_entries(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    plugin.health = {("pool", "gpu-0"): "Unhealthy", ("pool", "nic-0"): "Healthy"}
    extra = ["--feature-gates=ResourceHealthStatus=false,ResourceHealthStatusMessage=false"]
    async with running_cluster(fake, short_tmp, extra=extra) as c:
        await run_pod(c, plugin)
        await trio.sleep(30)
        assert plugin.health_streams == 0
        assert health_of(c, "gpu") is None


def device(name: str, health: str, message: str = "") -> dict[str, str]:
    out = {"resourceID": IDS[name], "health": health}
    return {**out, "message": message} if message else out


async def test_a_devices_own_timeout_and_message(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    plugin.health = {("pool", "gpu-0"): "Healthy", ("pool", "nic-0"): "Healthy"}
    async with running_cluster(fake, short_tmp) as c:
        await run_pod(c, plugin)
        await c.wait_for(lambda: health_of(c, "gpu") == entry("claim:gpu/gpu", *["Healthy"] * 2))
        plugin.set_health("pool", "gpu-0", "Unhealthy", "ECC error count exceeded", timeout=300)
        sick = [
            {
                "name": "claim:gpu/gpu",
                "resources": [
                    device("gpu-0", "Unhealthy", "ECC error count exceeded"),
                    device("nic-0", "Healthy"),
                ],
            }
        ]
        assert await c.wait_for(lambda: health_of(c, "gpu") == sick, timeout=5) < 5
        plugin.health_silent = True
        # past upstream's 30 s default and two periodic syncs: the nic (no timeout of its
        # own) reads Unknown, the gpu's report holds its own 300 s
        await trio.sleep(150)
        status = health_of(c, "gpu")
        assert status[0]["resources"] == [
            device("gpu-0", "Unhealthy", "ECC error count exceeded"),
            device("nic-0", "Unknown"),
        ]
        # once its own timeout passes it reads Unknown, and its message goes with it
        unknown = entry("claim:gpu/gpu", "Unknown", "Unknown")
        assert await c.wait_for(lambda: health_of(c, "gpu") == unknown, timeout=300) > 100


async def test_gate_message_off_no_message(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeDraPlugin(DRIVER, short_tmp / "dra.sock", DEVICES)
    plugin.health = {("pool", "gpu-0"): "Healthy", ("pool", "nic-0"): "Healthy"}
    extra = ["--feature-gates=ResourceHealthStatusMessage=false"]
    async with running_cluster(fake, short_tmp, extra=extra) as c:
        await run_pod(c, plugin)
        plugin.set_health("pool", "gpu-0", "Unhealthy", "ECC error count exceeded")
        sick = entry("claim:gpu/gpu", "Unhealthy", "Healthy")  # no message key
        await c.wait_for(lambda: health_of(c, "gpu") == sick, timeout=5)
        plugin.set_health("pool", "gpu-0", "Unhealthy", "XID 79")
        await trio.sleep(20)
        assert health_of(c, "gpu") == sick
