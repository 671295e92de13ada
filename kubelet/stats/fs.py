"""Filesystem figures: a filesystem's size (statvfs) and a directory tree's usage.

``filesystem(path)`` gives capacity, available (to unprivileged users, as eviction
counts), used, inodes and free inodes of the filesystem holding ``path``, as cAdvisor
reports nodefs and imagefs.

``directory_usage(path)`` is what upstream's ``du -x -s -B 1`` and ``find -xdev`` give
for an emptyDir volume: bytes as allocated blocks (st_blocks × 512; a hard-linked file
once), inodes as the entries walked (the directory itself included), never crossing
into another filesystem nor following symlinks. A pod controls what is in its volume,
so the walk is bounded (``max_entries``) and says when it stopped early; a file that
vanishes mid-walk is skipped. ``directory_usage_async`` runs it in a worker thread so a
big volume never stalls the event loop.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from .summary import FsUsage

__all__ = ["DirUsage", "directory_usage", "directory_usage_async", "filesystem"]

MAX_ENTRIES = 1_000_000
"""Entries walked before a directory usage stops (and says so)."""


def filesystem(path: str | Path, now: float | None = None) -> FsUsage | None:
    """statvfs of the filesystem holding ``path`` (None if it cannot be read)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return FsUsage(
        time=now,
        capacity=st.f_blocks * st.f_frsize,
        available=st.f_bavail * st.f_frsize,
        used=(st.f_blocks - st.f_bfree) * st.f_frsize,
        inodes=st.f_files,
        inodes_free=st.f_ffree,
        inodes_used=st.f_files - st.f_ffree,
    )


@attrs.frozen
class DirUsage:
    bytes: int
    inodes: int
    complete: bool = True
    """False: the walk stopped at ``max_entries``; the figures are a lower bound"""


def _no_check() -> None:
    return None


def directory_usage(
    path: str | Path, max_entries: int = MAX_ENTRIES, check: Callable[[], None] = _no_check
) -> DirUsage:
    """Blocks and entries under ``path`` on its own filesystem (blocking: see the async one).

    ``check`` is called every 1000 entries; it may raise to stop the walk.
    """
    try:
        top = os.lstat(path)
    except OSError:
        return DirUsage(0, 0)
    device = top.st_dev
    used = top.st_blocks * 512
    inodes = 1
    seen_links: set[int] = set()
    stack = [os.fspath(path)] if stat.S_ISDIR(top.st_mode) else []
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if inodes >= max_entries:
                return DirUsage(used, inodes, complete=False)
            if inodes % 1000 == 0:
                check()
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_dev != device:
                continue
            inodes += 1
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                if st.st_ino in seen_links:
                    continue
                seen_links.add(st.st_ino)
            used += st.st_blocks * 512
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
    return DirUsage(used, inodes)


async def directory_usage_async(path: str | Path, max_entries: int = MAX_ENTRIES) -> DirUsage:
    """``directory_usage`` in a worker thread; a cancellation stops the walk within 1000 entries.

    The thread is not abandoned: it polls ``trio.from_thread.check_cancelled`` and ends,
    so nothing outlives the caller's nursery.
    """
    return await trio.to_thread.run_sync(
        directory_usage, path, max_entries, trio.from_thread.check_cancelled
    )
