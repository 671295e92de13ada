"""The stats component: what the node, its pods and containers use, for every reader.

``provider.SummaryProvider`` assembles the stats/v1alpha1 summary from the CRI, the
cgroup files and the filesystems; the HTTP server only renders it (``/stats/summary``,
``/metrics/resource``, ``/metrics/cadvisor``) and the eviction manager and the image
collector read it through ``usage.UsageReader``. Below it:

- ``host``: the host's own figures (CPU, memory, interfaces, filesystems, cgroups by path);
- ``syscontainers`` and ``cgroupfigures``: the system containers' and a cgroup's figures;
- ``summary``: the typed figures decisions read (a subset of stats/v1alpha1), and a
  reader of the ``/stats/summary`` JSON;
- ``cgroupfs``: memory working set, CPU and PIDs from cgroup v1 or v2 files;
- ``fs``: filesystem capacity/available/inodes (statvfs) and bounded directory usage
  (emptyDir volumes), the walk run off the event loop;
- ``kmsg`` and ``oom``: kernel log records and the OOM-kill lines in them.
"""

from . import oom, pace
from .boot import boot_time
from .cgroupfigures import CgroupFigures, Figures, cgroup_figures
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
from .claimrecords import ClaimRecord, claim_record_path, read_claim_records
from .host import FsSample, HostStats, filesystem
from .pace import Pacer
from .processes import ProcessStats, process_stats
from .provider import SummaryProvider
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
from .syscontainers import SystemContainerNames
from .usage import UsageReader
from .volumes import AGG_PERIOD, PodVolume, ReportedUsage, ReportedVolumes, VolumeUsageCache

__all__ = [
    "AGG_PERIOD",
    "CfsStats",
    "CgroupFigures",
    "CgroupMemory",
    "CgroupMemoryDetail",
    "CgroupSpec",
    "CgroupSwap",
    "Cgroups",
    "ClaimRecord",
    "ContainerUsage",
    "DeviceIo",
    "Figures",
    "FsSample",
    "FsUsage",
    "HostStats",
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
    "SummaryProvider",
    "SystemContainerNames",
    "UsageReader",
    "VolumeUsage",
    "VolumeUsageCache",
    "add_psi",
    "boot_time",
    "cgroup_figures",
    "cgroup_spec",
    "claim_record_path",
    "filesystem",
    "from_json",
    "oom",
    "pace",
    "process_stats",
    "read_claim_records",
    "read_text",
    "spec_memory_value",
]
