"""The CPU manager's static policy on this 2-CPU host, for real containers on containerd:
the cpusets containers run with (read from ``/proc/1/status`` inside them), the shared
pool growing back when a Guaranteed pod goes, the checkpoint across a kubelet restart,
and the refusal to start under another policy with the old checkpoint."""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubelet.cri import ImageClient, RuntimeClient

from .test_cgroups_containerd import CgroupKubelet, cgroup_kubelet, resources, uid_of
from .test_kubelet_containerd import LOOP, manifest

pytestmark = pytest.mark.containerd

STATIC = ("--cpu-manager-policy=static", "--reserved-cpus=0")
RECONCILE = "--cpu-manager-reconcile-period=1s"


@pytest.fixture
async def kubelet(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> AsyncIterator[CgroupKubelet]:
    async with cgroup_kubelet(cri[0], short_tmp, f"e2e-{uuid.uuid4().hex[:6]}") as process:
        yield process


async def cpus_allowed(kubelet: CgroupKubelet, name: str) -> str:
    """The CPUs the pod's running container may use, as its PID 1 sees them."""
    running = await kubelet.running(name)
    if not running:
        return ""
    result = await kubelet.runtime.exec_sync(running[0].id, ["cat", "/proc/1/status"], timeout=5)
    for line in result.stdout.decode().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return ""


async def wait_cpus(kubelet: CgroupKubelet, name: str, want: str, what: str) -> None:
    async def check() -> bool:
        return await cpus_allowed(kubelet, name) == want

    await kubelet.wait_for(check, timeout=40, what=what)


async def test_static_policy_pins_guaranteed_cpus_and_keeps_them_across_restarts(
    kubelet: CgroupKubelet,
) -> None:
    kubelet.start(*STATIC, RECONCILE)
    whole = "{cpu: '1', memory: 64Mi}"
    kubelet.write("g.yaml", manifest("g", LOOP) + resources(whole, whole))
    kubelet.write("e.yaml", manifest("e", LOOP))
    for name in ("g", "e"):
        await kubelet.wait_for(lambda n=name: kubelet.running(n), what=f"{name} running")
    g = await uid_of(kubelet, "g")
    await uid_of(kubelet, "e")

    # the Guaranteed container has CPU 1 to itself; everyone else shares CPU 0
    await wait_cpus(kubelet, "g", "1", "the Guaranteed container on CPU 1")
    await wait_cpus(kubelet, "e", "0", "the BestEffort container on the shared pool")
    state_path = kubelet.root / "root" / "cpu_manager_state"
    state = json.loads(state_path.read_text())
    assert state["policyName"] == "static"
    assert state["defaultCpuSet"] == "0"
    assert state["entries"] == {g: {"main": "1"}}

    # a restart keeps the assignment (the checkpoint) and the containers' cpusets
    kubelet.stop()
    kubelet.start(*STATIC, RECONCILE)
    g_ids = {c.id for c in await kubelet.running("g")}
    await wait_cpus(kubelet, "e", "0", "the shared pool kept after the restart")
    assert await cpus_allowed(kubelet, "g") == "1"
    assert json.loads(state_path.read_text())["entries"] == {g: {"main": "1"}}

    # another policy with this checkpoint: the kubelet refuses to start, as upstream
    kubelet.stop()
    kubelet.start("--cpu-manager-policy=none")
    assert kubelet.proc is not None
    assert kubelet.proc.wait(timeout=30) != 0
    assert (
        'could not restore state from checkpoint: configured policy "none" differs from '
        'state checkpoint policy "static", please drain this node and delete the CPU '
        f'manager checkpoint file "{state_path}" before restarting Kubelet'
    ) in kubelet.log()

    # back on static: the pod kept its container; when it goes, CPU 1 is shared again,
    # also by the BestEffort container that was already running
    kubelet.start(*STATIC, RECONCILE)
    await kubelet.wait_for(lambda: kubelet.running("g"), what="g running again")
    assert {c.id for c in await kubelet.running("g")} == g_ids
    (kubelet.manifests / "g.yaml").unlink()
    await wait_cpus(kubelet, "e", "0-1", "the shared pool grown back to both CPUs")

    async def released() -> bool:
        return "entries" not in json.loads(state_path.read_text())

    await kubelet.wait_for(released, what="the assignment released in the checkpoint")
    kubelet.stop(signal.SIGTERM)
