"""The limits a cgroup was given, as cAdvisor reads them for its ``container_spec_*``
series (its ``ContainerSpec``: CPU shares, CFS period and quota; memory limit,
reservation and swap limit).

cAdvisor's rules, kept here because dashboards compare against them:

- v1: shares from ``cpu.shares``, the period from ``cpu.cfs_period_us``, the quota from
  ``cpu.cfs_quota_us`` (``-1``: none, read as 0); memory from ``memory.limit_in_bytes``,
  ``memory.soft_limit_in_bytes`` (the reservation) and ``memory.memsw.limit_in_bytes``
  (the swap limit: memory and swap together, absent without swap accounting). CPU counts
  as present when the cgroup has a ``cpu`` or a ``cpuset`` directory, memory when it has
  a ``memory`` one.
- v2: shares from ``cpu.weight`` mapped back onto 2..262144 (2 + (w − 1) × 262142 ÷ 9999,
  0 for a weight outside 1..10000), period and quota from ``cpu.max`` (``max``: no
  quota); memory from ``memory.max``, ``memory.min`` and ``memory.swap.max``, present only
  where ``memory.max`` exists (not at the root). CPU counts as present when the cgroup
  directory exists: the root reports shares and period 0.
- A missing file reads 0, ``max`` reads 2^64 − 1; a memory figure above 2^62 (unlimited)
  is reported as 0 (``spec_memory_value``).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from .cgroupfs import Cgroups, Layout

__all__ = ["CgroupSpec", "CpuSpec", "MemorySpec", "cgroup_spec", "spec_memory_value"]

MAX_UINT64 = (1 << 64) - 1
_MAX_MEMORY = 1 << 62
_V1_CPU = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


@attrs.frozen
class CpuSpec:
    shares: int
    period: int
    quota: int
    """0: no quota (cAdvisor then leaves ``container_spec_cpu_quota`` out)"""


@attrs.frozen
class MemorySpec:
    limit: int
    reservation: int
    swap_limit: int


@attrs.frozen
class CgroupSpec:
    cpu: CpuSpec | None = None
    memory: MemorySpec | None = None


def spec_memory_value(value: int) -> int:
    """cAdvisor's ``specMemoryValue``: an unlimited figure (above 2^62) is 0."""
    return 0 if value > _MAX_MEMORY else value


def _text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _uint(text: str) -> int:
    """cAdvisor's ``readUInt64`` on a file's text: "" → 0, "max" → 2^64 − 1, junk → 0."""
    if text == "max":
        return MAX_UINT64
    return int(text) if text.isdigit() else 0


def _weight_to_shares(weight: int) -> int:
    if not 1 <= weight <= 10000:
        return 0
    return 2 + ((weight - 1) * 262142) // 9999


def _v1_dir(cgroups: Cgroups, controllers: tuple[str, ...], cgroup: str) -> Path | None:
    for name in controllers:
        path = cgroups.base / name / cgroup.strip("/")
        if path.is_dir():
            return path
    return None


def _v1(cgroups: Cgroups, cgroup: str) -> CgroupSpec:
    cpu_dir = _v1_dir(cgroups, _V1_CPU, cgroup)
    cpu: CpuSpec | None = None
    if cpu_dir is not None:
        quota = _text(cpu_dir / "cpu.cfs_quota_us")
        cpu = CpuSpec(
            shares=_uint(_text(cpu_dir / "cpu.shares")),
            period=_uint(_text(cpu_dir / "cpu.cfs_period_us")),
            quota=int(quota) if quota.isdigit() else 0,
        )
    elif _v1_dir(cgroups, ("cpuset",), cgroup) is not None:
        cpu = CpuSpec(0, 0, 0)
    memory_dir = _v1_dir(cgroups, ("memory",), cgroup)
    memory: MemorySpec | None = None
    if memory_dir is not None:
        memory = MemorySpec(
            limit=_uint(_text(memory_dir / "memory.limit_in_bytes")),
            reservation=_uint(_text(memory_dir / "memory.soft_limit_in_bytes")),
            swap_limit=_uint(_text(memory_dir / "memory.memsw.limit_in_bytes")),
        )
    return CgroupSpec(cpu, memory)


def _v2(cgroups: Cgroups, cgroup: str) -> CgroupSpec | None:
    path = cgroups.base / cgroup.strip("/")
    if not path.is_dir():
        return None
    quota = period = 0
    limits = _text(path / "cpu.max").split(" ")
    if len(limits) == 2:
        quota = 0 if limits[0] == "max" else _uint(limits[0])
        period = _uint(limits[1])
    cpu = CpuSpec(_weight_to_shares(_uint(_text(path / "cpu.weight"))), period, quota)
    memory: MemorySpec | None = None
    if (path / "memory.max").exists():
        memory = MemorySpec(
            limit=_uint(_text(path / "memory.max")),
            reservation=_uint(_text(path / "memory.min")),
            swap_limit=_uint(_text(path / "memory.swap.max")),
        )
    return CgroupSpec(cpu, memory)


def cgroup_spec(cgroups: Cgroups, cgroup: str) -> CgroupSpec | None:
    """The limits of ``cgroup`` (``/`` the root); None when it has no directory at all."""
    if cgroups.layout is Layout.V2:
        return _v2(cgroups, cgroup)
    spec = _v1(cgroups, cgroup)
    return spec if spec.cpu is not None or spec.memory is not None else None
