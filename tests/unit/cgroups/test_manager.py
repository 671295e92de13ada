"""The cgroup manager against a temporary tree laid out as cgroup v1 (hybrid) and as v2."""

from __future__ import annotations

import signal
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, Quantity, ResourceRequirements
from kubelet.cgroups import CgroupError, CgroupManager, CgroupSettings, Event
from kubelet.cgroups.fs import UNIFIED
from kubelet.cgroups.manager import (
    FAILED_NODE_ALLOCATABLE,
    FULL_SCAN_EVERY,
    NODE_ALLOCATABLE_ENFORCED,
    ReservedCgroupError,
    internal_capacity,
    read_pid_max,
)
from kubelet.testing import TreeCgroupFs, v1_tree
from kubelet.testing.cgroupfs import FakeProcesses, add_process, v2_tree

MI = 1024 * 1024
CAPACITY = {
    "cpu": Fraction(2),
    "memory": Fraction(4096 * MI),
    "pid": Fraction(4194304),
    "hugepages-2Mi": Fraction(0),
}


def pod(
    uid: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> Pod:
    resources = ResourceRequirements(
        requests={k: Quantity(v) for k, v in (requests or {}).items()},
        limits={k: Quantity(v) for k, v in (limits or {}).items()},
    )
    return Pod(
        metadata=ObjectMeta(name=uid, namespace="ns", uid=uid),
        spec=PodSpec(containers=(Container(name="c", resources=resources),)),
    )


GUARANTEED = pod("g1", {"cpu": "500m", "memory": "128Mi"}, {"cpu": "500m", "memory": "128Mi"})
BURSTABLE = pod("b1", {"cpu": "250m", "memory": "64Mi"})
BESTEFFORT = pod("e1")
ACTIVE = [(GUARANTEED, "Guaranteed"), (BURSTABLE, "Burstable"), (BESTEFFORT, "BestEffort")]


async def inline(fn: Callable[..., Any], *args: Any) -> Any:
    """Run the blocking part in the test's thread: the autojump clock cannot run ahead."""
    return fn(*args)


class Tree:
    """A manager over a tree, and readers of what it wrote."""

    def __init__(
        self, root: Path, version: int, settings: CgroupSettings | None = None, *, dies: bool = True
    ) -> None:
        self.root = root
        layout = v1_tree(root) if version == 1 else v2_tree(root)
        self.fs = TreeCgroupFs(layout)
        self.processes = FakeProcesses(root, dies=dies)
        self.manager = CgroupManager(
            self.fs,
            settings or CgroupSettings(),
            hugepage_sizes=(2 * MI,),
            kill=self.processes,
            offload=inline,
        )
        self.version = version

    def dir(self, literal: str, controller: str) -> Path:
        return Path(self.fs.paths(literal)[controller if self.version == 1 else UNIFIED])

    def value(self, literal: str, controller: str, v1: str, v2: str) -> str:
        return (self.dir(literal, controller) / (v1 if self.version == 1 else v2)).read_text()


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def version(request: pytest.FixtureRequest) -> int:
    return int(request.param)


async def test_start_creates_kubepods_and_the_qos_cgroups(tmp_path: Path, version: int) -> None:
    settings = CgroupSettings(
        system_reserved={"cpu": Fraction(1, 2), "memory": Fraction(1024 * MI)}
    )
    tree = Tree(tmp_path, version, settings)
    events = await tree.manager.start(CAPACITY)
    assert events == [
        ("Normal", NODE_ALLOCATABLE_ENFORCED, "Updated Node Allocatable limit across pods")
    ]
    # kubepods: allocatable (capacity minus systemReserved, eviction not subtracted).
    assert tree.value("/kubepods", "cpu", "cpu.shares", "cpu.weight") == (
        "1536" if version == 1 else "59"
    )
    assert tree.value("/kubepods", "memory", "memory.limit_in_bytes", "memory.max") == str(
        3072 * MI
    )
    assert tree.value("/kubepods", "pids", "pids.max", "pids.max") == "4194304"
    assert tree.value("/kubepods/besteffort", "cpu", "cpu.shares", "cpu.weight") == (
        "2" if version == 1 else "1"
    )
    assert tree.dir("/kubepods/burstable", "memory").is_dir()
    unbounded = str(1 << 62)
    assert (
        tree.value(
            "/kubepods/burstable", "hugetlb", "hugetlb.2MB.limit_in_bytes", "hugetlb.2MB.max"
        )
        == unbounded
    )


async def test_start_without_enforcement_limits_kubepods_to_capacity(
    tmp_path: Path, version: int
) -> None:
    settings = CgroupSettings(enforce=frozenset(), system_reserved={"memory": Fraction(1024 * MI)})
    tree = Tree(tmp_path, version, settings)
    await tree.manager.start(CAPACITY)
    assert tree.value("/kubepods", "memory", "memory.limit_in_bytes", "memory.max") == str(
        4096 * MI
    )


async def test_pod_cgroups_by_qos_class(tmp_path: Path, version: int) -> None:
    tree = Tree(tmp_path, version, CgroupSettings(pod_pids_limit=100))
    await tree.manager.start(CAPACITY)
    for p, qos in ACTIVE:
        assert await tree.manager.ensure_pod(p, qos, ACTIVE)
    parents = [tree.manager.pod_cgroup_parent(p, qos) for p, qos in ACTIVE]
    assert parents == ["/kubepods/podg1", "/kubepods/burstable/podb1", "/kubepods/besteffort/pode1"]
    g, b, e = parents
    if version == 1:
        assert tree.value(g, "cpu", "cpu.shares", "") == "512"
        assert tree.value(g, "cpu", "cpu.cfs_quota_us", "") == "50000"
        assert tree.value(g, "cpu", "cpu.cfs_period_us", "") == "100000"
        assert tree.value(b, "cpu", "cpu.shares", "") == "256"
        assert not (tree.dir(b, "cpu") / "cpu.cfs_quota_us").exists()  # no cpu limit: no quota
        assert tree.value(e, "cpu", "cpu.shares", "") == "2"
        # cpuset: a new cgroup gets its parent's cpus and mems (or runc could not join it).
        assert tree.value(g, "cpuset", "cpuset.cpus", "") == "0-1"
        assert tree.dir(g, UNIFIED).is_dir()  # hybrid: the v2 tree gets the directory too
    else:
        assert tree.value(g, "cpu", "", "cpu.weight") == "20"
        assert tree.value(g, "cpu", "", "cpu.max") == "50000 100000"
        assert not (tree.dir(b, "cpu") / "cpu.max").exists()
        for level in ("", "kubepods", "kubepods/burstable"):
            enabled = (tmp_path / level / "cgroup.subtree_control").read_text().split()
            assert {"cpu", "memory", "pids", "hugetlb"} <= set(enabled), level
    assert tree.value(g, "memory", "memory.limit_in_bytes", "memory.max") == str(128 * MI)
    assert not (
        tree.dir(b, "memory") / ("memory.limit_in_bytes" if version == 1 else "memory.max")
    ).exists()
    assert tree.value(e, "pids", "pids.max", "pids.max") == "100"
    assert tree.value(g, "hugetlb", "hugetlb.2MB.limit_in_bytes", "hugetlb.2MB.max") == "0"
    # The QoS cgroups were updated before the pod cgroups: burstable counts b1's request.
    assert tree.value("/kubepods/burstable", "cpu", "cpu.shares", "cpu.weight") == (
        "256" if version == 1 else "10"
    )
    assert await tree.manager.pod_cgroups() == {
        "g1": ("kubepods", "podg1"),
        "b1": ("kubepods", "burstable", "podb1"),
        "e1": ("kubepods", "besteffort", "pode1"),
    }


async def test_a_pod_cgroup_left_in_one_hierarchy_is_found_between_full_scans(
    tmp_path: Path,
) -> None:
    tree = Tree(tmp_path, 1)
    await tree.manager.start(CAPACITY)
    assert await tree.manager.pod_cgroups() == {}  # the first scan lists every hierarchy
    tree.fs._mkdir(str(tree.dir("/kubepods/besteffort/podleft", "pids")))  # not the first one
    assert await tree.manager.pod_cgroups() == {"left": ("kubepods", "besteffort", "podleft")}


async def test_every_hierarchy_is_listed_on_the_first_scan_and_every_thirtieth(
    tmp_path: Path,
) -> None:
    """Two leftovers in different hierarchies leave every count equal: only a scan of every
    hierarchy sees the one outside the hierarchy a lean scan lists."""
    tree = Tree(tmp_path, 1)
    await tree.manager.start(CAPACITY)
    first, *others = tree.fs.dirs("/kubepods/besteffort")
    tree.fs._mkdir(first + "/poda")
    for directory in others:
        tree.fs._mkdir(directory + "/podb")
    both = {
        "a": ("kubepods", "besteffort", "poda"),
        "b": ("kubepods", "besteffort", "podb"),
    }
    seen = [await tree.manager.pod_cgroups() for _ in range(FULL_SCAN_EVERY + 1)]
    assert seen[0] == seen[FULL_SCAN_EVERY] == both
    assert all(found == {"a": both["a"]} for found in seen[1:FULL_SCAN_EVERY])


async def test_each_create_update_and_destroy_is_timed(tmp_path: Path) -> None:
    """``kubelet_cgroup_manager_duration_seconds``: a pod's cgroup is one "create" (the
    QoS cgroups' "update"s before it), its removal one "destroy"; the kill before the
    removal is not part of it, as upstream."""
    seen: list[str] = []
    tree = Tree(tmp_path, 1)
    tree.manager.observe = lambda operation, seconds: seen.append(operation)
    await tree.manager.start(CAPACITY)
    assert seen == ["create", "create", "create", "update"]  # kubepods, the QoS two, allocatable
    seen.clear()
    await tree.manager.ensure_pod(BURSTABLE, "Burstable", ACTIVE)
    assert seen == ["update", "update", "update", "create"]
    seen.clear()
    await tree.manager.ensure_pod(BURSTABLE, "Burstable", ACTIVE)  # exists: nothing done
    assert seen == []
    await tree.manager.remove_pod(("kubepods", "burstable", "podb1"))
    assert seen == ["destroy"]


async def test_existing_pod_cgroup_is_left_alone(tmp_path: Path, version: int) -> None:
    tree = Tree(tmp_path, version)
    await tree.manager.start(CAPACITY)
    assert await tree.manager.ensure_pod(GUARANTEED, "Guaranteed", ACTIVE)
    memory = tree.dir("/kubepods/podg1", "memory") / (
        "memory.limit_in_bytes" if version == 1 else "memory.max"
    )
    memory.write_text("1")
    assert not await tree.manager.ensure_pod(GUARANTEED, "Guaranteed", ACTIVE)
    assert memory.read_text() == "1"


async def test_remove_kills_what_is_left_then_removes_bottom_up(
    tmp_path: Path, version: int
) -> None:
    tree = Tree(tmp_path, version)
    await tree.manager.start(CAPACITY)
    await tree.manager.ensure_pod(BURSTABLE, "Burstable", ACTIVE)
    literal = "/kubepods/burstable/podb1"
    leftover = tree.dir(literal, "memory") / "ctr1"  # a container cgroup the runtime left
    tree.fs._mkdir(str(leftover))
    add_process(leftover, 4242)
    add_process(tree.dir(literal, "pids"), 4243)
    await tree.manager.remove_pod(("kubepods", "burstable", "podb1"))
    assert sorted(tree.processes.signals) == [(4242, signal.SIGKILL), (4243, signal.SIGKILL)]
    assert all(not Path(path).exists() for path in tree.fs.dirs(literal))
    assert await tree.manager.pod_cgroups() == {}
    await tree.manager.remove_pod(("kubepods", "burstable", "podb1"))  # idempotent


async def test_remove_gives_up_on_a_cgroup_that_stays_busy(
    tmp_path: Path, version: int, autojump_clock: trio.abc.Clock
) -> None:
    tree = Tree(tmp_path, version, dies=False)
    await tree.manager.start(CAPACITY)
    await tree.manager.ensure_pod(BESTEFFORT, "BestEffort", ACTIVE)
    add_process(tree.dir("/kubepods/besteffort/pode1", "memory"), 77)
    start = trio.current_time()
    with pytest.raises(
        CgroupError, match="failed to delete cgroup paths for /kubepods/besteffort/pode1"
    ):
        await tree.manager.remove_pod(("kubepods", "besteffort", "pode1"))
    assert trio.current_time() - start == pytest.approx(0.010 + 0.020 + 0.040 + 0.080)
    assert tree.processes.signals == [(77, signal.SIGKILL)]


async def test_remove_reports_processes_it_may_not_kill(tmp_path: Path) -> None:
    tree = Tree(tmp_path, 1)
    tree.processes.refuse.add(99)
    await tree.manager.start(CAPACITY)
    await tree.manager.ensure_pod(BESTEFFORT, "BestEffort", ACTIVE)
    add_process(tree.dir("/kubepods/besteffort/pode1", "cpu"), 99)
    with pytest.raises(
        CgroupError,
        match="failed to kill all the processes attached to the "
        "/kubepods/besteffort/pode1 cgroups : pid 99",
    ):
        await tree.manager.remove_pod(("kubepods", "besteffort", "pode1"))
    assert tree.processes.signals == [(99, signal.SIGKILL)] * 5


async def test_cgroup_root_must_exist(tmp_path: Path, version: int) -> None:
    tree = Tree(tmp_path, version, CgroupSettings(cgroup_root="/nowhere"))
    with pytest.raises(
        CgroupError, match=r'invalid configuration: cgroup-root \["nowhere"\] doesn\'t exist'
    ):
        await tree.manager.start(CAPACITY)


async def test_custom_cgroup_root(tmp_path: Path) -> None:
    tree = Tree(tmp_path, 1, CgroupSettings(cgroup_root="/custom"))
    tree.fs.create("/custom")
    await tree.manager.start(CAPACITY)
    assert (
        tree.manager.pod_cgroup_parent(BURSTABLE, "Burstable") == "/custom/kubepods/burstable/podb1"
    )
    assert tree.dir("/custom/kubepods/besteffort", "cpu").is_dir()


async def test_without_cgroups_per_qos_nothing_is_made(tmp_path: Path, version: int) -> None:
    tree = Tree(tmp_path, version, CgroupSettings(cgroups_per_qos=False, enforce=frozenset()))
    assert await tree.manager.start(CAPACITY) == []
    assert not await tree.manager.ensure_pod(BURSTABLE, "Burstable", ACTIVE)
    assert tree.manager.pod_cgroup_parent(BURSTABLE, "Burstable") == ""
    assert not any(tmp_path.rglob("kubepods"))
    assert await tree.manager.pod_cgroups() == {}


def test_systemd_driver_is_refused_without_systemd(tmp_path: Path) -> None:
    """The systemd driver needs systemd's manager (``slices``); run_cgroups passes none
    where systemd is not running."""
    fs = TreeCgroupFs(v1_tree(tmp_path))
    settings = CgroupSettings(driver="systemd")
    with pytest.raises(
        CgroupError, match=r"^systemd not running on this host, cannot use systemd cgroups manager$"
    ):
        CgroupManager(fs, settings)


async def test_reserved_cgroups_are_limited_when_enforced(tmp_path: Path, version: int) -> None:
    settings = CgroupSettings(
        enforce=frozenset({"pods", "system-reserved", "kube-reserved-compressible"}),
        system_reserved={
            "cpu": Fraction(1, 2),
            "memory": Fraction(512 * MI),
            "pid": Fraction(1000),
        },
        kube_reserved={"cpu": Fraction(1, 4), "memory": Fraction(256 * MI)},
        system_reserved_cgroup="/system.slice",
        kube_reserved_cgroup="/kube.slice",
    )
    tree = Tree(tmp_path, version, settings)
    tree.fs.create("/system.slice")
    tree.fs.create("/kube.slice")
    events = await tree.manager.start(CAPACITY)
    assert [e[1:] for e in events] == [
        (NODE_ALLOCATABLE_ENFORCED, "Updated Node Allocatable limit across pods"),
        (NODE_ALLOCATABLE_ENFORCED, "Updated limits on system reserved cgroup /system.slice"),
        (NODE_ALLOCATABLE_ENFORCED, "Updated limits on kube reserved cgroup /kube.slice"),
    ]
    assert tree.value("/system.slice", "memory", "memory.limit_in_bytes", "memory.max") == str(
        512 * MI
    )
    assert tree.value("/system.slice", "pids", "pids.max", "pids.max") == "1000"
    assert tree.value("/kube.slice", "cpu", "cpu.shares", "cpu.weight") == (
        "256" if version == 1 else "10"
    )
    assert not (
        tree.dir("/kube.slice", "memory")
        / ("memory.limit_in_bytes" if version == 1 else "memory.max")
    ).exists()
    # kubepods: capacity minus both reservations.
    assert tree.value("/kubepods", "memory", "memory.limit_in_bytes", "memory.max") == str(
        3328 * MI
    )


async def test_missing_reserved_cgroup_stops_start(tmp_path: Path) -> None:
    settings = CgroupSettings(
        enforce=frozenset({"pods", "kube-reserved"}),
        kube_reserved={"memory": Fraction(256 * MI)},
        kube_reserved_cgroup="/kube.slice",
    )
    tree = Tree(tmp_path, 1, settings)
    with pytest.raises(
        ReservedCgroupError,
        match=r'Failed to enforce Kube Reserved Cgroup Limits on "/kube\.slice": '
        r'cgroup \["kube\.slice"\] has some missing paths',
    ) as caught:
        await tree.manager.start(CAPACITY)
    assert caught.value.events[-1][:2] == ("Warning", FAILED_NODE_ALLOCATABLE)


async def test_run_updates_qos_every_minute_and_retries_kubepods(
    tmp_path: Path, version: int, autojump_clock: trio.abc.Clock
) -> None:
    tree = Tree(tmp_path, version)
    tree.fs.create("/kubepods")
    blocker = tree.dir("/kubepods", "memory") / (
        "memory.limit_in_bytes" if version == 1 else "memory.max"
    )
    blocker.mkdir()  # the write fails, as a limit below current usage would (EBUSY)
    active: list[tuple[Pod, str]] = []
    events: list[Event] = []
    events += await tree.manager.start(CAPACITY)  # start-up, then the minute loop
    async with trio.open_nursery() as nursery:
        await nursery.start(tree.manager.run, CAPACITY, lambda: active, events.append)
        assert events[0][:2] == ("Warning", FAILED_NODE_ALLOCATABLE)
        assert events[0][2].startswith(
            'Failed to update Node Allocatable Limits ["kubepods"]: failed to write'
        )
        active.append((BURSTABLE, "Burstable"))
        blocker.rmdir()
        await trio.sleep(59)
        assert len(events) == 1
        await trio.sleep(2)
        assert events[-1] == (
            "Normal",
            NODE_ALLOCATABLE_ENFORCED,
            "Updated Node Allocatable limit across pods",
        ), events
        assert tree.value("/kubepods/burstable", "cpu", "cpu.shares", "cpu.weight") == (
            "256" if version == 1 else "10"
        )
        await trio.sleep(120)
        assert len(events) == 2  # enforced once: no more events
        nursery.cancel_scope.cancel()


async def test_reserved_hugetlb_limits_follow(tmp_path: Path) -> None:
    tree = Tree(tmp_path, 1)
    await tree.manager.start(CAPACITY)
    tree.fs.create("/kubepods/podh1")
    rsvd = tree.dir("/kubepods/podh1", "hugetlb") / "hugetlb.2MB.rsvd.limit_in_bytes"
    rsvd.write_text("")
    huge = pod(
        "h1",
        {"hugepages-2Mi": "4Mi", "cpu": "1", "memory": "1Gi"},
        {"hugepages-2Mi": "4Mi", "cpu": "1", "memory": "1Gi"},
    )
    tree.manager._set(
        ("kubepods", "podh1"), tree.manager.kubepods_config({"hugepages-2Mi": Fraction(4 * MI)})
    )
    assert rsvd.read_text() == str(4 * MI)
    assert huge.metadata.uid == "h1"


def test_internal_capacity_and_pid_max(tmp_path: Path) -> None:
    assert internal_capacity({"cpu": "2", "memory": "4Gi", "pods": "110"}, 32768) == {
        "cpu": Fraction(2),
        "memory": Fraction(4096 * MI),
        "pid": Fraction(32768),
    }
    (tmp_path / "pid_max").write_text("4194304\n")
    (tmp_path / "threads-max").write_text("63510\n")
    assert read_pid_max(tmp_path) == 63510
    (tmp_path / "threads-max").unlink()
    assert read_pid_max(tmp_path) == 4194304
    assert read_pid_max(tmp_path / "missing") is None


async def test_worker_thread_offload(tmp_path: Path) -> None:
    # The default: each operation in one trio worker thread (real clock, no autojump).
    fs = TreeCgroupFs(v2_tree(tmp_path))
    manager = CgroupManager(fs, CgroupSettings(), kill=FakeProcesses(tmp_path))
    await manager.start(CAPACITY)
    assert await manager.ensure_pod(BURSTABLE, "Burstable", ACTIVE)
    await manager.remove_pod(("kubepods", "burstable", "podb1"))
    assert await manager.pod_cgroups() == {}


def test_the_host_layer_never_creates_files(tmp_path: Path) -> None:
    # On a real cgroupfs a value for a file the kernel does not offer is an error, not a
    # stray file: the production layer opens without O_CREAT.
    from kubelet.cgroups import CgroupFs

    fs = CgroupFs(v1_tree(tmp_path))
    fs.create("/kubepods")
    with pytest.raises(CgroupError, match=r"failed to write '2' to .*/kubepods/cpu\.shares: "):
        fs.write(fs.paths("/kubepods")["cpu"], "cpu.shares", "2")
    assert not (tmp_path / "cpu,cpuacct" / "kubepods" / "cpu.shares").exists()
