"""Swap and a process's own cgroup from cgroup files, v1 and v2, on fixture trees."""

from __future__ import annotations

from pathlib import Path

from kubelet.stats import Cgroups, CgroupSwap, Layout


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_v2_swap_and_unified_process_cgroup(tmp_path: Path) -> None:
    write(tmp_path, {
        "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
        "sys/fs/cgroup/kubepods/memory.swap.current": "4096\n",
        "sys/fs/cgroup/kubepods/memory.swap.max": "max\n",
        "sys/fs/cgroup/kubepods/podx/memory.swap.current": "10\n",
        "sys/fs/cgroup/kubepods/podx/memory.swap.max": "100\n",
        "proc/self/cgroup": "0::/system.slice/kubelet.service\n",
    })  # fmt: skip
    cgroups = Cgroups(tmp_path)
    assert cgroups.layout is Layout.V2
    assert cgroups.swap("/kubepods") == CgroupSwap(4096, None)
    assert cgroups.swap("/kubepods/podx") == CgroupSwap(10, 100)
    assert cgroups.swap("/nowhere") is None
    assert cgroups.process_cgroup() == "/system.slice/kubelet.service"


def test_v1_swap_needs_swap_accounting_and_agreeing_controllers(tmp_path: Path) -> None:
    write(tmp_path, {
        "sys/fs/cgroup/memory/a/memory.usage_in_bytes": "100\n",
        "sys/fs/cgroup/memory/b/memory.usage_in_bytes": "100\n",
        "sys/fs/cgroup/memory/b/memory.memsw.usage_in_bytes": "150\n",
        "sys/fs/cgroup/memory/b/memory.memsw.limit_in_bytes": "9223372036854771712\n",
        "proc/self/cgroup": "5:cpu,cpuacct:/a\n3:memory:/b\n0::/\n",
        "proc/meminfo": "MemTotal: 10 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
    })  # fmt: skip
    cgroups = Cgroups(tmp_path)
    assert cgroups.swap("/a") is None  # no memsw files: swap accounting is off
    assert cgroups.swap("/b") == CgroupSwap(50, None)
    assert cgroups.process_cgroup() is None  # cpu and memory disagree, as upstream refuses
    assert cgroups.meminfo_swap() == CgroupSwap(0, 0)  # a node without swap
