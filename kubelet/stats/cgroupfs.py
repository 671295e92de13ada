"""Memory, CPU and PID usage from cgroup files, v1 or v2, under an injectable root.

The figures are cAdvisor's, which the kubelet's summary and eviction read upstream:

- working set = usage − inactive file pages (``total_inactive_file`` in v1's
  hierarchical ``memory.stat``, ``inactive_file`` in v2), never below 0; usage is
  ``memory.usage_in_bytes`` (v1) or ``memory.current`` (v2);
- the v2 root cgroup has no ``memory.current``: as runc does, its usage is ``anon`` +
  ``file`` of the root's ``memory.stat`` (what v1's root ``usage_in_bytes`` counts), and
  when that file is missing the machine's figures come from /proc/meminfo
  (MemTotal − MemFree, ``Inactive(file)``);
- v1 takes the hierarchical ``total_*`` keys of ``memory.stat``, the local ones when a
  kernel offers no ``total_*``; v2's ``memory.stat`` is hierarchical already (``anon`` is
  the rss, ``pgfault``/``pgmajfault`` the page faults);
- CPU is ``cpuacct.usage`` (v1, ns) or ``usage_usec`` of ``cpu.stat`` (v2);
- PSI is the ``cpu``/``memory``/``io.pressure`` files (v2 only), /proc/pressure for the
  machine (see psi.py);
- the node's PID limit is min(kernel.pid_max, kernel.threads-max) and its task count
  the total in /proc/loadavg (pidlimit_linux.go).

The layout is detected from the mounts under ``sys/fs/cgroup``: a unified hierarchy
(v2), or per-controller v1 directories (this machine: v1 with an empty v2 mounted at
``unified``, a "hybrid" layout, read as v1). Every reader returns None for a figure
it cannot read; nothing raises for a missing file.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path

import attrs

from .psi import RESOURCES, Pressure, parse_pressure

__all__ = [
    "CfsStats",
    "CgroupMemory",
    "CgroupMemoryDetail",
    "CgroupSwap",
    "Cgroups",
    "DeviceIo",
    "Layout",
    "Rlimit",
    "detect_layout",
]


class Layout(enum.Enum):
    V1 = "v1"
    V2 = "v2"


@attrs.frozen
class CgroupMemory:
    usage: int
    working_set: int
    inactive_file: int
    rss: int | None = None
    page_faults: int | None = None
    major_page_faults: int | None = None
    limit: int | None = None
    """None: unlimited"""


@attrs.frozen
class CgroupMemoryDetail:
    """The rest of cAdvisor's memory figures of a cgroup (``/metrics/cadvisor``): page
    cache, swap, mapped files, limit hits and peak usage; None where the kernel has no
    file for it."""

    cache: int | None = None
    swap: int | None = None
    mapped_file: int | None = None
    failcnt: int | None = None
    max_usage: int | None = None
    kernel: int | None = None
    """v1 ``memory.kmem.usage_in_bytes``; v2 has none (runc reports 0)"""
    active_file: int | None = None
    inactive_file: int | None = None
    page_faults: tuple[int | None, int | None] = (None, None)
    """(``pgfault``, ``pgmajfault``) as cAdvisor reads them: v1's local keys, not ``total_*``"""


@attrs.frozen
class CgroupSwap:
    """Swap in use by a cgroup and its swap limit (cAdvisor's ``Memory.Swap`` and
    ``Spec.Memory.SwapLimit``: on v1 the limit is ``memory.memsw.limit_in_bytes``,
    memory and swap together, as cAdvisor reports it)."""

    usage: int
    limit: int | None = None
    """None: unlimited"""


@attrs.frozen
class CfsStats:
    """CPU bandwidth control of a cgroup (``cpu.stat``): periods, throttled periods and
    time; ``quota`` says whether a CPU limit is set (cAdvisor reports these only then)."""

    periods: int
    throttled_periods: int
    throttled_ns: int
    quota: bool
    bursts: int = 0
    """``nr_bursts`` (kernels from 5.14; 0 before, as runc)"""
    burst_ns: int = 0
    """``burst_time`` (v1, ns) or ``burst_usec`` (v2)"""


