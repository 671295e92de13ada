"""Filesystem figures: a filesystem's size (statvfs) and a directory tree's usage.

``filesystem(path)`` gives capacity, available (to unprivileged users, as eviction
counts), used, inodes and free inodes of the filesystem holding ``path``, as cAdvisor
reports nodefs and imagefs.

``TreeWalk(path)`` measures what upstream's du-style walk gives for an emptyDir volume:
bytes as allocated blocks (st_blocks × 512; a hard-linked file once), inodes as the
entries walked (the directory itself included), never crossing into another filesystem
nor following symlinks. A pod controls what is in its volume, so the walk is built to
take any tree: it reads each directory through an ``os.scandir`` iterator (never a whole
listing), keeps one open directory per level of depth (paths are at most ``PATH_MAX``
long, so that is bounded), and remembers hard links in a bounded table (past it, a
linked file counts at every link: too much, never too little). It can stop after some
entries or time and go on later from where it stopped, so a huge tree is measured in
slices that each hold a thread for a bounded time; until it ends its figures are a lower
bound (``DirUsage.complete`` false). Between slices it keeps open only the few
directories it is far into (``KEEP_OPEN``), and reads the others again past the entries
it took, so a paused walk holds at most a few descriptors. A file that vanishes mid-walk is skipped.
"""

from __future__ import annotations

import itertools
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import attrs

from .summary import FsUsage

__all__ = ["DirUsage", "TreeWalk", "directory_usage", "filesystem"]

MAX_ENTRIES = 1_000_000
"""Entries a slice of a walk counts before it stops (to go on in the next one)."""

SLICE_SECONDS = 1.0
"""Time a slice of a walk runs before it stops (to go on in the next one): a pass that
waits for it (the eviction manager's) waits that long per volume at most."""

MAX_LINKED = 1 << 18
"""Hard-linked files a walk remembers to count once (some 20 MiB at most)."""

KEEP_OPEN = 4
"""Directories a paused walk keeps open (those it is furthest into)."""

CHEAP_SKIP = 4096
"""Entries of a directory that are cheap to read past when a walk goes on."""

CHECK_EVERY = 1000
"""Entries between two calls of a walk's ``check`` (which may stop it)."""


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
    """False: the walk has not ended; the figures are what it counted so far (at least)"""


def _no_check() -> None:
    return None


class _Entries(Iterator[os.DirEntry[str]], Protocol):
    """What ``os.scandir`` returns: an iterator that holds a descriptor until closed."""

    def close(self) -> None: ...


@attrs.define
class _Level:
    """A directory being read: how many of its entries were taken, and its iterator
    while a slice runs (closed between slices, so a paused walk holds no descriptor)."""

    path: str
    taken: int = 0
    entries: _Entries | None = None


class TreeWalk:
    """A resumable du-style walk of the tree at ``path`` (blocking: run it in a thread)."""

    def __init__(self, path: str | Path) -> None:
        self.path = os.fspath(path)
        self.bytes = 0
        self.inodes = 0
        self.done = False
        self._device: int | None = None
        self._levels: list[_Level] = []
        self._linked: dict[int, int] = {}
        """inode → links not met yet, for hard-linked files counted once"""

    def usage(self) -> DirUsage:
        return DirUsage(self.bytes, self.inodes, complete=self.done)

    def advance(
        self,
        max_entries: int | None = None,
        check: Callable[[], None] = _no_check,
        max_seconds: float | None = None,
    ) -> DirUsage:
        """Walk on until the tree ends, ``max_entries`` more entries were taken or
        ``max_seconds`` passed (looked at every :data:`CHECK_EVERY` entries).

        ``check`` is called every :data:`CHECK_EVERY` entries; it may raise to stop the
        slice, which leaves the walk where it was, to be advanced again.
        """
        if self.done:
            return self.usage()
        try:
            if self._device is None:
                self._start()
            else:
                self._reopen()
            deadline = None if max_seconds is None else time.monotonic() + max_seconds
            self._walk(max_entries, check, deadline)
        finally:
            self._pause()
        return self.usage()

    def close(self) -> None:
        """Close what a paused walk keeps open (a walk that is dropped)."""
        for level in self._levels:
            self._close_level(level)

    def _start(self) -> None:
        try:
            top = os.lstat(self.path)
        except OSError:
            self.done = True
            return
        self._device = top.st_dev
        self.bytes, self.inodes = top.st_blocks * 512, 1
        if stat.S_ISDIR(top.st_mode):
            self._enter(self.path)

    def _reopen(self) -> None:
        """Open the closed levels again, each past the entries taken (a level that is gone
        ends there: what was under it is gone too)."""
        for depth, level in enumerate(self._levels):
            if level.entries is not None:
                continue
            try:
                level.entries = os.scandir(level.path)
            except OSError:
                for gone in self._levels[depth:]:
                    self._close_level(gone)
                del self._levels[depth:]
                return
            try:
                for _ in itertools.islice(level.entries, level.taken):
                    pass
            except OSError:
                continue

    def _pause(self) -> None:
        """Between slices: keep open the few levels far into a big directory (reading
        past their entries again would cost more each slice), close the others."""
        by_taken = sorted(self._levels, key=lambda level: level.taken, reverse=True)
        for rank, level in enumerate(by_taken):
            if rank >= KEEP_OPEN or level.taken < CHEAP_SKIP:
                self._close_level(level)

    def _walk(
        self, max_entries: int | None, check: Callable[[], None], deadline: float | None
    ) -> None:
        taken = 0
        while self._levels:
            level = self._levels[-1]
            try:
                entry = next(level.entries, None) if level.entries is not None else None
            except OSError:
                entry = None
            if entry is None:
                self._close_level(self._levels.pop())
                continue
            level.taken += 1
            self._count(entry)
            taken += 1
            if taken % CHECK_EVERY == 0:
                check()
                if deadline is not None and time.monotonic() >= deadline:
                    return
            if max_entries is not None and taken >= max_entries:
                return
        self.done = True

    def _close_level(self, level: _Level) -> None:
        if level.entries is not None:
            level.entries.close()
            level.entries = None

    def _count(self, entry: os.DirEntry[str]) -> None:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            return
        if st.st_dev != self._device:
            return
        self.inodes += 1
        directory = stat.S_ISDIR(st.st_mode)
        if not directory and st.st_nlink > 1 and not self._first_link(st):
            return
        self.bytes += st.st_blocks * 512
        if directory:
            self._enter(entry.path)

    def _first_link(self, st: os.stat_result) -> bool:
        """Whether this link of a hard-linked file is the first one met (its blocks count)."""
        left = self._linked.get(st.st_ino)
        if left is not None:
            if left <= 1:
                del self._linked[st.st_ino]
            else:
                self._linked[st.st_ino] = left - 1
            return False
        if len(self._linked) < MAX_LINKED:
            self._linked[st.st_ino] = st.st_nlink - 1
        return True

    def _enter(self, path: str) -> None:
        try:
            entries = os.scandir(path)
        except OSError:
            return
        self._levels.append(_Level(path, 0, entries))


def directory_usage(
    path: str | Path, max_entries: int | None = None, check: Callable[[], None] = _no_check
) -> DirUsage:
    """Blocks and entries under ``path`` on its own filesystem, in one go (blocking).

    ``max_entries`` stops it early (the figures then say incomplete).
    """
    return TreeWalk(path).advance(max_entries, check)
