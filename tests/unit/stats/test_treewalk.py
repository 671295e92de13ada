"""The du-style walk of a volume: what it counts, that it holds no listing in memory,
and that it stops and goes on without losing or doubling anything."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
import trio

from kubelet.stats import fs
from kubelet.stats.fs import DirUsage, TreeWalk, directory_usage


def _blocks(*paths: Path) -> int:
    return sum(os.lstat(p).st_blocks * 512 for p in paths)


def test_counts_blocks_and_entries_once(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_bytes(b"x" * 10000)
    os.link(tmp_path / "d" / "a", tmp_path / "d" / "hard")
    (tmp_path / "d" / "link").symlink_to("/etc/passwd")
    usage = directory_usage(tmp_path / "d")
    blocks = _blocks(tmp_path / "d", tmp_path / "d" / "a", tmp_path / "d" / "link")
    assert usage == DirUsage(bytes=blocks, inodes=4)  # dir, a, hard, link; the data once
    assert directory_usage(tmp_path / "missing") == DirUsage(0, 0)


def _tree(root: Path) -> None:
    """50 files of 4 KiB over three levels, one hard-linked twice."""
    for i in range(50):
        sub = root / f"d{i % 3}" / f"e{i % 2}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}").write_bytes(b"x" * 4096)
    os.link(root / "d0" / "e0" / "f0", root / "d1" / "f0-again")
    os.link(root / "d0" / "e0" / "f0", root / "f0-third")


def test_a_walk_in_slices_counts_what_one_walk_counts(tmp_path: Path) -> None:
    _tree(tmp_path)
    whole = directory_usage(tmp_path)
    walk = TreeWalk(tmp_path)
    seen = [walk.advance(max_entries=7) for _ in range(12)]
    assert seen[0].inodes == 8 and not seen[0].complete  # the top and 7 entries
    assert [s.inodes for s in seen] == sorted(s.inodes for s in seen)  # never less
    assert seen[-1] == whole and whole.complete
    assert whole.inodes == 1 + 3 + 6 + 50 + 2  # top, d*, d*/e*, files, links
    stopped = directory_usage(tmp_path, max_entries=10)
    assert stopped.inodes == 11 and not stopped.complete


def test_a_stopped_slice_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``check`` raising (a cancelled caller) leaves the walk where it was."""
    monkeypatch.setattr(fs, "CHECK_EVERY", 10)
    for i in range(25):
        (tmp_path / f"f{i}").write_bytes(b"x")
    calls = 0

    def cancel_second() -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise trio.Cancelled._create()

    walk = TreeWalk(tmp_path)
    with pytest.raises(trio.Cancelled):
        walk.advance(check=cancel_second)
    assert walk.inodes == 21 and not walk.done
    assert walk.advance() == directory_usage(tmp_path)


def test_a_slice_stops_when_its_time_is_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fs, "CHECK_EVERY", 10)
    for i in range(25):
        (tmp_path / f"f{i}").write_bytes(b"x")
    walk = TreeWalk(tmp_path)
    assert walk.advance(max_seconds=0).inodes == 11  # the top, then 10 entries: time is up
    assert walk.advance() == directory_usage(tmp_path)


def test_memory_does_not_grow_with_the_directory(tmp_path: Path) -> None:
    """A directory's entries are read through its iterator, never listed at once: 2,000
    files (a listing of them is some 1.6 MB) walk in a few KiB."""
    for i in range(2000):
        os.close(os.open(tmp_path / f"file-{i:05d}", os.O_CREAT | os.O_WRONLY, 0o644))
    tracemalloc.start()
    try:
        usage = directory_usage(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert usage.inodes == 2001 and usage.complete
    assert peak < 128 * 1024


def test_hard_links_past_the_table_count_more_never_less(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(20):
        (tmp_path / f"f{i}").write_bytes(b"x" * 4096)
        os.link(tmp_path / f"f{i}", tmp_path / f"g{i}")
    exact = directory_usage(tmp_path)
    assert exact.bytes == _blocks(tmp_path, *(tmp_path / f"f{i}" for i in range(20)))
    monkeypatch.setattr(fs, "MAX_LINKED", 1)
    bounded = directory_usage(tmp_path)
    assert bounded.inodes == exact.inodes and bounded.bytes > exact.bytes


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_paused_walk_keeps_open_only_the_directories_it_is_far_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Going on in a big directory must not read its first entries again at every slice;
    a paused walk holds a descriptor for it, none for small ones, and none once closed."""
    monkeypatch.setattr(fs, "CHEAP_SKIP", 5)
    monkeypatch.setattr(fs, "KEEP_OPEN", 1)
    for i in range(30):
        (tmp_path / f"f{i:02d}").write_bytes(b"x")
    before = _open_fds()
    walk = TreeWalk(tmp_path)
    walk.advance(max_entries=3)
    assert _open_fds() == before  # 3 entries in: cheap to read past again
    walk.advance(max_entries=7)
    assert _open_fds() == before + 1
    assert walk.advance() == directory_usage(tmp_path)
    assert _open_fds() == before
    dropped = TreeWalk(tmp_path)
    dropped.advance(max_entries=10)
    dropped.close()
    assert _open_fds() == before
