"""``/containerLogs``: query decoding, which instance, and reading CRI log files we write."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import attrs
import pytest
import trio

from kubelet.api import Container, ContainerRestartRule, Pod
from kubelet.api.pod import ContainerRestartRuleOnExitCodes
from kubelet.boundedio import inline
from kubelet.cri import ContainerInfo, ContainerRunState
from kubelet.server import logread
from kubelet.server.logopts import DecodeError, InvalidOptions, LogOptions, parse_log_options
from kubelet.server.logparse import fixed_nano
from kubelet.server.logread import read_logs, tail_start
from kubelet.server.logs import NoLogs, choose_instance
from kubelet.testing.builders import make_pod

T0 = 1_800_000_000  # seconds
T = TypeVar("T")


def line(second: int, text: str, stream: str = "stdout", tag: str = "F") -> str:
    stamp = dt.datetime.fromtimestamp(T0 + second, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.123456789Z {stream} {tag} {text}\n"


def write_log(path: Path, *lines: str) -> Path:
    path.write_text("".join(lines))
    return path


async def never_running() -> bool:
    return False


async def read(path: Path, now: float = T0 + 100, **options: object) -> bytes:
    out: list[bytes] = []

    async def write(chunk: bytes) -> None:
        out.append(chunk)

    opts = LogOptions(**options)  # type: ignore[arg-type]
    await read_logs(str(path), opts, write, never_running, since_ns=opts.since_ns(now))
    return b"".join(out)


# -- decoding ----------------------------------------------------------------------------


def q(**params: str) -> dict[str, list[str]]:
    return {k: [v] for k, v in params.items()}


def test_decoding() -> None:
    assert parse_log_options({}) == LogOptions()
    opts = parse_log_options(q(follow="", previous="1", timestamps="false", tailLines="10"))
    assert (opts.follow, opts.previous, opts.timestamps, opts.tail_lines) == (True, True, False, 10)
    assert parse_log_options(q(tail="5")).tail_lines == 5
    assert parse_log_options(q(tail="all", tailLines="3")).tail_lines is None
    assert parse_log_options(q(tailLines="")).tail_lines is None
    since = parse_log_options(q(sinceTime="2027-01-15T08:00:00Z")).since_time
    assert since == dt.datetime(2027, 1, 15, 8, tzinfo=dt.UTC)
    for bad in (q(tailLines="x"), q(limitBytes="1.5"), q(sinceTime="yesterday")):
        with pytest.raises(DecodeError):
            parse_log_options(bad)


@pytest.mark.parametrize(
    "text",
    ["9223372036854775808", "-9223372036854775809", "1" + "0" * 400, "9" * 5000, "1_0", " 1"],
)
def test_integers_are_go_int64s(text: str) -> None:
    """As strconv.ParseInt(s, 10, 64): out of range, or not plain ASCII digits, is a
    400 (a huge sinceSeconds once broke the log stream after its 200)."""
    for name in ("sinceSeconds", "tailLines", "limitBytes"):
        with pytest.raises(DecodeError):
            parse_log_options({name: [text]})
    assert parse_log_options(q(sinceSeconds="9223372036854775807")).since_ns(T0) is not None
    assert parse_log_options(q(tailLines="+007")).tail_lines == 7


@pytest.mark.parametrize(
    "params",
    [
        q(tailLines="-1"),
        q(limitBytes="0"),
        q(sinceSeconds="0"),
        q(sinceSeconds="5", sinceTime="2027-01-15T08:00:00Z"),
        q(stream="Bogus"),
        q(stream="Stdout", tailLines="3"),
    ],
)
def test_invalid(params: dict[str, list[str]]) -> None:
    with pytest.raises(InvalidOptions):
        parse_log_options(params)


def test_since_bound_is_the_later_one() -> None:
    opts = LogOptions(since_seconds=10)
    assert opts.since_ns(1000.0) == 990 * 10**9


# -- choosing the instance ---------------------------------------------------------------


def pod(policy: str = "Always") -> Pod:
    return make_pod(Container(name="app", image="busybox"), uid="u", restart_policy=policy)


def inst(cid: str, state: ContainerRunState, exit_code: int = 0) -> ContainerInfo:
    return ContainerInfo(id=cid, name="app", state=state, exit_code=exit_code, log_path=f"/{cid}")


RUN, EXIT, NEW = ContainerRunState.RUNNING, ContainerRunState.EXITED, ContainerRunState.CREATED


def test_current_instance() -> None:
    assert choose_instance(pod(), "app", [inst("c2", RUN), inst("c1", EXIT)], False).id == "c2"
    assert choose_instance(pod(), "app", [inst("c2", NEW), inst("c1", EXIT)], False).id == "c1"
    assert choose_instance(pod(), "app", [inst("c1", EXIT, 1)], False).id == "c1"
    with pytest.raises(NoLogs, match="is waiting to start: ContainerCreating"):
        choose_instance(pod(), "app", [], False)
    with pytest.raises(NoLogs):
        choose_instance(pod(), "app", [inst("c1", NEW)], False)


def test_previous_instance() -> None:
    assert choose_instance(pod(), "app", [inst("c2", RUN), inst("c1", EXIT)], True).id == "c1"
    # exited and about to restart: it is the last terminated one
    assert choose_instance(pod(), "app", [inst("c2", EXIT, 1), inst("c1", EXIT)], True).id == "c2"
    # exited for good (Never): the one before it
    never = pod("Never")
    assert choose_instance(never, "app", [inst("c2", EXIT, 1), inst("c1", EXIT)], True).id == "c1"
    with pytest.raises(NoLogs, match="previous terminated container 'app' in pod 'web' not found"):
        choose_instance(pod(), "app", [inst("c1", RUN)], True)


def test_previous_instance_follows_the_container_restart_rules() -> None:
    """Pod Never, container Never with a Restart rule on 42: an exit with 42 waits to be
    restarted (it is the previous one); an exit with 1 is the current one for good."""
    rule = ContainerRestartRule(
        action="Restart", exit_codes=ContainerRestartRuleOnExitCodes(operator="In", values=(42,))
    )
    app = Container(
        name="app", image="busybox", restart_policy="Never", restart_policy_rules=(rule,)
    )
    ruled = make_pod(app, uid="u", restart_policy="Never")
    assert choose_instance(ruled, "app", [inst("c2", EXIT, 42), inst("c1", EXIT)], True).id == "c2"
    assert choose_instance(ruled, "app", [inst("c2", EXIT, 1), inst("c1", EXIT)], True).id == "c1"
    own_never = make_pod(attrs.evolve(app, restart_policy_rules=()), uid="u")
    assert choose_instance(own_never, "app", [inst("c2", EXIT, 1), inst("c1", EXIT)], True).id == (
        "c1"
    )


# -- reading -----------------------------------------------------------------------------


def test_tail_start(tmp_path: Path) -> None:
    path = write_log(tmp_path / "l", "a\n", "bb\n", "ccc\n")
    with path.open("rb") as fh:
        assert [tail_start(fh, n) for n in (None, -1, 0, 1, 2, 3, 10)] == [0, 0, 9, 5, 2, 0, 0]
    big = write_log(tmp_path / "big", *(f"{i:05d}\n" for i in range(5000)))
    with big.open("rb") as fh:
        fh.seek(tail_start(fh, 1234))
        assert fh.read().count(b"\n") == 1234


def test_fixed_nano() -> None:
    assert fixed_nano(b"2027-01-15T08:00:00.5Z") == b"2027-01-15T08:00:00.500000000Z"
    assert fixed_nano(b"2027-01-15T08:00:00Z") == b"2027-01-15T08:00:00.000000000Z"
    assert fixed_nano(b"2027-01-15T08:00:00.123+02:00") == b"2027-01-15T08:00:00.123000000+02:00"


async def test_options(tmp_path: Path) -> None:
    path = write_log(
        tmp_path / "0.log",
        line(0, "one"),
        line(10, "err", "stderr"),
        line(20, "par", tag="P"),
        line(20, "tial"),
        "garbage line\n",
        line(30, "last"),
    )
    assert await read(path) == b"one\nerr\npartial\nlast\n"
    assert await read(path, tail_lines=2) == b"last\n"  # the garbage line counts as a line
    assert await read(path, tail_lines=3) == b"tial\nlast\n"
    assert await read(path, tail_lines=0) == b""
    assert await read(path, limit_bytes=6) == b"one\ner"
    assert await read(path, stream="Stderr") == b"err\n"
    assert await read(path, stream="Stdout") == b"one\npartial\nlast\n"
    assert await read(path, now=T0 + 25, since_seconds=10) == b"partial\nlast\n"
    since = dt.datetime.fromtimestamp(T0 + 25, dt.UTC)
    assert await read(path, since_time=since) == b"last\n"
    stamped = await read(path, timestamps=True, tail_lines=1)
    stamp = dt.datetime.fromtimestamp(T0 + 30, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert stamped == f"{stamp}.123456789Z last\n".encode()


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 31])
async def test_lines_read_in_any_pieces_read_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Lines that span reads (their first fields cut anywhere) read as whole ones do."""
    path = write_log(
        tmp_path / "0.log",
        line(0, "one two"),
        "\n",
        line(10, "", "stderr"),
        line(20, "par", tag="P:x"),
        line(20, "tial", tag="F:y"),
        "garbage line\n",
        "2027-01-15T08:00:00Z stdin F no\n",
        line(30, "last").rstrip("\n"),
    )
    cases = [{}, {"timestamps": True}, {"limit_bytes": 13}, {"tail_lines": 3}, {"stream": "Stderr"}]
    whole = [await read(path, **options) for options in cases]
    monkeypatch.setattr(logread, "CHUNK", chunk)
    assert [await read(path, **options) for options in cases] == whole
    assert whole[0] == b"one two\n\npartial\nlast\n"


