"""The summary's system containers as the configured cgroups name them, on the whole agent
in fake time: ``--runtime-cgroups`` gives ``runtime``, ``systemCgroups`` gives ``misc``,
``kubeletCgroups`` names ``kubelet`` (upstream's ``GetSystemContainersStats``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from kubelet.stats import UsageReader
from kubelet.testing import FakeRuntime

from .kubelet_harness import running_kubelet

RUNTIME = "system.slice/containerd.service"


def _cgroup(root: Path, path: str, usage: int) -> None:
    """A v1 memory and cpuacct cgroup under the stats host's tree."""
    memory = root / "sys/fs/cgroup/memory" / path
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (memory / "memory.stat").write_text("total_inactive_file 0\n")
    cpu = root / "sys/fs/cgroup/cpuacct" / path
    cpu.mkdir(parents=True, exist_ok=True)
    (cpu / "cpuacct.usage").write_text("1000\n")


async def _system_containers(h: Any) -> dict[str, Any]:
    usage = h.components.eviction.summaries
    assert isinstance(usage, UsageReader)
    summary = await usage.provider.summary()
    return {row["name"]: row for row in summary["node"].get("systemContainers", [])}


async def test_runtime_misc_and_kubelet_system_containers(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    args = (
        f"--runtime-cgroups=/{RUNTIME}",
        "--kubelet-cgroups=/kubelet.slice",
        "--system-cgroups=/system.slice/misc",
        "--cgroup-root=/",
    )
    async with running_kubelet(fake, short_tmp, *args) as h:
        assert h.node is not None
        _cgroup(h.node.root, RUNTIME, 7 << 20)
        _cgroup(h.node.root, "system.slice/misc", 3 << 20)
        _cgroup(h.node.root, "kubelet.slice", 5 << 20)
        rows = await _system_containers(h)
        assert rows["runtime"]["memory"]["usageBytes"] == 7 << 20
        assert rows["misc"]["memory"]["usageBytes"] == 3 << 20
        assert rows["kubelet"]["memory"]["usageBytes"] == 5 << 20
        assert "rootfs" not in rows["runtime"] and "logs" not in rows["runtime"]


async def test_a_runtime_cgroup_that_does_not_exist_is_left_out(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp, "--runtime-cgroups=/nowhere.service") as h:
        assert "runtime" not in await _system_containers(h)
