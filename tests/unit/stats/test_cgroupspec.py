"""``cgroup_spec``: cAdvisor's reading of a cgroup's limits, edge cases included."""

from __future__ import annotations

from pathlib import Path

from kubelet.stats import Cgroups, CgroupSpec, Layout, cgroup_spec, spec_memory_value
from kubelet.stats.cgroupspec import MAX_UINT64, CpuSpec, MemorySpec


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_v1_cpuset_alone_counts_as_cpu_and_a_missing_cgroup_has_no_spec(tmp_path: Path) -> None:
    (tmp_path / "sys/fs/cgroup/cpuset/a").mkdir(parents=True)
    cgroups = Cgroups(tmp_path, Layout.V1)
    assert cgroup_spec(cgroups, "/a") == CgroupSpec(CpuSpec(0, 0, 0), None)
    assert cgroup_spec(cgroups, "/absent") is None


def test_v1_junk_reads_zero(tmp_path: Path) -> None:
    _write(tmp_path, {
        "sys/fs/cgroup/cpu/a/cpu.shares": "lots\n",
        "sys/fs/cgroup/cpu/a/cpu.cfs_quota_us": "-5\n",
        "sys/fs/cgroup/memory/a/memory.limit_in_bytes": "1048576\n",
    })  # fmt: skip
    spec = cgroup_spec(Cgroups(tmp_path, Layout.V1), "/a")
    assert spec == CgroupSpec(CpuSpec(0, 0, 0), MemorySpec(1048576, 0, 0))


def test_v2_weight_bounds_and_a_malformed_cpu_max(tmp_path: Path) -> None:
    _write(tmp_path, {
        "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
        "sys/fs/cgroup/a/cpu.weight": "10000\n",
        "sys/fs/cgroup/a/cpu.max": "50000\n",
        "sys/fs/cgroup/b/cpu.weight": "10001\n",
        "sys/fs/cgroup/b/memory.max": "max\n",
    })  # fmt: skip
    cgroups = Cgroups(tmp_path)
    assert cgroup_spec(cgroups, "/a") == CgroupSpec(CpuSpec(262144, 0, 0), None)
    spec = cgroup_spec(cgroups, "/b")
    assert spec == CgroupSpec(CpuSpec(0, 0, 0), MemorySpec(MAX_UINT64, 0, 0))


def test_unlimited_memory_is_reported_as_zero() -> None:
    assert spec_memory_value(MAX_UINT64) == 0
    assert spec_memory_value(9223372036854771712) == 0  # v1's "no limit"
    assert spec_memory_value(1 << 62) == 1 << 62
