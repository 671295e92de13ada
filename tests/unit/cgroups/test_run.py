"""The cgroup component: start-up refusals, the pod handle (parent, ensure, remove by UID),
the orphan sweep -- on temporary v1 and v2 trees, fake time."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import attrs
import pytest
import trio

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, Quantity, ResourceRequirements
from kubelet.cgroups import (
    CgroupFs,
    CgroupHost,
    CgroupParts,
    CgroupSettings,
    Event,
    PodCgroups,
    capacity_of,
    run_cgroups,
)
from kubelet.cgroups.fs import UNIFIED
from kubelet.errors import ConfigError
from kubelet.testing import TreeCgroupFs, v1_tree
from kubelet.testing.cgroupfs import v2_tree
from kubelet.testing.fakeproc import fake_proc

T = TypeVar("T")
CAPACITY = capacity_of(2, 4 * 1024**3, {"2Mi": 0})


async def inline(fn: Callable[[], T]) -> T:
    return fn()


def pod(uid: str, cpu: str = "", limit: str = "") -> Pod:
    requests = {"cpu": Quantity(cpu)} if cpu else {}
    limits = {"cpu": Quantity(limit), "memory": Quantity("64Mi")} if limit else {}
    if limit:
        requests = {"cpu": Quantity(limit), "memory": Quantity("64Mi")}
    container = Container(
        name="c", resources=ResourceRequirements(requests=requests, limits=limits)
    )
    return Pod(
        metadata=ObjectMeta(name=uid, namespace="ns", uid=uid),
        spec=PodSpec(containers=(container,)),
    )


def qos_of(p: Pod) -> str:
    resources = p.spec.containers[0].resources
    if resources is None or not resources.requests:
        return "BestEffort"
    return "Guaranteed" if resources.limits else "Burstable"


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> TreeCgroupFs:
    root = tmp_path / "cgroup"
    return TreeCgroupFs(v1_tree(root) if request.param == 1 else v2_tree(root))


async def start(
    nursery: trio.Nursery,
    fs: CgroupFs,
    settings: CgroupSettings | None = None,
    active: list[Pod] | None = None,
    events: list[Event] | None = None,
    *,
    allow_v1: bool = True,
) -> PodCgroups:
    pods = active if active is not None else []
    record = (events if events is not None else []).append
    handle: PodCgroups = await nursery.start(
        run_cgroups,
        parts(settings or CgroupSettings(), lambda: fs, lambda: pods, record, allow_v1=allow_v1),
    )
    return handle


def parts(
    settings: CgroupSettings,
    fs: Callable[[], CgroupFs],
    active: Callable[[], list[Pod]],
    record: Callable[[Event], None] = print,
    *,
    allow_v1: bool = True,
) -> CgroupParts:
    """The component's parts over a test tree: no swap, writes inline; a v1 tree is
    allowed (``failCgroupV1: false``) unless ``allow_v1`` is False."""
    return CgroupParts(
        settings=attrs.evolve(settings, fail_cgroup_v1=False) if allow_v1 else settings,
        host=CgroupHost(fs=fs, io=inline, proc=no_swap()),
        capacity=CAPACITY,
        active=active,
        qos_of=qos_of,
        record=record,
    )


def no_swap() -> Path:
    """A /proc whose swaps lists no device, whatever this machine has."""
    return fake_proc(Path(tempfile.mkdtemp(prefix="proc-")))


async def refused(
    fs: CgroupFs,
    settings: CgroupSettings,
    events: list[Event] | None = None,
    *,
    allow_v1: bool = True,
) -> ConfigError:
    """The ConfigError that stops start-up (raised out of the nursery)."""
    caught: list[ConfigError] = []
    try:
        async with trio.open_nursery() as nursery:
            await start(nursery, fs, settings, events=events, allow_v1=allow_v1)
    except* ConfigError as group:
        caught += [e for e in group.exceptions if isinstance(e, ConfigError)]
    assert len(caught) == 1
    return caught[0]


def shares_file(fs: CgroupFs, literal: str) -> Path:
    paths = fs.paths(literal)
    if fs.layout.version == 1:
        return Path(paths["cpu"]) / "cpu.shares"
    return Path(paths[UNIFIED]) / "cpu.weight"


async def test_pod_cgroup_parent_ensure_and_remove_by_uid(
    tree: TreeCgroupFs, autojump_clock: trio.abc.Clock
) -> None:
    web, db = pod("web", cpu="250m"), pod("db", limit="500m")
    active = [web, db]
    async with trio.open_nursery() as nursery:
        cgroups = await start(nursery, tree, active=active)
        assert cgroups.parent(web) == "/kubepods/burstable/podweb"
        assert cgroups.parent(db) == "/kubepods/poddb"
        assert await cgroups.ensure(web) is True
        assert await cgroups.ensure(web) is False  # there already: left as it is
        assert await cgroups.ensure(db) is True
        assert all(Path(d).is_dir() for d in tree.dirs("/kubepods/burstable/podweb"))
        if tree.layout.version == 1:
            assert shares_file(tree, "/kubepods/burstable").read_text() == "256"
        # removal needs only the UID (a pod known from the runtime has no spec), and the
        # QoS shares follow the pods left
        active.remove(web)
        assert await cgroups.remove("web") is True
        if tree.layout.version == 1:
            assert shares_file(tree, "/kubepods/burstable").read_text() == "2"
        assert not any(Path(d).exists() for d in tree.dirs("/kubepods/burstable/podweb"))
        assert await cgroups.remove("web") is False
        assert await cgroups.remove("db") is True
        nursery.cancel_scope.cancel()


async def test_sweep_removes_unknown_pods_and_reduces_those_with_volumes(
    tree: TreeCgroupFs, autojump_clock: trio.abc.Clock
) -> None:
    for literal in ("/kubepods/besteffort/podgone", "/kubepods/burstable/podmounted"):
        tree.create(literal)
    async with trio.open_nursery() as nursery:
        cgroups = await start(nursery, tree)
        await cgroups.ensure(pod("kept", cpu="100m"))
        removed = await cgroups.sweep(lambda uid: uid == "kept", lambda uid: uid == "mounted")
        assert removed == ["gone"]
        assert not any(Path(d).exists() for d in tree.dirs("/kubepods/besteffort/podgone"))
        assert shares_file(tree, "/kubepods/burstable/podmounted").read_text() in ("2", "1")
        assert all(Path(d).is_dir() for d in tree.dirs("/kubepods/burstable/podkept"))
        nursery.cancel_scope.cancel()


async def test_a_missing_cgroup_root_stops_start_up(
    tree: TreeCgroupFs, autojump_clock: trio.abc.Clock
) -> None:
    error = await refused(tree, CgroupSettings(cgroup_root="/nowhere"))
    (problem,) = error.problems
    assert problem.field == "cgroupRoot"
    assert 'cgroup-root ["nowhere"] doesn\'t exist' in problem.message


async def test_the_systemd_driver_is_refused_where_systemd_does_not_run(
    tree: TreeCgroupFs, autojump_clock: trio.abc.Clock
) -> None:
    """This host (a container without systemd as PID 1) has no /run/systemd/system."""
    assert not Path("/run/systemd/system").exists()
    error = await refused(tree, CgroupSettings(driver="systemd"))
    (problem,) = error.problems
    assert problem.field == "cgroupDriver"
    assert problem.message == "systemd not running on this host, cannot use systemd cgroups manager"


async def test_a_reserved_cgroup_that_cannot_be_limited_stops_start_up(
    tree: TreeCgroupFs, autojump_clock: trio.abc.Clock
) -> None:
    settings = CgroupSettings(
        enforce=frozenset({"pods", "system-reserved"}), system_reserved_cgroup="/system.slice"
    )
    events: list[Event] = []
    error = await refused(tree, settings, events)
    (problem,) = error.problems
    assert problem.message.startswith(
        'Failed to enforce System Reserved Cgroup Limits on "/system.slice": '
    )
    assert [e[1] for e in events] == ["FailedNodeAllocatableEnforcement"]


async def test_without_cgroups_per_qos_nothing_is_touched(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """The hierarchies are read (the containers' swap settings need them), nothing is
    made in them; and when they cannot be read, start-up goes on all the same."""
    layout = v1_tree(tmp_path / "cg")
    before = sorted(p.name for p in (tmp_path / "cg" / "memory").iterdir())

    def unreadable() -> CgroupFs:
        raise ConfigError.single("", "cgroupsPerQOS", "cannot read the cgroup mounts: gone")

    settings = CgroupSettings(cgroups_per_qos=False, enforce=frozenset())
    for fs in (lambda: TreeCgroupFs(layout), unreadable):
        async with trio.open_nursery() as nursery:
            cgroups: PodCgroups = await nursery.start(run_cgroups, parts(settings, fs, list))
            assert cgroups.parent(pod("web")) == ""
            assert await cgroups.ensure(pod("web")) is False
            assert await cgroups.sweep(lambda uid: False, lambda uid: False) == []
            nursery.cancel_scope.cancel()
    assert sorted(p.name for p in (tmp_path / "cg" / "memory").iterdir()) == before


async def test_without_pod_cgroups_ensure_does_not_list_the_active_pods(
    tree: TreeCgroupFs,
) -> None:
    """Each pod start asks for its cgroup: without cgroupsPerQOS there is none, and the
    active pods' classes (what the QoS cgroups are sized from) are not gathered."""

    def active() -> list[Pod]:
        raise AssertionError("the active pods were listed")

    settings = CgroupSettings(cgroups_per_qos=False, enforce=frozenset())
    async with trio.open_nursery() as nursery:
        cgroups: PodCgroups = await nursery.start(
            run_cgroups, parts(settings, lambda: tree, active)
        )
        assert await cgroups.ensure(pod("web")) is False
        nursery.cancel_scope.cancel()


async def test_a_cgroup_v1_host_is_refused_unless_fail_cgroup_v1_is_false(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream's default (failCgroupV1: true) and message; nothing is made in the tree."""
    tree = TreeCgroupFs(v1_tree(tmp_path / "cgroup"))
    events: list[Event] = []
    error = await refused(tree, CgroupSettings(), events, allow_v1=False)
    (problem,) = error.problems
    assert problem.field == "failCgroupV1"
    assert problem.message == (
        "kubelet is configured to not run on a host using cgroup v1. "
        "cgroup v1 support is in maintenance mode"
    )
    assert not any(Path(d).exists() for d in tree.dirs("/kubepods"))
    assert events == []


async def test_hierarchies_that_cannot_be_read_count_as_cgroup_v1(
    autojump_clock: trio.abc.Clock,
) -> None:
    """As upstream's check, which takes a failed statfs of /sys/fs/cgroup for v1."""

    def unreadable() -> CgroupFs:
        raise ConfigError.single("", "cgroupsPerQOS", "cannot read the cgroup mounts: gone")

    settings = CgroupSettings(cgroups_per_qos=False, enforce=frozenset())
    caught: list[ConfigError] = []
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(run_cgroups, parts(settings, unreadable, list, allow_v1=False))
    except* ConfigError as group:
        caught += [e for e in group.exceptions if isinstance(e, ConfigError)]
    assert [p.field for e in caught for p in e.problems] == ["failCgroupV1"]


async def test_single_process_oom_kill_false_is_refused_on_cgroup_v1(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    tree = TreeCgroupFs(v1_tree(tmp_path / "cgroup"))
    error = await refused(tree, CgroupSettings(single_process_oom_kill=False))
    (problem,) = error.problems
    assert problem.field == "singleProcessOOMKill"
    assert problem.message == (
        "invalid configuration: singleProcessOOMKill must not be explicitly set to false "
        "when using cgroup v1"
    )


async def test_a_cgroup_v1_host_allowed_gets_the_maintenance_warning(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """failCgroupV1: false starts, with upstream's Warning on the Node; no group OOM kill
    (and singleProcessOOMKill: true is accepted there)."""
    tree = TreeCgroupFs(v1_tree(tmp_path / "cgroup"))
    for oom in (None, True):
        events: list[Event] = []
        async with trio.open_nursery() as nursery:
            settings = CgroupSettings(single_process_oom_kill=oom)
            cgroups = await start(nursery, tree, settings, events=events)
            assert cgroups.version.version == 1
            assert cgroups.version.group_oom_kill is False
            nursery.cancel_scope.cancel()
        assert (
            "Warning",
            "CgroupV1",
            "cgroup v1 support is in maintenance mode, please migrate to cgroup v2",
        ) in events


@pytest.mark.parametrize(("oom", "group"), [(None, True), (False, True), (True, False)])
async def test_cgroup_v2_kills_the_group_unless_single_process_oom_kill(
    tmp_path: Path, autojump_clock: trio.abc.Clock, oom: bool | None, group: bool
) -> None:
    """v2 starts whatever failCgroupV1 says; containers are OOM-killed as a group unless
    singleProcessOOMKill is true; no CgroupV1 warning."""
    tree = TreeCgroupFs(v2_tree(tmp_path / "cgroup"))
    events: list[Event] = []
    settings = CgroupSettings(single_process_oom_kill=oom)
    async with trio.open_nursery() as nursery:
        cgroups = await start(nursery, tree, settings, events=events, allow_v1=False)
        assert cgroups.version.version == 2
        assert cgroups.version.group_oom_kill is group
        nursery.cancel_scope.cancel()
    assert not [e for e in events if e[1] == "CgroupV1"]
