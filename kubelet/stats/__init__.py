"""Usage figures for eviction and garbage collection, read at the edge with an injectable root.

- ``summary``: the typed figures decisions read (a subset of stats/v1alpha1), and a
  reader of the ``/stats/summary`` JSON;
- ``cgroupfs``: memory working set, CPU and PIDs from cgroup v1 or v2 files;
- ``fs``: filesystem capacity/available/inodes (statvfs) and bounded directory usage
  (emptyDir volumes), the walk run off the event loop;
- ``kmsg`` and ``oom``: kernel log records and the OOM-kill lines in them.
"""

from . import oom, pace
from .boot import boot_time
from .cgroupfs import (
    CfsStats,
    CgroupMemory,
    CgroupMemoryDetail,
    Cgroups,
    CgroupSwap,
    DeviceIo,
    Layout,
    read_text,
)
from .cgroupspec import CgroupSpec, cgroup_spec, spec_memory_value
from .pace import Pacer
from .processes import ProcessStats, process_stats
from .psi import Pressure, add_psi
from .summary import (
    ContainerUsage,
    FsUsage,
    MemoryUsage,
    NodeUsage,
    PodUsage,
    Summary,
    VolumeUsage,
    from_json,
)
from .volumes import AGG_PERIOD, PodVolume, ReportedUsage, ReportedVolumes, VolumeUsageCache

__all__ = [
    "AGG_PERIOD",
    "CfsStats",
    "CgroupMemory",
    "CgroupMemoryDetail",
    "CgroupSpec",
    "CgroupSwap",
    "Cgroups",
    "ContainerUsage",
    "DeviceIo",
    "FsUsage",
    "Layout",
    "MemoryUsage",
    "NodeUsage",
    "Pacer",
    "PodUsage",
    "PodVolume",
    "Pressure",
    "ProcessStats",
    "ReportedUsage",
    "ReportedVolumes",
    "Summary",
    "VolumeUsage",
    "VolumeUsageCache",
    "add_psi",
    "boot_time",
    "cgroup_spec",
    "from_json",
    "oom",
    "pace",
    "process_stats",
    "read_text",
    "spec_memory_value",
]
