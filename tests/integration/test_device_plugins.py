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

from kubelet.cm.devices import CHECKPOINT_FILE, HEALTHY, UNHEALTHY
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
        plugin = FakeDevicePlugin(_plugins_dir(c))
        async with plugin.running():
            await c.wait_for(lambda: _counts(c) == ("2", "2"))
            _asking(c, "one", 1)
            await c.wait_for(lambda: c.phase("one") == "Running")
            (app,) = [x for x in c.fake.running() if x.config.metadata.name == "app"]
            config = app.config
            assert [(d.container_path, d.host_path) for d in config.devices] == [
                ("/dev/example0", "/dev/null")
            ]
            envs = {kv.key: bytes(kv.value).decode() for kv in config.envs}
            assert envs["EXAMPLE_DEVICES"] in ("dev0", "dev1")
            assert config.annotations["example.com/devices"] == envs["EXAMPLE_DEVICES"]
            assert [d.name for d in config.CDI_devices] == [
                f"example.com/device={envs['EXAMPLE_DEVICES']}"
            ]
            assert plugin.allocations == [[[envs["EXAMPLE_DEVICES"]]]]
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