@attrs.frozen
class DeviceIo:
    """Block I/O of a cgroup on one device, by operation (cAdvisor's ``IoServiceBytes``
    and ``IoServiced``: ``Read``, ``Write``, and on v1 also ``Sync``, ``Async``,
    ``Discard``, ``Total``)."""

    major: int
    minor: int
    bytes: tuple[tuple[str, int], ...]
    ios: tuple[tuple[str, int], ...]


_V1_BLKIO = (
    "blkio.io_{}_recursive",
    "blkio.bfq.io_{}_recursive",
    "blkio.throttle.io_{}_recursive",
)
_V2_IO = {
    "rbytes": ("bytes", "Read"),
    "wbytes": ("bytes", "Write"),
    "dbytes": ("bytes", "Discard"),
    "rios": ("ios", "Read"),
    "wios": ("ios", "Write"),
    "dios": ("ios", "Discard"),
}


def _v1_blkio_lines(text: str | None) -> dict[tuple[int, int], list[tuple[str, int]]]:
    out: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) != 3 or ":" not in parts[0]:
            continue  # the closing "Total N" line
        major, _, minor = parts[0].partition(":")
        try:
            out.setdefault((int(major), int(minor)), []).append((parts[1], int(parts[2])))
        except ValueError:
            continue
    return out


@attrs.frozen
class Rlimit:
    max_pid: int | None
    num_processes: int | None


_UNLIMITED = 1 << 62
_USER_HZ = 100


def read_text(path: str | Path) -> str | None:
    """The file's text, None when it cannot be read. Plain ``os`` calls: a summary pass
    reads a few files per pod, and ``Path.read_text`` costs six times as much (13 µs
    against 2 µs for a cgroup file here)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    except (OSError, UnicodeDecodeError):  # a directory, a file gone meanwhile
        return None
    finally:
        os.close(fd)


_ONE_VALUE = 64
"""bytes read at once from a file holding one integer (at most 20 digits and a newline)"""


def _int(path: str | Path) -> int | None:
    """The integer a one-value file holds (``memory.usage_in_bytes``, ``cpuacct.usage``,
    ``pids.current``...): one ``read`` where ``read_text`` makes two (the second to see
    the end), 1-2 µs less a file; a summary pass reads four per pod."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, _ONE_VALUE)
        if len(data) == _ONE_VALUE:  # longer than one value: read it all
            while chunk := os.read(fd, 65536):
                data += chunk
    except OSError:  # a directory, a file gone meanwhile
        return None
    finally:
        os.close(fd)
    try:
        return int(data)  # bytes, as ``int(text.strip())``: surrounding whitespace allowed
    except ValueError:
        return None


