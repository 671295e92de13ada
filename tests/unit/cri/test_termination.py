"""Termination messages: the per-instance file, File / FallbackToLogsOnError, the caps."""

from __future__ import annotations

import os
import random
import stat
import threading
import time
from pathlib import Path

import pytest

from kubelet.api import Container, ObjectMeta, Pod, PodSpec
from kubelet.cri import (
    STDERR,
    STDOUT,
    ContainerInfo,
    ContainerRunState,
    api,
    create_message_file,
    host_path_of,
    labels,
    message_mount,
    termination_message,
)
from kubelet.cri.logformat import format_line
from kubelet.cri.termination import (
    MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH,
    pod_container_dir,
    read_log_tail,
    read_message_file,
    termination_message_async,
    truncate_for_pod,
)

NS = 1_800_000_000 * 10**9


def exited(
    *,
    exit_code: int = 1,
    message: str = "",
    reason: str = "Error",
    log_path: str = "",
    policy: str | None = None,
    path: str = "/dev/termination-log",
) -> ContainerInfo:
    annotations = {labels.CONTAINER_TERMINATION_MESSAGE_PATH: path}
    if policy is not None:
        annotations[labels.CONTAINER_TERMINATION_MESSAGE_POLICY] = policy
    return ContainerInfo(
        id="c1",
        name="app",
        state=ContainerRunState.EXITED,
        exit_code=exit_code,
        reason=reason,
        message=message,
        log_path=log_path,
        annotations=annotations,
    )


def write_log(path: Path, records: list[tuple[str, bytes, bool]]) -> str:
    """A CRI log: (stream, message, partial) per record."""
    with path.open("wb") as fh:
        for i, (stream, message, partial) in enumerate(records):
            fh.write(format_line(NS + i, stream, message, partial=partial))
    return str(path)


def test_message_file_per_instance_under_the_pod_dir(tmp_path: Path) -> None:
    root = str(tmp_path)
    assert pod_container_dir(root, "u1", "app") == f"{root}/pods/u1/containers/app"
    old_umask = os.umask(0o077)
    try:
        path = create_message_file(root, "u1", "app", rng=random.Random(1))
    finally:
        os.umask(old_umask)
    directory, name = os.path.split(path)
    assert directory == f"{root}/pods/u1/containers/app"
    assert len(name) == 8 and int(name, 16) >= 0
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666
    assert os.path.getsize(path) == 0
    other = create_message_file(root, "u1", "app", rng=random.Random(2))
    assert other != path

    container = Container(name="app", termination_message_path="/dev/termination-log")
    mount = message_mount(container, path)
    assert (mount.container_path, mount.host_path) == ("/dev/termination-log", path)
    mounts = [api.Mount(container_path="/data", host_path="/x"), mount]
    assert host_path_of(mounts, "/dev/termination-log") == path
    assert host_path_of(mounts, "/other") is None


def test_file_policy_reads_the_last_4_kib(tmp_path: Path) -> None:
    path = tmp_path / "msg"
    path.write_bytes(b"a" * 100 + b"b" * MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH)
    text, missing = read_message_file(str(path))
    assert (text, missing) == ("b" * 4096, False)
    assert read_message_file(str(tmp_path / "gone")) == ("", True)
    text, _ = read_message_file(str(tmp_path))  # a directory: the error is the message
    assert text == f"Error on reading termination log {tmp_path}: open {tmp_path}: is a directory"

    path.write_text("disk full")
    info = exited(message="", policy="File")
    assert termination_message(info, str(path)) == "disk full"
    # the runtime's message comes first
    assert termination_message(exited(message="OOMKilled"), str(path)) == "OOMKilled: disk full"
    # no file mounted or none written: the runtime's message alone
    assert termination_message(exited(message="m"), None) == "m"
    path.write_text("")
    assert termination_message(exited(message="m"), str(path)) == "m"


def test_fallback_to_logs_on_error(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "0.log",
        [
            (STDOUT, b"starting", False),
            (STDERR, b"panic: ", True),
            (STDERR, b"it broke", False),
        ],
    )
    msg = tmp_path / "msg"
    msg.write_text("")
    policy = "FallbackToLogsOnError"
    info = exited(policy=policy, log_path=log)
    assert termination_message(info, str(msg)) == "starting\npanic: it broke\n"
    # the file wins when it says something
    msg.write_text("from file")
    assert termination_message(info, str(msg)) == "from file"
    # a missing file falls back, as does no mount at all
    assert termination_message(info, str(tmp_path / "gone")).startswith("starting")
    assert termination_message(info, None).startswith("starting")
    # only on error: exit 0 keeps the (empty) file's answer
    assert termination_message(exited(exit_code=0, policy=policy, log_path=log), None) == ""
    # a container that could not run has no logs worth reading
    cannot = exited(policy=policy, log_path=log, reason="ContainerCannotRun", message="m")
    assert termination_message(cannot, None) == "m"
    # explicit spec values override the annotations
    assert termination_message(exited(log_path=log), None, policy=policy).startswith("start")


