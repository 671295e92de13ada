"""A cgroup tree in a temporary directory that behaves enough like the kernel's.

``v1_tree`` and ``v2_tree`` lay out a root like ``/sys/fs/cgroup``; ``TreeCgroupFs`` plays
the kernel's part on it: interface files are created by writes (the real cgroupfs offers
them), a new directory gets ``cgroup.procs`` (and, v2, the ``cgroup.controllers`` its
parent's ``cgroup.subtree_control`` grants; v1 cpuset, empty ``cpuset.cpus``/``mems``),
``+ctrl`` writes to ``cgroup.subtree_control`` accumulate and fail for a controller the
directory is not offered, and removing a directory fails (EBUSY) while a process is
listed in it. ``FakeProcesses`` is a ``kill`` that removes the pid from the tree.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from kubelet.cgroups import CgroupError, CgroupFs
from kubelet.cgroups.fs import CONTROLLERS, PROCS, SUBTREE_CONTROL
from kubelet.cgroups.layout import CgroupLayout, from_tree

__all__ = [
    "V1_HIERARCHIES",
    "FakeProcesses",
    "TreeCgroupFs",
    "add_process",
    "tree_cgroups",
    "tree_flags",
    "v1_tree",
    "v2_tree",
]

V1_HIERARCHIES = (
    "blkio",
    "cpu,cpuacct",
    "cpuset",
    "devices",
    "freezer",
    "hugetlb",
    "memory",
    "pids",
    "systemd",
)


def v1_tree(
    root: Path, hierarchies: Iterable[str] = V1_HIERARCHIES, *, hybrid: bool = True
) -> CgroupLayout:
    """A v1 host: one directory per hierarchy (``cpu`` and ``cpuacct`` symlinked to their
    co-mount as on Debian), ``unified/`` when hybrid (it offers no controller)."""
    root.mkdir(parents=True, exist_ok=True)
    for hierarchy in hierarchies:
        top = root / hierarchy
        top.mkdir()
        (top / PROCS).write_text("1\n")
        if hierarchy == "cpuset":
            (top / "cpuset.cpus").write_text("0-1\n")
            (top / "cpuset.mems").write_text("0\n")
        if "," in hierarchy:
            for name in hierarchy.split(","):
                (root / name).symlink_to(hierarchy)
    if hybrid:
        (root / "unified").mkdir()
        (root / "unified" / CONTROLLERS).write_text("\n")
        (root / "unified" / PROCS).write_text("1\n")
    return from_tree(root)


def v2_tree(
    root: Path, controllers: Iterable[str] = ("cpuset", "cpu", "io", "memory", "hugetlb", "pids")
) -> CgroupLayout:
    root.mkdir(parents=True, exist_ok=True)
    (root / CONTROLLERS).write_text(" ".join(controllers) + "\n")
    (root / SUBTREE_CONTROL).write_text("\n")
    (root / PROCS).write_text("1\n")
    return from_tree(root)


def add_process(directory: Path | str, pid: int) -> None:
    """Put ``pid`` into the cgroup at ``directory`` (as a fork inside it would)."""
    procs = Path(directory) / PROCS
    current = procs.read_text().split() if procs.exists() else []
    procs.write_text("\n".join([*current, str(pid)]) + "\n")


class TreeCgroupFs(CgroupFs):
    """``CgroupFs`` on a temporary tree, with the kernel's side simulated."""

    def _open_flags(self) -> int:
        return super()._open_flags() | os.O_CREAT

    def _mkdir(self, path: str) -> None:
        os.mkdir(path)
        where = Path(path)
        (where / PROCS).write_text("")
        unified = self.layout.unified
        if self.layout.version == 2 or (unified is not None and where.is_relative_to(unified)):
            granted = self._enabled(where.parent)
            (where / CONTROLLERS).write_text(" ".join(sorted(granted)) + "\n")
            (where / SUBTREE_CONTROL).write_text("\n")
        elif "cpuset" in self.layout.mounts and where.is_relative_to(self.layout.mounts["cpuset"]):
            (where / "cpuset.cpus").write_text("")
            (where / "cpuset.mems").write_text("")

    def attach(self, literal: str, pid: int) -> None:
        """As the kernel: out of every other cgroup of each hierarchy, into this one."""
        for directory in self.dirs(literal):
            mount = next(
                m for m in self._mount_dirs() if directory == m or directory.startswith(m + "/")
            )
            for procs in Path(mount).rglob(PROCS):
                pids = procs.read_text().split()
                if str(pid) in pids:
                    procs.write_text("".join(p + "\n" for p in pids if p != str(pid)))
            add_process(directory, pid)

    def _mount_dirs(self) -> list[str]:
        return sorted(set(self.paths("/").values()), key=len, reverse=True)

    def _enabled(self, directory: Path) -> set[str]:
        control = directory / SUBTREE_CONTROL
        return set(control.read_text().split()) if control.exists() else set()

    def write(self, directory: str, name: str, value: str) -> None:
        if name != SUBTREE_CONTROL:
            super().write(directory, name, value)
            return
        where = Path(directory)
        offered = set((where / CONTROLLERS).read_text().split())
        enabled = self._enabled(where)
        for token in value.split():
            controller = token[1:]
            if token.startswith("+"):
                if controller not in offered:
                    err = OSError(errno.ENOENT, os.strerror(errno.ENOENT))
                    failure = CgroupError(
                        f"failed to write {value!r} to {where / name}: {err.strerror}"
                    )
                    raise failure from err
                enabled.add(controller)
            elif token.startswith("-"):
                enabled.discard(controller)
        (where / SUBTREE_CONTROL).write_text(" ".join(sorted(enabled)) + "\n")

    def _rmdir(self, path: str) -> None:
        where = Path(path)
        procs = where / PROCS
        if procs.exists() and procs.read_text().split():
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), path)
        if any(entry.is_dir() for entry in where.iterdir()):
            raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), path)
        shutil.rmtree(where)


class FakeProcesses:
    """A ``kill`` for ``CgroupManager``: records signals and, when ``dies`` is set,
    takes the process out of every ``cgroup.procs`` under ``root`` at once."""

    def __init__(self, root: Path, *, dies: bool = True, refuse: Iterable[int] = ()) -> None:
        self.root = root
        self.dies = dies
        self.refuse = set(refuse)
        self.signals: list[tuple[int, int]] = []

    def __call__(self, pid: int, sig: int) -> None:
        self.signals.append((pid, sig))
        if pid in self.refuse:
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
        if not self.dies:
            return
        for procs in self.root.rglob(PROCS):
            pids = procs.read_text().split()
            if str(pid) in pids:
                procs.write_text("".join(p + "\n" for p in pids if p != str(pid)))


def tree_cgroups(root: Path, version: int = 1) -> Callable[[], CgroupFs]:
    """``Host.cgroup_fs`` for a kubelet run in-process: a v1 (hybrid) or v2 tree at
    ``root``, laid out on first use and reused by a restarted kubelet."""

    def open_tree() -> CgroupFs:
        if root.exists():
            return TreeCgroupFs(from_tree(root))
        return TreeCgroupFs(v1_tree(root) if version == 1 else v2_tree(root))

    return open_tree


def tree_flags(version: int) -> list[str]:
    """The flags a kubelet run over a tree of ``version`` needs: a v1 host is refused
    unless ``failCgroupV1`` is false, as upstream's default has it."""
    return ["--fail-cgroupv1=false"] if version == 1 else []