def _key_values(text: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def _field(text: str, key: str) -> int | None:
    """The integer after ``key`` at the start of a line of ``text`` (as ``_key_values``
    reads it): a few of memory.stat's forty lines, which is read for each pod every
    summary pass, without parsing the others."""
    at = 0 if text.startswith(key + " ") else text.find("\n" + key + " ") + 1
    if at == 0 and not text.startswith(key + " "):
        return None
    end = text.find("\n", at)
    fields = text[at + len(key) + 1 : end if end >= 0 else None].split()
    try:
        return int(fields[0]) if fields else None
    except ValueError:
        return None


def _join(base: str, *parts: str) -> str:
    """``base``/``parts`` with the cgroup path's slashes trimmed (``/`` adds nothing)."""
    path = base
    for part in parts:
        part = part.strip("/")
        if part:
            path = f"{path}/{part}"
    return path


def detect_layout(root: Path = Path("/")) -> Layout:
    """v2 when ``sys/fs/cgroup`` itself is the unified hierarchy, else v1."""
    base = root / "sys/fs/cgroup"
    return Layout.V2 if (base / "cgroup.controllers").exists() else Layout.V1


@attrs.define
class Cgroups:
    """Readers for one machine's cgroups; ``cgroup`` paths are like ``/kubepods/pod<uid>``."""

    root: Path = Path("/")
    layout: Layout | None = None
    _base: str = attrs.field(init=False, eq=False, repr=False)
    """``base`` as text: the readers join strings (pathlib's joins cost more than the
    reads they lead to)."""

    def __attrs_post_init__(self) -> None:
        if self.layout is None:
            self.layout = detect_layout(self.root)
        self._base = str(self.base)

    @property
    def base(self) -> Path:
        return self.root / "sys/fs/cgroup"

    def _v1(self, controllers: tuple[str, ...], cgroup: str) -> str | None:
        for name in controllers:
            path = _join(self._base, name, cgroup)
            if os.path.isdir(path):
                return path
        return None

    def _v2(self, cgroup: str) -> str:
        return _join(self._base, cgroup)

    def exists(self, cgroup: str) -> bool:
        if self.layout is Layout.V2:
            return os.path.isdir(self._v2(cgroup))
        return self._v1(("memory",), cgroup) is not None

    def children(self, cgroup: str) -> frozenset[str]:
        """The names of ``cgroup``'s child cgroups, those ``exists`` finds (nothing when
        ``cgroup`` is not there): one directory listing instead of a stat per child."""
        v2 = self.layout is Layout.V2
        path = self._v2(cgroup) if v2 else _join(self._base, "memory", cgroup)
        try:
            with os.scandir(path) as entries:
                return frozenset(e.name for e in entries if e.is_dir())
        except OSError:
            return frozenset()

    def memory(self, cgroup: str) -> CgroupMemory | None:
        """Usage and working set of ``cgroup`` (``/`` is the whole machine)."""
        if self.layout is Layout.V2:
            return self._memory_v2(cgroup)
        return self._memory_v1(cgroup)

    def _memory_v1(self, cgroup: str) -> CgroupMemory | None:
        path = _join(self._base, "memory", cgroup)  # no cgroup: no usage (no isdir first)
        usage = _int(f"{path}/memory.usage_in_bytes")
        if usage is None:
            return None
        stat = read_text(f"{path}/memory.stat") or ""

        def total(key: str) -> int | None:
            found = _field(stat, "total_" + key)
            return found if found is not None else _field(stat, key)

        inactive = total("inactive_file") or 0
        limit = _int(f"{path}/memory.limit_in_bytes")
        return CgroupMemory(
            usage=usage,
            working_set=max(usage - inactive, 0),
            inactive_file=inactive,
            rss=total("rss"),
            page_faults=total("pgfault"),
            major_page_faults=total("pgmajfault"),
            limit=limit if limit is not None and limit < _UNLIMITED else None,
        )

    def _memory_v2(self, cgroup: str) -> CgroupMemory | None:
        path = self._v2(cgroup)
        usage = _int(f"{path}/memory.current")
        stat = _key_values(read_text(f"{path}/memory.stat"))
        if usage is None:
            if cgroup.strip("/") != "":
                return None
            if "anon" not in stat or "file" not in stat:
                return self.meminfo_memory()
            usage = stat["anon"] + stat["file"]
        inactive = stat.get("inactive_file", 0)
        limit_text = (read_text(f"{path}/memory.max") or "max").strip()
        return CgroupMemory(
            usage=usage,
            working_set=max(usage - inactive, 0),
            inactive_file=inactive,
            rss=stat.get("anon"),
            page_faults=stat.get("pgfault"),
            major_page_faults=stat.get("pgmajfault"),
            limit=int(limit_text) if limit_text.isdigit() else None,
        )

    def memory_detail(self, cgroup: str) -> CgroupMemoryDetail | None:
        """v1: ``total_cache``/``total_swap``/``total_mapped_file`` of ``memory.stat``,
        ``memory.failcnt``, ``memory.max_usage_in_bytes``; v2: ``file``/``file_mapped`` of
        ``memory.stat``, ``memory.swap.current``, ``memory.peak`` (newer kernels), and a
        failcnt of 0 (v2 has none; cAdvisor reports 0)."""
        if self.layout is Layout.V2:
            path = self._v2(cgroup)
            if not os.path.exists(f"{path}/memory.stat"):
                return None
            stat = _key_values(read_text(f"{path}/memory.stat"))
            return CgroupMemoryDetail(
                cache=stat.get("file"),
                swap=_int(f"{path}/memory.swap.current"),
                mapped_file=stat.get("file_mapped"),
                failcnt=0,
                max_usage=_int(f"{path}/memory.peak"),
                active_file=stat.get("active_file"),
                inactive_file=stat.get("inactive_file"),
                page_faults=(stat.get("pgfault"), stat.get("pgmajfault")),
            )
        found = self._v1(("memory",), cgroup)
        if found is None:
            return None
        stat = _key_values(read_text(f"{found}/memory.stat"))

        def total(key: str) -> int | None:
            return stat.get("total_" + key, stat.get(key))

        return CgroupMemoryDetail(
            cache=total("cache"),
            swap=total("swap"),
            mapped_file=total("mapped_file"),
            failcnt=_int(f"{found}/memory.failcnt"),
            max_usage=_int(f"{found}/memory.max_usage_in_bytes"),
            kernel=_int(f"{found}/memory.kmem.usage_in_bytes"),
            active_file=stat.get("total_active_file"),
            inactive_file=stat.get("total_inactive_file"),
            page_faults=(stat.get("pgfault"), stat.get("pgmajfault")),
        )

    def meminfo_memory(self) -> CgroupMemory | None:
        """The machine's memory from /proc/meminfo (no root memory cgroup to read)."""
        info = {k: v * 1024 for k, v in _key_values(read_text(self.root / "proc/meminfo")).items()}
        total, free = info.get("MemTotal"), info.get("MemFree")
        if total is None or free is None:
            return None
        usage = total - free
        inactive = info.get("Inactive(file)", 0)
        return CgroupMemory(
            usage=usage, working_set=max(usage - inactive, 0), inactive_file=inactive
        )

    def swap(self, cgroup: str) -> CgroupSwap | None:
        """Swap of ``cgroup``: ``memory.swap.current``/``memory.swap.max`` (v2), or
        ``memory.memsw.usage_in_bytes`` − ``memory.usage_in_bytes`` (v1, only with swap
        accounting on); None when the kernel does not account swap there."""
        if self.layout is Layout.V2:
            path = self._v2(cgroup)
            usage = _int(f"{path}/memory.swap.current")
            if usage is None:
                return None
            limit_text = (read_text(f"{path}/memory.swap.max") or "max").strip()
            return CgroupSwap(usage, int(limit_text) if limit_text.isdigit() else None)
        v1 = self._v1(("memory",), cgroup)
        if v1 is None:
            return None
        both = _int(f"{v1}/memory.memsw.usage_in_bytes")
        memory = _int(f"{v1}/memory.usage_in_bytes")
        if both is None or memory is None:
            return None
        limit = _int(f"{v1}/memory.memsw.limit_in_bytes")
        return CgroupSwap(
            max(both - memory, 0), limit if limit is not None and limit < _UNLIMITED else None
        )

    def meminfo_swap(self) -> CgroupSwap | None:
        """The machine's swap from /proc/meminfo: SwapTotal − SwapFree in use, SwapTotal
        the limit (0 on a node without swap)."""
        info = _key_values(read_text(self.root / "proc/meminfo"))
        total, free = info.get("SwapTotal"), info.get("SwapFree")
        if total is None or free is None:
            return None
        return CgroupSwap(usage=max(total - free, 0) * 1024, limit=total * 1024)

    def process_cgroup(self, pid: str = "self") -> str | None:
        """The cgroup a process accounts its CPU and memory in (/proc/<pid>/cgroup): the
        unified path on v2; on v1 the ``cpu`` and ``memory`` paths, which must agree (as
        upstream's kubelet requires of its own cgroup)."""
        paths: dict[str, str] = {}
        for line in (read_text(self.root / f"proc/{pid}/cgroup") or "").splitlines():
            _, controllers, path = [*line.split(":", 2), "", ""][:3]
            for controller in controllers.split(","):
                paths[controller] = path
        if self.layout is Layout.V2:
            return paths.get("")
        cpu, memory = paths.get("cpu"), paths.get("memory")
        return cpu if cpu is not None and cpu == memory else None

    def cfs(self, cgroup: str) -> CfsStats | None:
        """``nr_periods``, ``nr_throttled``, ``throttled_time`` (v1, ns) or ``throttled_usec``
        (v2) of ``cpu.stat``; the quota from ``cpu.cfs_quota_us`` (-1: none) or ``cpu.max``."""
        if self.layout is Layout.V2:
            path = self._v2(cgroup)
            stat = _key_values(read_text(f"{path}/cpu.stat"))
            throttled = stat.get("throttled_usec", 0) * 1000
            burst = stat.get("burst_usec", 0) * 1000
            quota = (read_text(f"{path}/cpu.max") or "max").split()[:1] != ["max"]
        else:
            found = self._v1(("cpu", "cpu,cpuacct", "cpuacct,cpu"), cgroup)
            if found is None:
                return None
            path = found
            stat = _key_values(read_text(f"{path}/cpu.stat"))
            throttled = stat.get("throttled_time", 0)
            burst = stat.get("burst_time", 0)
            quota = (_int(f"{path}/cpu.cfs_quota_us") or -1) > 0
        if "nr_periods" not in stat:
            return None
        return CfsStats(
            stat["nr_periods"], stat.get("nr_throttled", 0), throttled, quota,
            bursts=stat.get("nr_bursts", 0), burst_ns=burst,
        )  # fmt: skip

    def block_io(self, cgroup: str) -> tuple[DeviceIo, ...] | None:
        """Bytes and operations per device: ``io.stat`` (v2), or the first of the CFQ, BFQ
        and throttle ``*_recursive`` files that has device lines (v1, as runc reads them)."""
        if self.layout is Layout.V2:
            text = read_text(self._v2(cgroup) + "/io.stat")
            if text is None:
                return None
            devices: list[DeviceIo] = []
            for line in text.splitlines():
                head, *fields = line.split()
                major, _, minor = head.partition(":")
                kinds: dict[str, list[tuple[str, int]]] = {"bytes": [], "ios": []}
                for field in fields:
                    name, _, value = field.partition("=")
                    if name in _V2_IO and value.isdigit():
                        kind, op = _V2_IO[name]
                        kinds[kind].append((op, int(value)))
                if major.isdigit() and minor.isdigit():
                    devices.append(DeviceIo(int(major), int(minor), tuple(kinds["bytes"]),
                                            tuple(kinds["ios"])))  # fmt: skip
            return tuple(devices)
        path = self._v1(("blkio",), cgroup)
        if path is None:
            return None
        for pattern in _V1_BLKIO:
            served = _v1_blkio_lines(read_text(f"{path}/" + pattern.format("service_bytes")))
            if served:
                counted = _v1_blkio_lines(read_text(f"{path}/" + pattern.format("serviced")))
                return tuple(
                    DeviceIo(major, minor, tuple(ops), tuple(counted.get((major, minor), ())))
                    for (major, minor), ops in sorted(served.items())
                )
        return ()

    def pressure(self, cgroup: str) -> dict[str, Pressure]:
        """PSI per resource (``cpu``, ``memory``, ``io``) of ``cgroup``: its ``*.pressure``
        files, the machine's /proc/pressure for ``/``. Nothing on v1 (upstream reads PSI
        only from cgroup v2) nor for a file the kernel does not offer."""
        if self.layout is not Layout.V2:
            return {}
        files: dict[str, str | Path]
        if cgroup.strip("/") == "":
            files = {r: self.root / "proc/pressure" / r for r in RESOURCES}
        else:
            files = {r: f"{self._v2(cgroup)}/{r}.pressure" for r in RESOURCES}
        found = {r: parse_pressure(read_text(path)) for r, path in files.items()}
        return {r: p for r, p in found.items() if p is not None}

    def device_name(self, major: int, minor: int) -> str:
        """``/dev/<name>`` of a block device (its ``uevent``); "" when unknown, as cAdvisor."""
        text = read_text(self.root / f"sys/dev/block/{major}:{minor}/uevent") or ""
        for line in text.splitlines():
            if line.startswith("DEVNAME="):
                return "/dev/" + line.removeprefix("DEVNAME=")
        return ""

    def cpu_usage_ns(self, cgroup: str) -> int | None:
        """Cumulative CPU time of ``cgroup`` in nanoseconds."""
        if self.layout is Layout.V2:
            stat = _key_values(read_text(self._v2(cgroup) + "/cpu.stat"))
            usec = stat.get("usage_usec")
            return usec * 1000 if usec is not None else None
        for mount in ("cpuacct", "cpu,cpuacct", "cpuacct,cpu", "cpu"):
            usage = _int(_join(self._base, mount, cgroup) + "/cpuacct.usage")
            if usage is not None:
                return usage
        return None

    def cpu_user_system_ns(self, cgroup: str) -> tuple[int, int] | None:
        """User and system CPU time of ``cgroup`` in nanoseconds: ``user_usec``/``system_usec``
        of ``cpu.stat`` (v2) or ``user``/``system`` of ``cpuacct.stat`` (v1, in USER_HZ
        ticks, 100 a second as runc counts them)."""
        if self.layout is Layout.V2:
            stat = _key_values(read_text(self._v2(cgroup) + "/cpu.stat"))
            if "user_usec" not in stat or "system_usec" not in stat:
                return None
            return stat["user_usec"] * 1000, stat["system_usec"] * 1000
        for mount in ("cpuacct", "cpu,cpuacct", "cpuacct,cpu", "cpu"):
            stat = _key_values(read_text(_join(self._base, mount, cgroup) + "/cpuacct.stat"))
            if "user" in stat and "system" in stat:
                tick = 1_000_000_000 // _USER_HZ
                return stat["user"] * tick, stat["system"] * tick
        return None

    def pids(self, cgroup: str) -> int | None:
        """Tasks in ``cgroup`` (``pids.current``); the root has none, see ``rlimit``."""
        if self.layout is Layout.V2:
            return _int(self._v2(cgroup) + "/pids.current")
        return _int(_join(self._base, "pids", cgroup) + "/pids.current")  # None: no cgroup

    def first_pid(self, cgroup: str) -> int | None:
        """The first process listed in ``cgroup.procs`` (None: no cgroup, or empty)."""
        if self.layout is Layout.V2:
            path: str | None = self._v2(cgroup)
        else:
            path = self._v1(("memory", "pids", "cpu"), cgroup)
        text = read_text(f"{path}/cgroup.procs") if path is not None else None
        first = (text or "").partition("\n")[0].strip()
        return int(first) if first.isdigit() else None

    def rlimit(self) -> Rlimit:
        """The node's task limit and count (pid.available is their difference)."""
        limits = [
            v
            for v in (
                _int(self.root / "proc/sys/kernel/pid_max"),
                _int(self.root / "proc/sys/kernel/threads-max"),
            )
            if v is not None
        ]
        count: int | None = None
        loadavg = read_text(self.root / "proc/loadavg")
        if loadavg is not None:
            try:
                count = int(loadavg.split()[3].split("/")[1])
            except (IndexError, ValueError):
                count = None
        return Rlimit(max_pid=min(limits) if limits else None, num_processes=count)

    def memory_path(self, cgroup: str) -> Path | None:
        """The directory holding ``cgroup``'s memory files (for the threshold notifier)."""
        if self.layout is Layout.V2:
            path = self._v2(cgroup)
            return Path(path) if os.path.isdir(path) else None
        found = self._v1(("memory",), cgroup)
        return Path(found) if found is not None else None
