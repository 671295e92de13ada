"""The device manager as a topology hint provider on a whole kubelet: a fake /sys of one
socket with two NUMA nodes (CPUs 0-1 and 2-3, CPU 0 reserved), the static CPU policy and
the single-numa-node topology policy; a FakeDevicePlugin whose healthy device is on NUMA
node 1. A Guaranteed container asking one CPU and one device gets its CPU on node 1
(without the device's hint the narrowest CPU placement, node 0, would win)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio

from kubelet.cm.devices import HEALTHY, UNHEALTHY
from kubelet.testing import FakeRuntime
from kubelet.testing.fakedeviceplugin import FakeDevicePlugin
from kubelet.testing.fakesysfs import write_sysfs

from .cluster_harness import MACHINE
from .kubelet_harness import KUBELET_IMAGES, running_kubelet

FOUR_CPUS = attrs.evolve(MACHINE, num_cores=4)
RESOURCE = "example.com/resource"
CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
reservedSystemCPUs: '0'
topologyManagerPolicy: single-numa-node
"""
ALIGNED = f"""\
apiVersion: v1
kind: Pod
metadata:
  name: aligned
spec:
  containers:
  - name: app
    image: busybox:1.35
    resources:
      requests: {{cpu: "1", memory: 64Mi, {RESOURCE}: "1"}}
      limits: {{cpu: "1", memory: 64Mi, {RESOURCE}: "1"}}
"""


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


async def test_single_numa_node_puts_the_cpus_beside_the_device(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    sys = write_sysfs(short_tmp / "sys", cores=4, numa_per_socket=2)
    (short_tmp / "kubelet.yaml").write_text(CONFIG)
    config = ("--config", str(short_tmp / "kubelet.yaml"))
    async with running_kubelet(fake, short_tmp, *config, sys=sys, machine=FOUR_CPUS) as h:
        plugin = FakeDevicePlugin(
            str(short_tmp / "root/device-plugins"),
            devices={"dev0": UNHEALTHY, "dev1": HEALTHY},
            topology={"dev0": 0, "dev1": 1},
        )
        await plugin.start()
        await plugin.register()
        await h.wait_for(lambda: plugin.watchers > 0)
        await trio.sleep(1)
        h.write("aligned.yaml", ALIGNED)
        await h.wait_for(lambda: h.running("aligned", "app"))
        (app,) = h.running("aligned", "app")
        assert app.config.linux.resources.cpuset_cpus == "2"
        assert plugin.allocations == [[["dev1"]]]
