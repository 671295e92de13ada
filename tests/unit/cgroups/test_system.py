"""kubeletCgroups and systemCgroups: the kubelet's process and the root's non-kernel
processes moved into the named cgroups, on a temporary tree and a fake /proc."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kubelet.cgroups import CgroupError
from kubelet.cgroups.system import SystemCgroups, cgroup_of, movable, parse_proc_cgroup
from kubelet.testing import TreeCgroupFs, v1_tree
from kubelet.testing.cgroupfs import add_process, v2_tree
from kubelet.testing.fakeproc import add_proc, fake_proc

HYBRID = (
    "12:memory:/user.slice\n4:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice/x.scope\n"
    "0::/user.slice/x.scope\n"
)
KUBELET_PID = 4242


def procs(tree: Path, hierarchy: str, path: str = "") -> list[int]:
    return [int(p) for p in (tree / hierarchy / path / "cgroup.procs").read_text().split()]


def test_which_cgroup_a_process_is_in() -> None:
    parsed = parse_proc_cgroup(HYBRID)
    assert parsed["cpu"] == parsed["cpuacct"] == parsed["memory"] == "/user.slice"
    assert cgroup_of(parsed, 1) == "/user.slice/x.scope"  # name=systemd wins
    assert cgroup_of(parsed, 2) == "/user.slice/x.scope"
    assert cgroup_of(parse_proc_cgroup("4:cpu:/a\n5:memory:/a\n"), 1) == "/a"
    with pytest.raises(CgroupError, match="cpu and memory cgroup hierarchy not unified"):
        cgroup_of(parse_proc_cgroup("4:cpu:/a\n5:memory:/b\n"), 1)


def test_pid_1_and_kernel_threads_stay_in_the_root() -> None:
    assert movable([1, 2, 300, 17], lambda pid: pid == 2) == [17, 300]


def system(tree: Path, proc: Path, version: int = 1, **kw: str) -> SystemCgroups:
    layout = v1_tree(tree) if version == 1 else v2_tree(tree)
    return SystemCgroups(TreeCgroupFs(layout), proc=proc, own_pid=lambda: KUBELET_PID, **kw)


def test_the_kubelet_is_moved_into_kubelet_cgroups_once(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    add_proc(proc, KUBELET_PID, HYBRID)
    moves = system(tmp_path / "cg", proc, kubelet_cgroups="/kubelet.slice")
    assert moves.ensure() == []
    for hierarchy in ("cpu,cpuacct", "memory", "devices", "systemd", "unified"):
        assert procs(tmp_path / "cg", hierarchy, "kubelet.slice") == [KUBELET_PID]
    # Where /proc/self/cgroup says it is there already, nothing is written again.
    (proc / str(KUBELET_PID) / "cgroup").write_text(
        "4:cpu:/kubelet.slice\n5:memory:/kubelet.slice\n"
    )
    (tmp_path / "cg" / "memory" / "kubelet.slice" / "cgroup.procs").write_text("")
    assert moves.ensure() == []
    assert procs(tmp_path / "cg", "memory", "kubelet.slice") == []


def test_a_kubelet_in_a_container_is_not_moved(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    add_proc(proc, KUBELET_PID, HYBRID, namespace="pid:[4026532999]")
    moves = system(tmp_path / "cg", proc, kubelet_cgroups="/kubelet.slice")
    assert moves.ensure() == []
    assert not (tmp_path / "cg" / "memory" / "kubelet.slice").exists()


@pytest.mark.parametrize("version", [1, 2])
def test_system_cgroups_takes_the_roots_user_processes(tmp_path: Path, version: int) -> None:
    tree, proc = tmp_path / "cg", fake_proc(tmp_path / "proc")
    moves = system(tree, proc, version, system_cgroups="/system")
    root = tree / "devices" if version == 1 else tree
    for pid, kernel in ((2, True), (300, False), (301, False)):
        add_proc(proc, pid, "0::/\n", kernel=kernel)
        add_process(root, pid)
    assert moves.ensure() == []
    assert procs(root, "") == [1, 2]
    assert procs(root, "system") == [300, 301]
    if version == 1:
        assert procs(tree, "memory", "system") == [300, 301]


class Refusing(TreeCgroupFs):
    """A tree where one process cannot be moved (the kernel's EPERM, say)."""

    def attach(self, literal: str, pid: int) -> None:
        if pid == 300:
            raise CgroupError("failed to write '300' to cgroup.procs: Operation not permitted")
        super().attach(literal, pid)


def test_a_failed_move_is_reported_and_the_others_still_move(tmp_path: Path) -> None:
    tree, proc = tmp_path / "cg", fake_proc(tmp_path / "proc")
    moves = SystemCgroups(Refusing(v1_tree(tree)), system_cgroups="/system", proc=proc)
    for pid in (300, 301):
        add_proc(proc, pid, "0::/\n")
        add_process(tree / "devices", pid)
    assert moves.ensure() == [
        '/system: failed to move PID 300 into the system container "/system": '
        "failed to write '300' to cgroup.procs: Operation not permitted"
    ]
    assert procs(tree, "devices", "system") == [301]


async def test_the_minute_task_runs_at_once_then_every_minute(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    tree, proc = tmp_path / "cg", fake_proc(tmp_path / "proc")
    moves = system(tree, proc, system_cgroups="/system")

    async def inline(fn: object) -> object:
        assert callable(fn)
        return fn()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(moves.run, inline)
        await trio.sleep(1)
        add_proc(proc, 500, "0::/\n")
        add_process(tree / "devices", 500)
        await trio.sleep(30)
        assert 500 in procs(tree, "devices")
        await trio.sleep(30)
        assert procs(tree, "devices", "system") == [500]
        nursery.cancel_scope.cancel()


def test_the_kubelet_moves_even_when_its_cpu_and_memory_cgroups_differ(tmp_path: Path) -> None:
    """Upstream reports getContainer's error and moves the process all the same."""
    proc = fake_proc(tmp_path / "proc")
    add_proc(proc, KUBELET_PID, "4:memory:/process_api/1\n1:cpu:/\n")
    moves = system(tmp_path / "cg", proc, kubelet_cgroups="/kubelet")
    (failure,) = moves.ensure()
    assert "cpu and memory cgroup hierarchy not unified" in failure
    assert procs(tmp_path / "cg", "memory", "kubelet") == [KUBELET_PID]


def test_an_unreadable_pid_namespace_leaves_the_kubelet_where_it_is(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    add_proc(proc, KUBELET_PID, HYBRID)
    (proc / "1" / "ns" / "pid").unlink()
    moves = system(tmp_path / "cg", proc, kubelet_cgroups="/kubelet")
    (failure,) = moves.ensure()
    assert failure.startswith("/kubelet: failed to find pid namespace of init process: ")
    assert not (tmp_path / "cg" / "memory" / "kubelet").exists()
