"""The bounded reads and decodes every entry of outside data goes through."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kubelet.boundedio import (
    OFFLOAD_PLACES,
    InputRefused,
    RunSync,
    file_names,
    in_state_thread,
    in_thread,
    inline,
    loads_json,
    read_regular_file,
)


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 100)
    assert read_regular_file(tmp_path / "f", 100) == b"x" * 100


def test_a_file_over_the_limit_is_refused_not_cut(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 101)
    with pytest.raises(InputRefused, match="larger than 100 bytes"):
        read_regular_file(tmp_path / "f", 100)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputRefused, match="not a regular file"):
        read_regular_file(tmp_path / "fifo", 100)


def test_a_link_to_a_device_is_refused(tmp_path: Path) -> None:
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(InputRefused, match="not a regular file"):
        read_regular_file(tmp_path / "zero", 1 << 30)


def test_a_link_to_a_regular_file_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"pem")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_regular_file(tmp_path / "link", 10) == b"pem"


def test_deep_json_is_refused_as_input_not_a_recursion_error() -> None:
    with pytest.raises(InputRefused, match="nested too deeply"):
        loads_json("[" * 100_000 + "]" * 100_000, max_bytes=1 << 20)


def test_large_or_broken_json_is_refused() -> None:
    with pytest.raises(InputRefused, match="larger than 10 bytes"):
        loads_json(b'{"a": "0123456789"}', max_bytes=10)
    with pytest.raises(InputRefused, match="invalid JSON"):
        loads_json(b'{"a": ', max_bytes=10)
    assert loads_json(b'{"a": [1]}', max_bytes=100) == {"a": [1]}


async def test_the_runners_return_the_result() -> None:
    assert await in_thread(lambda: 1 + 1) == 2
    assert await inline(lambda: 2 + 2) == 4


def test_file_names_leaves_directories_out_and_a_missing_directory_is_empty(
    tmp_path: Path,
) -> None:
    (tmp_path / "0.log").write_text("")
    (tmp_path / "1.log").symlink_to(tmp_path / "0.log")
    (tmp_path / "sub").mkdir()
    assert sorted(file_names(tmp_path, 10)) == ["0.log", "1.log"]
    assert file_names(tmp_path / "missing", 10) == []


def test_file_names_refuses_a_directory_over_the_limit(tmp_path: Path) -> None:
    for n in range(4):
        (tmp_path / f"{n}.log").write_text("")
    assert len(file_names(tmp_path, 4)) == 4
    with pytest.raises(InputRefused, match="more than 3 entries"):
        file_names(tmp_path, 3)


@pytest.mark.parametrize(("runner", "places"), [(in_state_thread, 1), (in_thread, OFFLOAD_PLACES)])
def test_threads_abandoned_as_a_run_ends_do_not_hold_the_next_run(
    runner: RunSync, places: int
) -> None:
    """A thread still running when its run ends never gives its limiter's place back;
    each run has limiters of its own, so the next run in the process (a test's) does
    not wait for them."""
    stuck = threading.Event()

    async def abandon() -> None:
        with trio.move_on_after(1):  # the clock jumps while the threads block
            async with trio.open_nursery() as nursery:
                for _ in range(places):
                    nursery.start_soon(runner, stuck.wait)

    async def read() -> str:
        with trio.fail_after(5):
            return await runner(lambda: "read")

    try:
        trio.run(abandon, clock=MockClock(autojump_threshold=0))
        assert trio.run(read) == "read"
    finally:
        stuck.set()
