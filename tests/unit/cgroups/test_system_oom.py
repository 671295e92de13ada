"""The kubelet's own oom_score_adj kept applied, as upstream's container manager does:
with kubeletCgroups every minute beside the move, without it every five minutes; only in
the host's PID namespace. On a fake /proc."""

from __future__ import annotations

import logging
from pathlib import Path

import attrs
import pytest
import trio

from kubelet.cgroups.system import SystemCgroups
from kubelet.testing import TreeCgroupFs, v1_tree
from kubelet.testing.fakeproc import add_proc, fake_proc

KUBELET_PID = 4242


def score(proc: Path) -> str:
    return (proc / str(KUBELET_PID) / "oom_score_adj").read_text()


def system(tmp_path: Path, proc: Path, **kw: str) -> SystemCgroups:
    fs = TreeCgroupFs(v1_tree(tmp_path / "cg"))
    return SystemCgroups(fs, proc=proc, own_pid=lambda: KUBELET_PID, oom_score_adj=-999, **kw)


async def inline(fn: object) -> object:
    assert callable(fn)
    return fn()


def test_kubelet_cgroups_applies_the_score_with_the_move(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    add_proc(proc, KUBELET_PID, "4:cpu:/\n5:memory:/\n")
    moves = system(tmp_path, proc, kubelet_cgroups="/kubelet")
    assert moves.ensure() == []
    assert score(proc) == "-999"
    # already in its cgroup: no move, the score is applied all the same
    (proc / str(KUBELET_PID) / "cgroup").write_text("4:cpu:/kubelet\n5:memory:/kubelet\n")
    (proc / str(KUBELET_PID) / "oom_score_adj").write_text("0\n")
    assert moves.ensure() == []
    assert score(proc) == "-999"


def test_a_process_without_an_oom_score_file_reports_upstreams_error(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    add_proc(proc, KUBELET_PID, "4:cpu:/kubelet\n5:memory:/kubelet\n")
    (proc / str(KUBELET_PID) / "oom_score_adj").unlink()
    (failure,) = system(tmp_path, proc, kubelet_cgroups="/kubelet").ensure()
    assert failure.startswith(f"/kubelet: failed to apply oom score -999 to PID {KUBELET_PID}: ")
    assert not (proc / str(KUBELET_PID) / "oom_score_adj").exists()  # never created


def test_a_kubelet_in_a_container_keeps_its_score(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    add_proc(proc, KUBELET_PID, "0::/\n", namespace="pid:[4026532999]")
    alone = system(tmp_path, proc)
    alone.ensure_oom_score()
    assert attrs.evolve(alone, kubelet_cgroups="/kubelet").ensure() == []
    assert score(proc) == "0\n"


async def test_kubelet_cgroups_reapplies_the_score_every_minute(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    proc = fake_proc(tmp_path / "proc")
    add_proc(proc, KUBELET_PID, "4:cpu:/\n5:memory:/\n")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(system(tmp_path, proc, kubelet_cgroups="/kubelet").run, inline)
        await trio.sleep(1)
        assert score(proc) == "-999"
        (proc / str(KUBELET_PID) / "oom_score_adj").write_text("0\n")  # someone reset it
        await trio.sleep(60)
        assert score(proc) == "-999"
        nursery.cancel_scope.cancel()


async def test_without_kubelet_cgroups_the_score_is_reapplied_every_five_minutes(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    proc = fake_proc(tmp_path / "proc")
    add_proc(proc, KUBELET_PID, "0::/\n")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(system(tmp_path, proc).run, inline)
        await trio.sleep(1)
        assert score(proc) == "-999"  # at once
        (proc / str(KUBELET_PID) / "oom_score_adj").write_text("0\n")
        await trio.sleep(4 * 60 - 2)
        assert score(proc) == "0\n"  # not before the fifth minute
        await trio.sleep(62)
        assert score(proc) == "-999"
        nursery.cancel_scope.cancel()


async def test_a_failure_is_logged_and_tried_again(
    tmp_path: Path, autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubelet.cgroups.system")
    proc = fake_proc(tmp_path / "proc")  # no /proc/<kubelet pid>: the namespace is unreadable
    async with trio.open_nursery() as nursery:
        nursery.start_soon(system(tmp_path, proc).run, inline)
        await trio.sleep(1)
        add_proc(proc, KUBELET_PID, "0::/\n")
        await trio.sleep(5 * 60)
        assert score(proc) == "-999"
        nursery.cancel_scope.cancel()
    assert "Failed to ensure process in container with oom score: failed to find pid" in (
        caplog.text
    )
