"""``/containerLogs``: query decoding, which instance, and reading CRI log files we write."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import attrs
import pytest
import trio

from kubelet.api.pod import Container, ContainerRestartRule, ContainerRestartRuleOnExitCodes, Pod
from kubelet.boundedio import inline
from kubelet.cri.types import ContainerInfo, ContainerRunState
from kubelet.server.logopts import DecodeError, InvalidOptions, LogOptions, parse_log_options
from kubelet.server.logread import fixed_nano, read_logs, tail_start
from kubelet.server.logs import NoLogs, choose_instance
from kubelet.testing.builders import make_pod

T0 = 1_800_000_000  # seconds


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
