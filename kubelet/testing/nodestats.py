"""A scripted node for usage figures: memory and filesystems the tests set, nothing real.

``ScriptedNode(tmp)`` writes /proc and cgroup v1 memory files under ``tmp`` and answers
``statvfs`` from a table, so the kubelet's summary provider (``HostStats(root, statvfs)``)
reads exactly what a test says. Every filesystem is ample (1 TiB, nothing used) and the
memory is 64 GiB with 1 GiB in use until a test changes them::

    node = ScriptedNode(tmp)
    host = agent.HostStats(stats=node.host, ...)
    node.set_memory(working_set=63 * GiB)        # memory.available is now 1 GiB
    node.set_fs("/var/lib/fakeruntime", capacity=100 * GiB, available=5 * GiB)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs

from kubelet.stats import FsSample, HostStats

__all__ = ["GiB", "MiB", "ScriptedNode"]

MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40


@attrs.define
class ScriptedNode:
    root: Path
    total_memory: int = 64 * GiB
    filesystems: dict[str, FsSample] = attrs.field(factory=dict)
    """path prefix → figures (the longest prefix of a path wins)"""
    functions: dict[str, Callable[[], FsSample]] = attrs.field(factory=dict)
    default_fs: FsSample = attrs.field(
        factory=lambda: FsSample(
            capacity=TiB, available=TiB, used=0, inodes=1 << 30, inodes_free=1 << 30
        )
    )

    def __attrs_post_init__(self) -> None:
        (self.root / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
        (self.root / "sys/fs/cgroup/memory").mkdir(parents=True, exist_ok=True)
        (self.root / "proc/sys/kernel/pid_max").write_text("4194304\n")
        (self.root / "proc/loadavg").write_text("0.00 0.00 0.00 1/200 1000\n")
        self.set_memory(working_set=GiB)

    @property
    def host(self) -> HostStats:
        return HostStats(root=self.root, statvfs=self.statvfs)

    def set_memory(self, *, working_set: int, inactive_file: int = 0) -> None:
        """The machine's memory in use (its working set; page cache on top, if any)."""
        usage = working_set + inactive_file
        (self.root / "proc/meminfo").write_text(
            f"MemTotal: {self.total_memory // 1024} kB\n"
            f"MemFree: {(self.total_memory - usage) // 1024} kB\n"
            f"Inactive(file): {inactive_file // 1024} kB\n"
        )
        memory = self.root / "sys/fs/cgroup/memory"
        (memory / "memory.usage_in_bytes").write_text(f"{usage}\n")
        (memory / "memory.stat").write_text(f"total_inactive_file {inactive_file}\n")

    def set_processes(self, count: int, pid_max: int = 4194304) -> None:
        (self.root / "proc/sys/kernel/pid_max").write_text(f"{pid_max}\n")
        (self.root / "proc/loadavg").write_text(f"0.00 0.00 0.00 1/{count} 1000\n")

    def set_fs(
        self,
        prefix: str,
        *,
        capacity: int,
        available: int,
        inodes: int = 1 << 30,
        inodes_free: int | None = None,
    ) -> None:
        """Figures for every path under ``prefix``."""
        free = inodes if inodes_free is None else inodes_free
        self.filesystems[prefix] = FsSample(
            capacity=capacity,
            available=available,
            used=capacity - available,
            inodes=inodes,
            inodes_free=free,
        )

    def set_fs_function(self, prefix: str, figures: Callable[[], FsSample]) -> None:
        """Figures computed at each read (e.g. from what the runtime still holds)."""
        self.functions[prefix] = figures

    def statvfs(self, path: str) -> FsSample | None:
        best = ""
        for prefix in (*self.filesystems, *self.functions):
            if (path == prefix or path.startswith(prefix.rstrip("/") + "/")) and len(prefix) > len(
                best
            ):
                best = prefix
        if best in self.functions:
            return self.functions[best]()
        return self.filesystems[best] if best else self.default_fs