async def test_incomplete_last_line(tmp_path: Path) -> None:
    path = write_log(tmp_path / "0.log", line(0, "one"), line(1, "cut").rstrip("\n"))
    assert await read(path) == b"one\ncut\n"


async def test_follow_until_the_container_stops(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    path = write_log(tmp_path / "0.log", line(0, "one"))
    running = True
    out: list[bytes] = []

    async def is_running() -> bool:
        return running

    async def write(chunk: bytes) -> None:
        out.append(chunk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: read_logs(
                str(path),
                LogOptions(follow=True),
                write,
                is_running,
                since_ns=None,
                run_sync=inline,
            )
        )
        with trio.fail_after(5):  # fake time: reads inline, the pump polls every 0.1 s
            while b"".join(out) != b"one\n":
                await trio.sleep(0.02)
            with path.open("a") as fh:
                fh.write(line(1, "two"))
            while b"".join(out) != b"one\ntwo\n":
                await trio.sleep(0.02)
            # rotation: the old file is renamed, a new one takes its place
            path.rename(tmp_path / "0.log.20270115-080000")
            with (tmp_path / "0.log.20270115-080000").open("a") as fh:
                fh.write(line(2, "three"))
            write_log(path, line(3, "four"))
            while b"".join(out) != b"one\ntwo\nthree\nfour\n":
                await trio.sleep(0.02)
            with path.open("a") as fh:
                fh.write(line(4, "five"))
            running = False
    assert b"".join(out) == b"one\ntwo\nthree\nfour\nfive\n"


async def test_follow_with_tail(tmp_path: Path) -> None:
    path = write_log(tmp_path / "0.log", line(0, "one"), line(1, "two"), line(2, "three"))
    out = await read(path, follow=True, tail_lines=1)  # the container is not running
    assert out == b"three\n"


# -- hostile log files ---------------------------------------------------------------------


def long_line_log(path: Path, size: int) -> Path:
    """One line of ``size`` bytes, then a short one."""
    stamp = line(0, "")[:30].encode()
    with path.open("wb") as fh:
        fh.write(stamp + b" stdout F ")
        fh.write(b"x" * size)
        fh.write(b"\n" + line(1, "after").encode())
    return path


async def test_a_long_line_streams_through_in_bounded_pieces(tmp_path: Path) -> None:
    """A line of 16 MiB reaches the client in pieces of about one read each, never whole:
    one line does not hold its length in memory."""
    path = long_line_log(tmp_path / "0.log", 16 << 20)
    sizes: list[int] = []
    total = 0
    tail = b""

    async def write(chunk: bytes) -> None:
        nonlocal total, tail
        sizes.append(len(chunk))
        total += len(chunk)
        tail = (tail + chunk)[-16:]

    await read_logs(str(path), LogOptions(), write, never_running, since_ns=None, run_sync=inline)
    assert total == (16 << 20) + len(b"\nafter\n")
    assert tail.endswith(b"xxx\nafter\n")
    assert max(sizes) <= 64 * 1024


async def test_limit_bytes_stops_reading_at_the_limit(tmp_path: Path) -> None:
    """``limitBytes=10`` on a 16 MiB line reads the start of the file, not all of it."""
    path = long_line_log(tmp_path / "0.log", 16 << 20)
    reads = 0

    async def counting(fn: Callable[[], T]) -> T:
        nonlocal reads
        reads += 1
        return fn()

    out: list[bytes] = []

    async def write(chunk: bytes) -> None:
        out.append(chunk)

    opts = LogOptions(limit_bytes=10)
    await read_logs(str(path), opts, write, never_running, since_ns=None, run_sync=counting)
    assert b"".join(out) == b"x" * 10
    assert reads <= 4  # open, tail offset, one read (and its successor's check at most)


async def test_reading_a_long_line_is_linear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 MiB in one line read 4 KiB at a time: 1,024 reads, each looking at its own bytes
    only (joining every read to the line so far made it quadratic: seconds of CPU)."""
    monkeypatch.setattr(logread, "CHUNK", 4096)
    path = long_line_log(tmp_path / "0.log", 4 << 20)
    total = 0

    async def write(chunk: bytes) -> None:
        nonlocal total
        total += len(chunk)

    start = time.thread_time()
    await read_logs(str(path), LogOptions(), write, never_running, since_ns=None, run_sync=inline)
    assert total == (4 << 20) + len(b"\nafter\n")
    assert time.thread_time() - start < 0.3


@contextlib.contextmanager
def unblocked_after(fifo: Path, seconds: float) -> Iterator[list[bool]]:
    """A writer that opens ``fifo`` after ``seconds`` (so a reader blocked in ``open``
    wakes up and the test fails instead of hanging); says whether it had to."""
    opened: list[bool] = []
    stop = threading.Event()

    def writer() -> None:
        if stop.wait(seconds):
            return
        fd = os.open(fifo, os.O_WRONLY)
        if not stop.is_set():
            opened.append(True)
            os.write(fd, line(9, "from the fifo").encode())
        os.close(fd)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        yield opened
    finally:
        stop.set()
        if not opened:
            with contextlib.suppress(OSError):  # a writer stuck in open: let it through
                os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        thread.join(5)


async def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    """A FIFO at the log path is refused at once: nothing written, nothing blocked."""
    fifo = tmp_path / "0.log"
    os.mkfifo(fifo)
    out: list[bytes] = []

    async def write(chunk: bytes) -> None:
        out.append(chunk)

    with unblocked_after(fifo, 2.0) as opened:
        start = time.monotonic()
        await read_logs(str(fifo), LogOptions(), write, never_running, since_ns=None)
        elapsed = time.monotonic() - start
    assert (b"".join(out), opened) == (b"", [])
    assert elapsed < 1.0


async def test_a_link_is_not_followed(tmp_path: Path) -> None:
    """The runtime writes the log file itself: a symbolic link there leads elsewhere."""
    secret = write_log(tmp_path / "elsewhere", line(0, "secret"))
    (tmp_path / "0.log").symlink_to(secret)
    assert await read(tmp_path / "0.log") == b""


async def test_a_fifo_renamed_over_a_followed_log_ends_the_stream(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Rotation to a FIFO: the old file is read to its end, the FIFO is refused and the
    stream ends; the event loop never waits for a writer."""
    path = write_log(tmp_path / "0.log", line(0, "one"))
    out: list[bytes] = []

    async def running() -> bool:
        return True

    async def write(chunk: bytes) -> None:
        out.append(chunk)

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with unblocked_after(path, 2.0) as opened:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: read_logs(
                    str(path), LogOptions(follow=True), write, running, since_ns=None,
                    run_sync=inline,
                )
            )
            with trio.fail_after(5):
                while b"".join(out) != b"one\n":
                    await trio.sleep(0.02)
            with path.open("a") as fh:
                fh.write(line(1, "two"))
            started = time.monotonic()
            os.rename(fifo, path)
            await trio.sleep(3)  # fake time: the pump ends by itself meanwhile
            nursery.cancel_scope.deadline = trio.current_time() + 60
        elapsed = time.monotonic() - started
    assert b"".join(out) == b"one\ntwo\n"
    assert (opened, nursery.cancel_scope.cancelled_caught) == ([], False)
    assert elapsed < 1.0
