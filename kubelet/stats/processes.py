"""What cAdvisor's ``ProcessMetrics`` count for a cgroup: its processes, their open file
descriptors and sockets, and its threads against the PID limit.

As cAdvisor reads them: the processes are the lines of ``cgroup.procs`` in the cgroup's
CPU directory (the cgroup's own members, not its children's: a pod cgroup whose processes
all live in container cgroups counts 0); descriptors are the entries of each process's
``/proc/<pid>/fd`` and sockets those linking to ``socket:[…]`` (a process gone meanwhile
is skipped); threads are ``pids.current`` and the limit ``pids.max`` (``max`` and a
missing file read 0, "no limit", as runc reports it).
"""

from __future__ import annotations

import os

import attrs

from .cgroupfs import Cgroups, Layout

__all__ = ["ProcessStats", "process_stats"]

_V1_CPU = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


@attrs.frozen
class ProcessStats:
    processes: int
    fds: int
    sockets: int
    threads: int
    threads_max: int
    """0: no limit"""


def _text(path: os.PathLike[str] | str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _count(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() else 0


def _descriptors(proc: str, pid: str) -> tuple[int, int]:
    directory = os.path.join(proc, pid, "fd")
    try:
        names = os.listdir(directory)
    except OSError:
        return 0, 0
    sockets = 0
    for name in names:
        try:
            if os.readlink(os.path.join(directory, name)).startswith("socket"):
                sockets += 1
        except OSError:
            continue
    return len(names), sockets


def process_stats(cgroups: Cgroups, cgroup: str) -> ProcessStats | None:
    """None when the cgroup has no ``cgroup.procs`` to read."""
    relative = cgroup.strip("/")
    if cgroups.layout is Layout.V2:
        cpu_dirs = [cgroups.base / relative]
        pids_dir = cgroups.base / relative
    else:
        cpu_dirs = [cgroups.base / name / relative for name in _V1_CPU]
        pids_dir = cgroups.base / "pids" / relative
    members = next((t for t in (_text(d / "cgroup.procs") for d in cpu_dirs) if t is not None),
                   None)  # fmt: skip
    if members is None:
        return None
    pids = members.split()
    proc = str(cgroups.root / "proc")
    fds = sockets = 0
    for pid in pids:
        opened, socks = _descriptors(proc, pid)
        fds += opened
        sockets += socks
    return ProcessStats(
        processes=len(pids),
        fds=fds,
        sockets=sockets,
        threads=_count(_text(pids_dir / "pids.current")),
        threads_max=_count(_text(pids_dir / "pids.max")),
    )
