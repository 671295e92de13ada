"""Node figures from ``/proc``, ``statvfs`` and cgroup files, as plain numbers.

The cgroup figures (v1 or v2, detected at the root's ``cgroup.controllers``) are
``kubelet.stats.cgroupfs``'s, the readers the memory notifier uses; this module only
finds the cgroups (the node, ``kubepods``, a pod's) and shapes the samples.

Every reader takes the root it reads under (``/`` in production, a directory of fixture
files in tests) and returns None when the file is missing or unreadable, so the summary
simply omits what this node cannot tell.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from kubelet.cgroups import (
    NODE_ALLOCATABLE,
    POD_PREFIX,
    CgroupName,
    QosCgroups,
    new_name,
    to_cgroupfs,
    to_systemd,
)

from .cgroupfs import CgroupMemory, Cgroups, read_text

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@attrs.frozen
class CpuSample:
    usage_ns: int


@attrs.frozen
class MemorySample:
    usage: int
    working_set: int
    rss: int | None = None
    page_faults: int | None = None
    major_page_faults: int | None = None
    limit: int | None = None


@attrs.frozen
class InterfaceSample:
    name: str
    rx_bytes: int
    rx_errors: int
    tx_bytes: int
    tx_errors: int


@attrs.frozen
class FsSample:
    capacity: int
    available: int
    used: int
    inodes: int
    inodes_free: int


def _int_file(path: Path) -> int | None:
    text = read_text(path)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _key_values(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


@attrs.define
class HostStats:
    """Readers for one machine; ``root`` prefixes every path read."""

    root: Path = Path("/")
    statvfs: Callable[[str], FsSample | None] | None = None
    """replaces ``filesystem`` (tests script a filesystem's size)"""
    _cgroups: Cgroups | None = attrs.field(default=None, init=False, repr=False)

    @property
    def cgroups(self) -> Cgroups:
        """The cgroup readers, the layout detected at first use."""
        if self._cgroups is None:
            self._cgroups = Cgroups(self.root)
        return self._cgroups

    def filesystem(self, path: str) -> FsSample | None:
        """``statvfs`` of the filesystem holding ``path``."""
        return (self.statvfs or filesystem)(path)

    def _p(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def boot_time(self) -> int | None:
        """Seconds since the epoch at boot (``btime`` in /proc/stat)."""
        text = read_text(self._p("/proc/stat"))
        for line in (text or "").splitlines():
            if line.startswith("btime "):
                return int(line.split()[1])
        return None

    def meminfo(self) -> dict[str, int]:
        """/proc/meminfo in bytes."""
        text = read_text(self._p("/proc/meminfo")) or ""
        return {k: v * 1024 for k, v in _key_values(text).items()}

    def memory_capacity(self) -> int | None:
        return self.meminfo().get("MemTotal")

    def proc_cpu_ns(self) -> int | None:
        """Busy CPU time of the whole machine from /proc/stat (no cgroup at hand)."""
        text = read_text(self._p("/proc/stat"))
        for line in (text or "").splitlines():
            if line.startswith("cpu "):
                fields = [int(x) for x in line.split()[1:]]
                busy = sum(fields[:8]) - fields[3] - (fields[4] if len(fields) > 4 else 0)
                return busy * 1_000_000_000 // CLOCK_TICKS
        return None

    def cgroup_cpu(self, cgroup: str) -> CpuSample | None:
        """Cumulative CPU time (ns) of a cgroup such as ``/`` or ``/kubepods``."""
        usage = self.cgroups.cpu_usage_ns(cgroup)
        return CpuSample(usage) if usage is not None else None

    def cgroup_memory(self, cgroup: str) -> MemorySample | None:
        """Usage and working set (usage − inactive file) of a cgroup."""
        memory = self.cgroups.memory(cgroup)
        return _sample(memory) if memory is not None else None

    def proc_memory(self) -> MemorySample | None:
        """Machine memory from /proc/meminfo when the root memory cgroup is unreadable."""
        memory = self.cgroups.meminfo_memory()
        return _sample(memory) if memory is not None else None

    def interfaces(self, pid: str = "self") -> list[InterfaceSample]:
        """Every interface but loopback, from /proc/<pid>/net/dev."""
        text = read_text(self._p(f"/proc/{pid}/net/dev")) or ""
        out: list[InterfaceSample] = []
        for line in text.splitlines()[2:]:
            name, _, rest = line.partition(":")
            fields = rest.split()
            name = name.strip()
            if name == "lo" or len(fields) < 16:
                continue
            f = [int(x) for x in fields]
            out.append(InterfaceSample(name, f[0], f[2], f[8], f[10]))
        return out

    def default_interface(self) -> str | None:
        """The interface of the default route (/proc/net/route)."""
        text = read_text(self._p("/proc/net/route")) or ""
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) > 1 and fields[1] == "00000000":
                return fields[0]
        return None

    def max_pid(self) -> int | None:
        return _int_file(self._p("/proc/sys/kernel/pid_max"))

    def process_count(self) -> int | None:
        """Processes (threads) on the machine: the total in /proc/loadavg."""
        text = read_text(self._p("/proc/loadavg"))
        try:
            return int(text.split()[3].split("/")[1]) if text else None
        except (IndexError, ValueError):
            return None

    def cgroup_pids(self, cgroup: str) -> int | None:
        """Tasks in a cgroup (``pids.current``)."""
        return self.cgroups.pids(cgroup)

    def cgroup_exists(self, cgroup: str) -> bool:
        return self.cgroups.exists(cgroup)

    def _existing(self, name: CgroupName) -> str | None:
        """The cgroup ``name`` as it is spelled on this node: cgroupfs
        (``/kubepods/burstable/pod<uid>``) or systemd (``/kubepods.slice/...``)."""
        for spell in (to_cgroupfs, to_systemd):
            path = spell(name)
            if self.cgroup_exists(path):
                return path
        return None

    def pods_cgroup(self, root: CgroupName = (NODE_ALLOCATABLE,)) -> str | None:
        """The node-allocatable cgroup holding every pod, if it exists."""
        return self._existing(root)

    def find_pod_cgroup(self, uid: str, root: CgroupName = (NODE_ALLOCATABLE,)) -> str | None:
        """The path of pod ``uid``'s cgroup under the QoS parents (``kubelet.cgroups.names``'s
        layout: ``/kubepods[/burstable|/besteffort]/pod<uid>``) if it exists."""
        for name in _pod_names(uid, root):
            path = self._existing(name)
            if path is not None:
                return path
        return None

    def pod_cgroups(self, root: CgroupName = (NODE_ALLOCATABLE,)) -> PodCgroupFinder:
        """``find_pod_cgroup`` for one pass over many pods (a summary, a metrics scrape)."""
        return PodCgroupFinder(self.cgroups, root)


def _pod_names(uid: str, root: CgroupName) -> list[CgroupName]:
    """Where pod ``uid``'s cgroup can be, in upstream's scan order; none for a UID that
    no pod cgroup can have."""
    try:
        return [new_name(parent, POD_PREFIX + uid) for parent in QosCgroups.under(root).roots()]
    except ValueError:
        return []


@attrs.define
class PodCgroupFinder:
    """Pod cgroups found as ``HostStats.find_pod_cgroup`` finds them, from one listing of each
    QoS parent (in either driver's spelling) taken at its first use: a summary over N pods
    made up to 12 stats per pod (6 spellings, again for each container), most of them for
    cgroups that are not there (every pod without cgroups per QoS). Meant for one pass: a
    pod cgroup made after the listing is found by the next pass."""

    cgroups: Cgroups
    root: CgroupName
    _places: list[tuple[str, str, bool]] = attrs.field(init=False)
    """(parent cgroup, prefix of the pod's child name, systemd spelling) in scan order"""
    _children: dict[str, frozenset[str]] = attrs.field(factory=dict, init=False)
    _found: dict[str, str | None] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        self._places = []
        for parent in QosCgroups.under(self.root).roots():
            slice_prefix = "".join(part.replace("-", "_") + "-" for part in parent)
            self._places.append((to_cgroupfs(parent), POD_PREFIX, False))
            self._places.append((to_systemd(parent), slice_prefix + POD_PREFIX, True))

    def find(self, uid: str) -> str | None:
        if uid not in self._found:
            self._found[uid] = self._find(uid)
        return self._found[uid]

    def _find(self, uid: str) -> str | None:
        if "/" in uid or "_" in uid:  # not a UID a pod cgroup can have (``new_name``)
            return None
        for parent, prefix, systemd in self._places:
            child = prefix + uid.replace("-", "_") + ".slice" if systemd else prefix + uid
            if child in self._listing(parent):
                return parent.rstrip("/") + "/" + child
        return None

    def _listing(self, parent: str) -> frozenset[str]:
        if parent not in self._children:
            self._children[parent] = self.cgroups.children(parent)
        return self._children[parent]


def _sample(memory: CgroupMemory) -> MemorySample:
    return MemorySample(
        usage=memory.usage,
        working_set=memory.working_set,
        rss=memory.rss,
        page_faults=memory.page_faults,
        major_page_faults=memory.major_page_faults,
        limit=memory.limit,
    )


def filesystem(path: str) -> FsSample | None:
    """``statvfs`` of the filesystem holding ``path``."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return FsSample(
        capacity=st.f_blocks * st.f_frsize,
        available=st.f_bavail * st.f_frsize,
        used=(st.f_blocks - st.f_bfree) * st.f_frsize,
        inodes=st.f_files,
        inodes_free=st.f_ffree,
    )


def files_usage(paths: Iterable[str]) -> tuple[int, int]:
    """(bytes, inodes) of existing files among ``paths``."""
    used = inodes = 0
    for p in paths:
        try:
            used += os.stat(p).st_size
            inodes += 1
        except OSError:
            continue
    return used, inodes