def test_log_tail_is_80_lines_and_2_kib(tmp_path: Path) -> None:
    records = [(STDOUT, f"line {i:03d}".encode(), False) for i in range(200)]
    log = write_log(tmp_path / "0.log", records)
    text = read_log_tail(log)
    lines = text.splitlines()
    assert len(lines) == 80 and lines[0] == "line 120" and lines[-1] == "line 199"

    long = [(STDOUT, b"x" * 100 + str(i).encode(), False) for i in range(60)]
    text = read_log_tail(write_log(tmp_path / "1.log", long))
    assert len(text.encode()) == 2048 and text.endswith("x59\n")

    # partial records join into one line; the tail counts records
    parts = [(STDOUT, b"a", True), (STDOUT, b"b", True), (STDOUT, b"c", False)]
    assert read_log_tail(write_log(tmp_path / "2.log", parts), lines=2) == "bc\n"
    # malformed records are skipped
    bad = tmp_path / "3.log"
    bad.write_bytes(b"garbage\n" + format_line(NS, STDOUT, b"ok"))
    assert read_log_tail(str(bad)) == "ok\n"


def test_log_tail_of_a_big_file_reads_from_the_end(tmp_path: Path) -> None:
    records = [(STDOUT, b"y" * 1000, False) for _ in range(500)]  # ~0.5 MiB
    records.append((STDOUT, b"the end", False))
    text = read_log_tail(write_log(tmp_path / "0.log", records))
    assert text.endswith("the end\n") and len(text.encode()) == 2048


def test_unreadable_log(tmp_path: Path) -> None:
    gone = str(tmp_path / "none.log")
    assert read_log_tail(gone) == (
        "Error on reading termination message from logs: "
        f'failed to open log file "{gone}": open {gone}: no such file or directory'
    )


def test_log_tail_of_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO at the log path would hold the worker thread (and a shutdown waiting for it)
    until someone wrote to it: it is refused before a byte is read."""
    fifo = tmp_path / "0.log"
    os.mkfifo(fifo)
    stop = threading.Event()

    def release() -> None:  # so that a reader stuck in open fails the test, not hangs it
        if not stop.wait(2.0):
            os.close(os.open(fifo, os.O_WRONLY))

    helper = threading.Thread(target=release, daemon=True)
    helper.start()
    start = time.monotonic()
    try:
        text = read_log_tail(str(fifo))
    finally:
        stop.set()
    assert time.monotonic() - start < 1.0
    assert text == (
        "Error on reading termination message from logs: "
        f'failed to open log file "{fifo}": not a regular file'
    )


def test_log_tail_of_one_endless_line_is_bounded(tmp_path: Path) -> None:
    """32 MiB without a newline: the tail reads a bounded stretch from the end (joining
    every block to the ones after it made this quadratic and held the whole file)."""
    log = tmp_path / "0.log"
    with log.open("wb") as fh:
        fh.write(format_line(NS, STDOUT, b"first"))
        fh.write(b"z" * (32 << 20))
    start = time.thread_time()
    text = read_log_tail(str(log))
    assert time.thread_time() - start < 0.5
    assert text == ""  # the line's start (its time) is further back than the tail reads


async def test_async_variant(tmp_path: Path) -> None:
    path = tmp_path / "msg"
    path.write_text("bye")
    assert await termination_message_async(exited(), str(path)) == "bye"


@pytest.mark.parametrize(("containers", "budget"), [(1, 12288), (3, 4096), (5, 2457)])
def test_pod_wide_cap(containers: int, budget: int) -> None:
    pod = Pod(
        metadata=ObjectMeta(name="p", namespace="d", uid="u"),
        spec=PodSpec(containers=tuple(Container(name=f"c{i}") for i in range(containers))),
    )
    message = "z" * 20_000
    assert len(truncate_for_pod(message, pod)) == budget
    assert truncate_for_pod("short", pod) == "short"
    # never splits a character
    assert truncate_for_pod("é" * 10_000, pod) == "é" * (budget // 2)
