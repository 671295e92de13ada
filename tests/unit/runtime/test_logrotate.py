"""Container log rotation against a scripted runtime: sizes, file counts, compression, failures."""

from __future__ import annotations

import contextlib
import gzip
import os
import threading
import time
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
import trio

from kubelet.cri import CriError, RuntimeClient, api
from kubelet.runtime.logrotate import (
    ContainerLogManager,
    LogRotateConfigError,
    in_use,
)


@attrs.define
class ScriptedRuntime:
    """ContainerStatus / ReopenContainerLog / ListContainers for one running container."""

    log_path: Path
    reopen_fails: bool = False
    reopened: int = 0
    statuses: int = 0
    running: tuple[str, ...] = ("c1",)

    async def container_status(self, container_id: str) -> api.ContainerStatusResponse:
        self.statuses += 1
        status = api.ContainerStatus(id=container_id, log_path=str(self.log_path))
        return api.ContainerStatusResponse(status=status)

    async def reopen_container_log(self, container_id: str) -> None:
        if self.reopen_fails:
            raise CriError("ReopenContainerLog", "container is not running")
        self.reopened += 1
        self.log_path.touch()

    async def list_containers(self, **_: Any) -> list[api.Container]:
        return [api.Container(id=c, state=api.CONTAINER_RUNNING) for c in self.running]


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        self.now += 1.0  # each rotation a second later: distinct names
        return self.now


def manager(rt: ScriptedRuntime, **kw: Any) -> ContainerLogManager:
    return ContainerLogManager(
        cast(RuntimeClient, rt),
        kw.pop("max_size", 100),
        kw.pop("max_files", 5),
        wall_clock=Clock(),
        **kw,
    )


def write(path: Path, n: int, text: str = "x") -> None:
    with path.open("a") as fh:
        fh.write(text * n)


