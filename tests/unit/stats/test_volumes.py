"""Pod volume figures under many askers: one walk at a time per pod, a few threads for
all of them, the cached figures meanwhile, and a big tree walked on across passes."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.stats import PodVolume, VolumeUsageCache
from kubelet.stats.fs import DirUsage, directory_usage
from kubelet.stats.volumes import WALK_THREADS


def _volume(root: Path, uid: str, files: int = 3) -> Path:
    path = root / "pods" / uid / "volumes" / "kubernetes.io~empty-dir" / "scratch"
    path.mkdir(parents=True)
    for i in range(files):
        (path / f"f{i}").write_bytes(b"x" * 4096)
    return path


class Walks:
    """Counts the walks that begin (an ``os.scandir`` of a volume's own directory) and
    how many run at once."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        volumes: set[Path],
        together: threading.Barrier | None = None,
    ):
        self.volumes = {os.fspath(v) for v in volumes}
        self.started = 0
        self.running = self.peak = 0
        self.together = together
        """walks wait here for each other: as many run at once as the limiter lets"""
        self._lock = threading.Lock()
        real = os.scandir

        def scandir(path: Any = ".") -> Iterator[os.DirEntry[str]]:
            if os.fspath(path) not in self.volumes:
                return real(path)
            with self._lock:
                self.started += 1
                self.running += 1
                self.peak = max(self.peak, self.running)
            try:
                if self.together is not None:
                    self.together.wait()  # the worker threads busy on big directories
                return real(path)
            finally:
                with self._lock:
                    self.running -= 1

        monkeypatch.setattr(os, "scandir", scandir)


async def test_many_askers_share_one_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    """Forty clients polling /stats/summary while a pod's figures are stale start one walk:
    with none yet they wait for it; with earlier ones they get those at once."""
    volume = _volume(tmp_path, "u1")
    now = 0.0
    cache = VolumeUsageCache(str(tmp_path), lambda: now, period=60)
    walks = Walks(monkeypatch, {volume})
    answers: list[list[PodVolume]] = []

    async def ask() -> None:
        answers.append(await cache.pod_volumes("u1"))

    async with trio.open_nursery() as nursery:
        for _ in range(40):
            nursery.start_soon(ask)
    assert walks.started == 1
    first = answers[0]
    assert all(a == first for a in answers) and first[0].usage == directory_usage(volume)

    (volume / "more").write_bytes(b"y" * 8192)
    now = 61.0
    answers.clear()
    walks.started = 0
    async with trio.open_nursery() as nursery:
        for _ in range(40):
            nursery.start_soon(ask)
    assert walks.started == 1
    fresh = [a for a in answers if a != first]
    assert len(fresh) == 1 and fresh[0][0].usage == directory_usage(volume)


async def test_walks_share_a_few_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    uids = [f"u{i}" for i in range(6)]
    volumes = {_volume(tmp_path, uid) for uid in uids}
    cache = VolumeUsageCache(str(tmp_path), trio.current_time, period=60)
    walks = Walks(monkeypatch, volumes, threading.Barrier(WALK_THREADS, timeout=30))
    async with trio.open_nursery() as nursery:
        for uid in uids:
            nursery.start_soon(cache.pod_volumes, uid)
    assert walks.started == 6 and walks.peak == WALK_THREADS


async def test_a_big_volume_is_walked_on_across_passes(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A pass takes ``max_entries`` of a volume; the figures stay stale (the next ask walks
    on) and only grow until the walk ends; then they hold for the period. A new walk
    reports the last whole figures, raised to what it has counted."""
    volume = _volume(tmp_path, "u1", files=40)
    now = 0.0
    cache = VolumeUsageCache(str(tmp_path), lambda: now, period=60, max_entries=10)
    seen = [(await cache.pod_volumes("u1"))[0].usage for _ in range(6)]
    assert [s.inodes for s in seen] == [11, 21, 31, 41, 41, 41]
    # the fifth pass finds the end; the sixth is within the period: no walk
    assert [s.complete for s in seen] == [False, False, False, False, True, True]
    whole = directory_usage(volume)
    assert seen[-1] == whole
    assert [s.bytes for s in seen] == sorted(s.bytes for s in seen)

    for i in range(30):
        (volume / f"f{i}").unlink()
    now = 61.0
    again = (await cache.pod_volumes("u1"))[0].usage
    assert again == DirUsage(whole.bytes, whole.inodes, complete=False)
    while not again.complete:
        again = (await cache.pod_volumes("u1"))[0].usage
    assert again == directory_usage(volume) and again.inodes == 11


async def test_a_cancelled_pass_keeps_what_it_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    """A client that hangs up cancels the pass it drives; the next pass goes on from there
    (hanging up in a loop cannot keep a volume unmeasured)."""
    from kubelet.stats import fs

    monkeypatch.setattr(fs, "CHECK_EVERY", 5)
    volume = _volume(tmp_path, "u1", files=30)
    cache = VolumeUsageCache(str(tmp_path), trio.current_time, period=60, max_entries=10)
    calls = 0
    check = trio.from_thread.check_cancelled

    def hang_up_at_second_check() -> None:
        nonlocal calls
        calls += 1
        if calls % 2 == 0:
            raise trio.Cancelled._create()
        check()

    monkeypatch.setattr(trio.from_thread, "check_cancelled", hang_up_at_second_check)
    for _ in range(3):
        with pytest.raises(trio.Cancelled):
            await cache.pod_volumes("u1")
    monkeypatch.setattr(trio.from_thread, "check_cancelled", check)
    usage = (await cache.pod_volumes("u1"))[0].usage
    assert usage.complete and usage == directory_usage(volume)


async def test_forgetting_a_pod_closes_its_paused_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    from kubelet.stats import fs

    monkeypatch.setattr(fs, "CHEAP_SKIP", 5)
    _volume(tmp_path, "u1", files=30)
    before = len(os.listdir("/proc/self/fd"))
    cache = VolumeUsageCache(str(tmp_path), trio.current_time, period=60, max_entries=10)
    assert not (await cache.pod_volumes("u1"))[0].usage.complete
    assert len(os.listdir("/proc/self/fd")) == before + 1
    cache.keep(set())
    assert len(os.listdir("/proc/self/fd")) == before


async def test_a_claim_volume_is_measured_at_its_path_and_names_its_claim(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    from kubelet.stats import ClaimRecord, claim_record_path

    disk = tmp_path / "disk"
    disk.mkdir()
    (disk / "f").write_bytes(b"x" * 8192)
    record = ClaimRecord("data", "web-data", "ns", "pv-1", "kubernetes.io~local-volume", str(disk))
    target = Path(claim_record_path(str(tmp_path / "pods" / "u1"), "data"))
    target.parent.mkdir(parents=True)
    target.write_bytes(record.to_json())
    scratch = _volume(tmp_path, "u1")
    cache = VolumeUsageCache(str(tmp_path), trio.current_time, period=60, in_threads=False)
    volumes = {v.name: v for v in await cache.pod_volumes("u1")}
    assert volumes["data"].path == str(disk) and volumes["data"].pvc == ("web-data", "ns")
    assert volumes["data"].usage.bytes >= 8192
    assert volumes["scratch"].path == str(scratch) and volumes["scratch"].pvc is None
