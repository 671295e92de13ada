"""The systemd driver's units, as libcontainer's systemd manager makes them: pure.

A cgroup named ``("kubepods", "burstable", "pod<uid>")`` is the slice unit
``kubepods-burstable-pod<uid with _>.slice``, a child of ``kubepods-burstable.slice``
(the root's children are children of ``-.slice``). Each is created with
``StartTransientUnit(name, "replace", properties)`` and updated with
``SetUnitProperties(name, runtime=true, properties)``; the properties are D-Bus
variants, written here as ``(name, (signature, value))`` the way jeepney takes them.

Created with (libcontainer's ``Apply`` for a slice): ``Description``, ``Wants`` of the
parent slice, ``MemoryAccounting``, ``CPUAccounting``, ``TasksAccounting`` and
``BlockIOAccounting`` (v1) or ``IOAccounting`` (v2) true, ``DefaultDependencies`` false,
plus the resource properties:

==================  ==========================  ====================================
value               cgroup v1                   cgroup v2
==================  ==========================  ====================================
cpu shares          ``CPUShares``               ``CPUWeight`` (values.shares_to_weight)
cpu quota           ``CPUQuotaPerSecUSec``      same
cpu period          ``CPUQuotaPeriodUSec``      same
memory              ``MemoryLimit``             ``MemoryMax``
pids                ``TasksMax``                same
==================  ==========================  ====================================

``CPUQuotaPerSecUSec`` is the quota per second of wall time (quota × 10⁶ / period),
rounded up to a whole 10 ms, since systemd keeps it as a percentage; no limit is
``USEC_INFINITY`` (2⁶⁴-1), as are memory -1 and pids -1. Hugetlb limits have no
property: they are written through the cgroup filesystem afterwards, as libcontainer
writes every value again there.
"""

from __future__ import annotations

import posixpath
from typing import Any

from .names import CgroupName, to_systemd
from .values import CPU_PERIOD, ResourceConfig, shares_to_weight

__all__ = [
    "INFINITY",
    "NOT_RUNNING",
    "Property",
    "quota_per_sec",
    "resource_properties",
    "slice_of",
    "start_properties",
]

NOT_RUNNING = "systemd not running on this host, cannot use systemd cgroups manager"
INFINITY = (1 << 64) - 1
"""systemd's USEC_INFINITY / CGROUP_LIMIT_MAX: "no limit"."""
ROOT_SLICE = "-.slice"

Property = tuple[str, tuple[str, Any]]


def slice_of(name: CgroupName) -> tuple[str, str]:
    """The unit of cgroup ``name`` and its parent slice: ``kubepods-burstable.slice`` and
    ``kubepods.slice``; ``kubepods.slice`` and ``-.slice``."""
    directory, base = posixpath.split(to_systemd(name))
    if base == "":
        raise ValueError("the root cgroup is not a unit of ours")
    parent = ROOT_SLICE if directory == "/" else posixpath.basename(directory)
    return base, parent


def quota_per_sec(quota: int, period: int) -> int:
    """``CPUQuotaPerSecUSec`` for a CFS quota (µs per ``period`` µs); -1: no limit."""
    if quota <= 0:
        return INFINITY
    per_sec = quota * 1_000_000 // (period or CPU_PERIOD)
    if per_sec % 10_000:
        per_sec = (per_sec // 10_000 + 1) * 10_000
    return per_sec


def _limit(value: int) -> int:
    return INFINITY if value < 0 else value


def resource_properties(config: ResourceConfig, version: int) -> list[Property]:
    """The properties for ``config`` (None values are left out, as they are left alone)."""
    props: list[Property] = []
    if config.memory is not None and config.memory != 0:
        props.append(("MemoryMax" if version == 2 else "MemoryLimit", ("t", _limit(config.memory))))
    if config.cpu_shares is not None and config.cpu_shares != 0:
        if version == 2:
            props.append(("CPUWeight", ("t", shares_to_weight(config.cpu_shares))))
        else:
            props.append(("CPUShares", ("t", config.cpu_shares)))
    period = config.cpu_period or 0
    if period:
        props.append(("CPUQuotaPeriodUSec", ("t", period)))
    quota = config.cpu_quota or 0
    if quota or period:
        props.append(("CPUQuotaPerSecUSec", ("t", quota_per_sec(quota, period))))
    if config.pids_limit is not None and (config.pids_limit > 0 or config.pids_limit == -1):
        props.append(("TasksMax", ("t", _limit(config.pids_limit))))
    return props


def start_properties(unit: str, parent: str, version: int) -> list[Property]:
    """What every slice the kubelet starts carries besides its resources."""
    io = "IOAccounting" if version == 2 else "BlockIOAccounting"
    return [
        ("Description", ("s", f"libcontainer container {unit}")),
        ("Wants", ("as", [parent])),
        ("MemoryAccounting", ("b", True)),
        ("CPUAccounting", ("b", True)),
        (io, ("b", True)),
        ("TasksAccounting", ("b", True)),
        ("DefaultDependencies", ("b", False)),
    ]
