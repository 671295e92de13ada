"""The downward API's defaults for unset limits, on a whole kubelet over FakeRuntime: a
container without limits reads the node's allocatable (capacity less systemReserved, the
hard eviction threshold and hugepages), as upstream's getNodeAnyWay gives it, not the
machine's capacity."""

from __future__ import annotations

import textwrap
from pathlib import Path

import attrs
import pytest
import trio

from kubelet.node import MachineInfo, read_machine_info
from kubelet.testing import FakeRuntime

from .kubelet_harness import KUBELET_IMAGES, running_kubelet

GiB = 1024**3
MiB = 1024**2

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: reader
spec:
  containers:
  - name: app
    image: busybox:1.35
    env:
    - name: MEMORY_LIMIT
      valueFrom:
        resourceFieldRef: {resource: limits.memory}
    - name: CPU_LIMIT
      valueFrom:
        resourceFieldRef: {resource: limits.cpu, divisor: 1m}
"""


def machine() -> MachineInfo:
    """This machine, but for 4 cores, 8 GiB and 64 MiB of 2 MiB hugepages."""
    here = read_machine_info()
    return attrs.evolve(here, num_cores=4, memory_bytes=8 * GiB, hugepages={"2Mi": 64 * MiB})


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


async def test_unset_limits_read_the_nodes_allocatable_not_its_capacity(
    fake: FakeRuntime, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            apiVersion: kubelet.config.k8s.io/v1beta1
            kind: KubeletConfiguration
            systemReserved: {cpu: 500m, memory: 1Gi}
            evictionHard: {memory.available: 100Mi}
            """
        )
    )
    async with running_kubelet(fake, tmp_path, "--config", str(config), machine=machine()) as h:
        (h.manifests / "reader.yaml").write_text(POD)
        await h.wait_for(lambda: h.running("reader", "app"))
        (app,) = h.running("reader", "app")
        env = {kv.key: kv.value.decode() for kv in app.config.envs}
    allocatable_memory = 8 * GiB - 1 * GiB - 100 * MiB - 64 * MiB
    assert env["MEMORY_LIMIT"] == str(allocatable_memory)
    assert env["CPU_LIMIT"] == "3500"
