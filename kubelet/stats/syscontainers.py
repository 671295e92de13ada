"""The summary's system containers and swap figures, from cgroups and /proc/meminfo.

Upstream's summary lists, under ``node.systemContainers``, the cgroups it knows by name:
``kubelet`` (``--kubelet-cgroups``, else the cgroup the kubelet itself runs in),
``runtime`` (``--runtime-cgroups``, only when set), ``misc`` (``systemCgroups``, only when
set) and ``pods`` (the node-allocatable cgroup, ``kubepods``). Each carries the cgroup's
CPU, memory and swap, never filesystems. A cgroup that cannot be read is left out, as
upstream skips one cAdvisor does not know.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from kubelet.cgroups import CgroupName
from kubelet.goformat import rfc3339

from .cgroupfs import CgroupSwap
from .host import HostStats, MemorySample
from .psi import add_psi

Json = dict[str, Any]

__all__ = ["SystemContainerNames", "swap_json", "zero_swap"]


@attrs.frozen
class SystemContainerNames:
    """The named cgroups to report; ``kubelet`` None means the kubelet's own cgroup."""

    kubelet: str | None = None
    runtime: str | None = None
    misc: str | None = None


def swap_json(when: str, swap: CgroupSwap) -> Json:
    """stats/v1alpha1 ``SwapStats``: available is limit − usage, omitted when unlimited."""
    out: Json = {"time": when, "swapUsageBytes": swap.usage}
    if swap.limit is not None:
        out["swapAvailableBytes"] = max(swap.limit - swap.usage, 0)
    return out


def zero_swap(when: str) -> Json:
    """What upstream reports for a container whose runtime gives no swap figures."""
    return {"time": when, "swapUsageBytes": 0, "swapAvailableBytes": 0}


MemoryJson = Callable[[str, MemorySample], Json]


def system_containers(
    host: HostStats,
    names: SystemContainerNames,
    *,
    when: str,
    kubelet_start: float,
    pods_root: CgroupName,
    with_swap: bool = True,
    psi: bool = False,
    cpu: Callable[[str, str], Json | None],
    memory: MemoryJson,
) -> list[Json]:
    """The ``systemContainers`` list; ``cpu(name, cgroup)`` shapes a cgroup's CPU (with
    its rate, kept under the system container's name). Swap only in the full summary
    (upstream's CPU-and-memory one carries CPU and memory alone); ``psi``: KubeletPSI."""
    boot = host.boot_time() or 0
    wanted = [
        ("kubelet", names.kubelet or host.cgroups.process_cgroup(), kubelet_start),
        ("runtime", names.runtime, boot),
        ("misc", names.misc, boot),
        ("pods", host.pods_cgroup(pods_root), boot),
    ]
    out: list[Json] = []
    for name, cgroup, start in wanted:
        if not cgroup or not host.cgroup_exists(cgroup):
            continue
        row: Json = {"name": name, "startTime": rfc3339(start), "cpu": cpu(name, cgroup)}
        sample = host.cgroup_memory(cgroup)
        if sample is not None:
            row["memory"] = memory(when, sample)
        swap = host.cgroups.swap(cgroup) if with_swap else None
        if swap is not None:
            row["swap"] = swap_json(when, swap)
        if psi:
            add_psi(row, host.cgroups.pressure(cgroup), when, io=with_swap)
        out.append({k: v for k, v in row.items() if v is not None})
    return out
