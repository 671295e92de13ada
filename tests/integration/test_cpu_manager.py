"""The CPU manager on a whole kubelet over FakeRuntime and a fake /sys of 4 CPUs:
static policy with CPU 0 reserved. A Guaranteed container is created on its own CPUs,
everyone else on the shared pool, which running containers follow
(UpdateContainerResources) as it shrinks and grows; the assignments live in
cpu_manager_state, and a kubelet restarted with another policy refuses to start."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import attrs
import pytest
import trio

from kubelet.boundedio import inline
from kubelet.cgroups import CgroupHost
from kubelet.cm import CmParts, NodeResources
from kubelet.cm.cpu import start_cpu_manager
from kubelet.config import resolve
from kubelet.errors import ConfigError
from kubelet.testing import FakeRuntime
from kubelet.testing.fakesysfs import write_sysfs

from .cluster_harness import MACHINE
from .kubelet_harness import KUBELET_IMAGES, WEB, running_kubelet

FOUR_CPUS = attrs.evolve(MACHINE, num_cores=4)
HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
PINNED = """\
apiVersion: v1
kind: Pod
metadata:
  name: pinned
spec:
  containers:
  - name: app
    image: busybox:1.35
    resources:
      requests: {cpu: "2", memory: 64Mi}
      limits: {cpu: "2", memory: 64Mi}
"""


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def _config(tmp: Path, policy: str = "static") -> tuple[str, ...]:
    path = tmp / "kubelet.yaml"
    path.write_text(HEADER + f"cpuManagerPolicy: {policy}\nreservedSystemCPUs: '0'\n")
    return ("--config", str(path))


def _cpuset(fake: FakeRuntime, h: object, pod: str) -> str:
    (c,) = h.running(pod, "app")  # type: ignore[attr-defined]
    if c.resources is not None and c.resources.cpuset_cpus:
        return str(c.resources.cpuset_cpus)
    return str(c.config.linux.resources.cpuset_cpus)


async def test_static_policy_pins_guaranteed_containers_and_moves_the_shared_pool(
    fake: FakeRuntime, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    sys = write_sysfs(tmp_path / "sys", cores=4)
    async with running_kubelet(fake, tmp_path, *_config(tmp_path), sys=sys, machine=FOUR_CPUS) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        assert _cpuset(fake, h, "web") == "0-3"
        h.write("pinned.yaml", PINNED)
        await h.wait_for(lambda: h.running("pinned", "app"))
        (pinned,) = h.running("pinned", "app")
        assert pinned.config.linux.resources.cpuset_cpus == "1-2"
        await h.wait_for(lambda: _cpuset(fake, h, "web") == "0,3", timeout=30)
        state = json.loads((tmp_path / "root/cpu_manager_state").read_text())
        assert state["policyName"] == "static" and state["defaultCpuSet"] == "0,3"
        assert list(state["entries"].values()) == [{"app": "1-2"}]
        (h.manifests / "pinned.yaml").unlink()
        await h.wait_for(lambda: _cpuset(fake, h, "web") == "0-3", timeout=120)
        state = json.loads((tmp_path / "root/cpu_manager_state").read_text())
        assert state["defaultCpuSet"] == "0-3" and "entries" not in state


async def test_a_pinned_container_keeps_its_cpus_across_a_kubelet_restart(
    fake: FakeRuntime, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    sys = write_sysfs(tmp_path / "sys", cores=4)
    async with running_kubelet(fake, tmp_path, *_config(tmp_path), sys=sys, machine=FOUR_CPUS) as h:
        h.write("pinned.yaml", PINNED)
        await h.wait_for(lambda: h.running("pinned", "app"))
        (before,) = h.running("pinned", "app")
        await h.restart_kubelet()
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        assert _cpuset(fake, h, "web") == "0,3"
        (after,) = h.running("pinned", "app")
        assert after.id == before.id and _cpuset(fake, h, "pinned") == "1-2"


async def test_a_checkpoint_of_another_policy_stops_start_up(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "cpu_manager_state").write_text('{"policyName":"none","defaultCpuSet":"","checksum":0}')
    options = resolve([*_config(tmp_path), "--root-dir", str(root)])
    parts = CmParts(
        options=options,
        resources=NodeResources(),
        runtime=None,  # type: ignore[arg-type]
        active=list,
        record=lambda _: None,
        host=CgroupHost(io=inline),
        sys_root=str(write_sysfs(tmp_path / "sys", cores=4)),
    )
    async with trio.open_nursery() as nursery:
        with pytest.raises(ConfigError) as stopped:
            await start_cpu_manager(parts, nursery)
    assert str(stopped.value) == (
        'could not restore state from checkpoint: configured policy "static" differs from '
        'state checkpoint policy "none", please drain this node and delete the CPU manager '
        f'checkpoint file "{root}/cpu_manager_state" before restarting Kubelet'
    )


@pytest.mark.parametrize(
    ("topology_policy", "one_node", "message"),
    [
        (
            "single-numa-node",
            False,
            "Topolgy manager single-numa-node policy is incompatible with CPUManager "
            "align-by-socket policy option",
        ),
        (
            "none",
            True,
            "Align by socket is not compatible with hardware where number of sockets are "
            "more than number of NUMA",
        ),
    ],
)
async def test_align_by_socket_stops_start_up_where_upstream_refuses_it(
    tmp_path: Path, topology_policy: str, one_node: bool, message: str
) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text(
        HEADER
        + "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\n"
        + "featureGates: {CPUManagerPolicyAlphaOptions: true}\n"
        + "cpuManagerPolicyOptions: {align-by-socket: 'true'}\n"
        + f"topologyManagerPolicy: {topology_policy}\n"
    )
    sys = write_sysfs(tmp_path / "sys", sockets=2, cores=2)
    if one_node:  # two sockets and no NUMA directories: one node for the whole machine
        shutil.rmtree(sys / "devices/system/node")
    parts = CmParts(
        options=resolve(["--config", str(path), "--root-dir", str(tmp_path / "root")]),
        resources=NodeResources(),
        runtime=None,  # type: ignore[arg-type]
        active=list,
        record=lambda _: None,
        host=CgroupHost(io=inline),
        sys_root=str(sys),
    )
    async with trio.open_nursery() as nursery:
        with pytest.raises(ConfigError) as stopped:
            await start_cpu_manager(parts, nursery)
    assert str(stopped.value) == f"new static policy error: {message}"
