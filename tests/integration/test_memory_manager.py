"""The memory manager on a whole kubelet over FakeRuntime and a fake /sys of two NUMA
nodes of 4 GiB (1 GiB reserved on node 0): Guaranteed containers are created with the
cpuset.mems of their NUMA nodes, the blocks live in memory_manager_state and survive a
restart, and a kubelet started with another policy refuses to start."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
import trio

from kubelet.boundedio import inline
from kubelet.cgroups import CgroupHost
from kubelet.cm import CmParts, NodeResources
from kubelet.cm.memory import start_memory_manager
from kubelet.config import resolve
from kubelet.errors import ConfigError
from kubelet.testing import FakeRuntime
from kubelet.testing.fakesysfs import write_sysfs

from .cluster_harness import MACHINE
from .kubelet_harness import KUBELET_IMAGES, WEB, running_kubelet

GI = 1024**3
MACHINE_2NUMA = attrs.evolve(MACHINE, num_cores=4)
HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
STATIC = (
    "memoryManagerPolicy: Static\n"
    "systemReserved: {memory: 924Mi}\n"  # + the 100Mi hard eviction threshold = 1Gi
    "reservedMemory:\n- numaNode: 0\n  limits: {memory: 1Gi}\n"
)


def _pod(name: str, memory: str) -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: app
    image: busybox:1.35
    resources:
      requests: {{cpu: "1", memory: {memory}}}
      limits: {{cpu: "1", memory: {memory}}}
"""


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def _config(tmp: Path, body: str = STATIC) -> tuple[str, ...]:
    path = tmp / "kubelet.yaml"
    path.write_text(HEADER + body)
    return ("--config", str(path))


def _sys(tmp: Path) -> Path:
    if (tmp / "sys").exists():
        return tmp / "sys"
    return write_sysfs(tmp / "sys", sockets=2, cores=2, node_memory_kib=4 * 1024 * 1024)


def _mems(h: object, pod: str) -> str:
    (c,) = h.running(pod, "app")  # type: ignore[attr-defined]
    return str(c.config.linux.resources.cpuset_mems)


async def test_guaranteed_containers_are_bound_to_numa_nodes_across_a_restart(
    fake: FakeRuntime, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    args = _config(tmp_path)
    async with running_kubelet(
        fake, tmp_path, *args, sys=_sys(tmp_path), machine=MACHINE_2NUMA
    ) as h:
        h.write("web.yaml", WEB)
        h.write("small.yaml", _pod("small", "2Gi"))
        await h.wait_for(lambda: h.running("small", "app") and h.running("web", "app"))
        assert _mems(h, "small") == "0"  # the narrowest, lowest node that fits
        assert _mems(h, "web") == ""  # not Guaranteed: no binding
        h.write("big.yaml", _pod("big", "3Gi"))
        await h.wait_for(lambda: h.running("big", "app"))
        assert _mems(h, "big") == "1"  # node 0 has 1 GiB left
        state = json.loads((tmp_path / "root/memory_manager_state").read_text())
        assert state["policyName"] == "Static"
        assert state["machineState"]["0"]["memoryMap"]["memory"]["free"] == GI
        assert state["machineState"]["1"]["memoryMap"]["memory"]["reserved"] == 3 * GI
        blocks = sorted(c["app"][0]["numaAffinity"] for c in state["entries"].values())
        assert blocks == [[0], [1]]
        (before,) = h.running("big", "app")
        await h.restart_kubelet()
        h.write("more.yaml", _pod("more", "1Gi"))
        await h.wait_for(lambda: h.running("more", "app"))
        assert _mems(h, "more") == "0"  # the restored state still counts both pods
        (after,) = h.running("big", "app")
        assert after.id == before.id
        path = tmp_path / "root/memory_manager_state"
        assert len(json.loads(path.read_text())["entries"]) == 3
        (h.manifests / "big.yaml").unlink()
        await h.wait_for(lambda: len(json.loads(path.read_text())["entries"]) == 2, timeout=120)
        state = json.loads(path.read_text())
        assert state["machineState"]["1"]["memoryMap"]["memory"]["free"] == 4 * GI


def _parts(tmp_path: Path, body: str) -> CmParts:
    root = tmp_path / "root"
    options = resolve([*_config(tmp_path, body), "--root-dir", str(root)])
    return CmParts(
        options=options,
        resources=NodeResources(capacity={"memory": "8Gi"}),
        runtime=None,  # type: ignore[arg-type]
        active=list,
        record=lambda _: None,
        host=CgroupHost(io=inline),
        sys_root=str(_sys(tmp_path)),
    )


async def test_a_checkpoint_of_another_policy_stops_start_up(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "memory_manager_state").write_text(
        '{"policyName":"None","machineState":{},"checksum":0}'
    )
    async with trio.open_nursery() as nursery:
        with pytest.raises(ConfigError) as stopped:
            await start_memory_manager(_parts(tmp_path, STATIC), nursery)
    assert str(stopped.value) == (
        'could not restore state from checkpoint: [memorymanager] configured policy "Static" '
        'differs from state checkpoint policy "None", please drain this node and delete the '
        f'memory manager checkpoint file "{root}/memory_manager_state" before restarting Kubelet'
    )


async def test_reserved_memory_that_does_not_add_up_stops_start_up(tmp_path: Path) -> None:
    body = STATIC.replace("924Mi", "1Gi")
    async with trio.open_nursery() as nursery:
        with pytest.raises(ConfigError) as stopped:
            await start_memory_manager(_parts(tmp_path, body), nursery)
    assert str(stopped.value) == (
        'the total amount "1Gi" of type "memory" is not equal to the value "1124Mi" '
        "determined by Node Allocatable feature"
    )
    nothing = "memoryManagerPolicy: Static\nevictionHard: {memory.available: '0%'}\n"
    async with trio.open_nursery() as nursery:
        with pytest.raises(ConfigError, match="you should specify the system reserved memory"):
            await start_memory_manager(_parts(tmp_path, nothing), nursery)