async def test_small_log_is_left_alone(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    write(log, 99)
    rt = ScriptedRuntime(log)
    assert not await manager(rt).process("c1")
    assert os.listdir(tmp_path) == ["0.log"]


async def test_failed_reopen_undoes_the_rename(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    write(log, 200)
    rt = ScriptedRuntime(log, reopen_fails=True)
    with pytest.raises(CriError):
        await manager(rt).process("c1")
    assert os.listdir(tmp_path) == ["0.log"]
    assert log.stat().st_size == 200


async def test_missing_log_is_reopened(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    rt = ScriptedRuntime(log)
    assert not await manager(rt).process("c1")
    assert rt.reopened == 1 and log.exists()


async def test_leftovers_of_an_interrupted_rotation_go(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    write(log, 200)
    for name in ("0.log.20300101-000000", "0.log.20300101-000000.gz", "0.log.x.gz.tmp"):
        (tmp_path / name).write_bytes(gzip.compress(b"old") if name.endswith(".gz") else b"old")
    await manager(ScriptedRuntime(log)).process("c1")
    names = sorted(os.listdir(tmp_path))
    assert "0.log.x.gz.tmp" not in names and "0.log.20300101-000000" not in names
    assert "0.log.20300101-000000.gz" in names


def _release_fifo_readers(path: Path, stop: threading.Event, after: float) -> None:
    """From ``after`` seconds on, open ``path`` for writing now and then, so a reader stuck
    in ``open`` of the FIFO wakes up (the test then fails rather than hangs)."""
    if stop.wait(after):
        return
    while not stop.is_set():
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        stop.wait(0.05)


async def test_a_fifo_or_a_link_among_rotated_logs_is_not_compressed(tmp_path: Path) -> None:
    """Only regular files are compressed: a FIFO would hold the rotation (and a shutdown)
    until someone wrote to it, a link would copy whatever it leads to. Both are left."""
    log = tmp_path / "0.log"
    write(log, 200)
    fifo = tmp_path / "0.log.20300101-000000"
    os.mkfifo(fifo)
    (tmp_path / "secret").write_text("secret")
    (tmp_path / "0.log.20300101-000001").symlink_to(tmp_path / "secret")
    stop = threading.Event()
    helper = threading.Thread(target=_release_fifo_readers, args=(fifo, stop, 2.0))
    helper.start()
    try:
        start = time.monotonic()
        assert await manager(ScriptedRuntime(log)).process("c1")
        elapsed = time.monotonic() - start
    finally:
        stop.set()
        helper.join()
    names = sorted(os.listdir(tmp_path))
    assert "0.log.20300101-000000" in names and "0.log.20300101-000001" in names
    assert not [name for name in names if name.endswith(".gz")]
    assert elapsed < 1.0


def test_in_use() -> None:
    used, unused = in_use(["a.1", "a.1.gz", "a.2", "a.3.tmp"])
    assert sorted(used) == ["a.1.gz", "a.2"] and sorted(unused) == ["a.1", "a.3.tmp"]


def test_configuration_checks(tmp_path: Path) -> None:
    rt = cast(RuntimeClient, ScriptedRuntime(tmp_path / "x"))
    with pytest.raises(LogRotateConfigError):
        ContainerLogManager(rt, "10Mi", 1)
    with pytest.raises(LogRotateConfigError):
        ContainerLogManager(rt, "ten", 5)
    assert ContainerLogManager(rt, "10Mi", 5).max_size == 10 * 1024 * 1024
    assert not ContainerLogManager(rt, -1, 5).enabled


async def test_run_rotates_every_interval(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    log = tmp_path / "0.log"
    rt = ScriptedRuntime(log)
    # max_files=2 keeps no older file, so nothing is compressed in a thread (a thread
    # looks idle to autojump_clock, which would then run the fake clock past it)
    m = manager(rt, monitor_interval=10.0, max_files=2)
    write(log, 200)
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        await trio.sleep(1)
        assert rt.reopened == 1
        write(log, 200)
        await trio.sleep(10)
        assert rt.reopened == 2
        nursery.cancel_scope.cancel()


async def test_the_log_path_is_asked_once_per_container(tmp_path: Path) -> None:
    """A container's log path never changes: one ContainerStatus for it, not one per round
    (110 containers cost 11 calls a second at the 10 s interval otherwise)."""
    rt = ScriptedRuntime(tmp_path / "0.log", running=("c1", "c2"))
    rt.log_path.touch()
    m = manager(rt)
    for _ in range(3):
        await m.rotate_all()
    assert rt.statuses == 2
    rt.running = ("c2",)
    await m.rotate_all()
    rt.running = ("c1", "c2")  # gone and back (IDs are not reused; the cache must not grow)
    await m.rotate_all()
    assert rt.statuses == 3


async def test_rotation_keeps_at_most_max_files(tmp_path: Path) -> None:
    log = tmp_path / "app" / "0.log"
    log.parent.mkdir()
    rt = ScriptedRuntime(log)
    m = manager(rt)
    for i in range(12):
        write(log, 150, chr(ord("a") + i))
        assert await m.process("c1")
        files = sorted(os.listdir(log.parent))
        assert len(files) <= 5, files
    files = sorted(os.listdir(log.parent))
    assert len(files) == 5  # live + newest rotated (plain) + 3 compressed
    assert "0.log" in files
    compressed = [f for f in files if f.endswith(".gz")]
    plain_rotated = [f for f in files if f.startswith("0.log.") and not f.endswith(".gz")]
    assert len(compressed) == 3 and len(plain_rotated) == 1
    # the newest rotated file is the last write; the compressed ones the three before it
    assert (log.parent / plain_rotated[0]).read_text() == "l" * 150
    contents = [gzip.decompress((log.parent / f).read_bytes()).decode() for f in sorted(compressed)]
    assert contents == ["i" * 150, "j" * 150, "k" * 150]
    assert rt.reopened == 12
