"""The systemd cgroup driver end to end: the kubelet, FakeRuntime, a private dbus-daemon
with a fake systemd over a temporary cgroup tree (v1 hybrid, or v2).

The runtime reports the systemd driver through CRI RuntimeConfig (so the configuration's
default ``cgroupfs`` is overridden, as upstream's kubelet does); the kubelet makes
``kubepods.slice`` and the QoS slices at start, a pod's slice (StartTransientUnit with
its properties) before its sandbox, sends the expanded slice path as the sandbox's
cgroup parent, stops the slice after the teardown, and sweeps orphaned slices. systemd
failing or going away gives FailedCreatePodContainer and a retry.

The clock is fake but jumps only after 20 ms without anything to do, so that the
dbus-daemon (another process) answers before time moves on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from kubelet.cgroups import SystemdAccess
from kubelet.cri import api
from kubelet.errors import ConfigError
from kubelet.events.recorder import LOG_LEVEL as EVENT_LOG_LEVEL
from kubelet.testing import FakeRuntime, FakeSystemd, TreeCgroupFs, private_bus, v1_tree
from kubelet.testing.cgroupfs import v2_tree
from kubelet.testing.fakesystemd import FakeUnit

from .kubelet_harness import KUBELET_IMAGES, Harness, running_kubelet
from .test_cgroups import manifest

BURSTABLE = "kubepods-burstable.slice"
QOS_SLICES = ["kubepods-besteffort.slice", BURSTABLE, "kubepods.slice"]


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


@pytest.fixture
def patient_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0.02)


@pytest.fixture
async def bus(short_tmp: Path) -> AsyncIterator[str]:
    async with private_bus(short_tmp / "dbus") as address:
        yield address


def systemd_host(address: str) -> SystemdAccess:
    return SystemdAccess(bus=address, running=lambda: True)


def uid_of(h: Harness, pod: str) -> str:
    (sandbox,) = h.sandboxes(pod)
    uid: str = sandbox.config.metadata.uid
    return uid


def pod_slice(qos: str, uid: str) -> str:
    prefix = "kubepods-" if qos == "guaranteed" else f"kubepods-{qos}-"
    return f"{prefix}pod{uid.replace('-', '_')}.slice"


def slice_path(unit: str) -> str:
    stem, parts, path = unit[: -len(".slice")], [], ""
    for part in stem.split("-"):
        parts.append(part)
        path += "/" + "-".join(parts) + ".slice"
    return path


async def test_slices_before_the_sandbox_and_stopped_after_teardown(
    fake: FakeRuntime, short_tmp: Path, bus: str, patient_clock: trio.abc.Clock
) -> None:
    fake.cgroup_driver = api.SYSTEMD
    fake.faults.fail("RunPodSandbox", message="no sandbox today", times=1)
    tree = short_tmp / "cgroup"
    v1_tree(tree)
    systemd = FakeSystemd(bus, tree)
    async with trio.open_nursery() as nursery:
        await nursery.start(systemd.serve)
        async with running_kubelet(
            fake, short_tmp, "--pod-max-pids=100", systemd=systemd_host(bus)
        ) as h:
            assert systemd.active() == QOS_SLICES
            kubepods = systemd.units["kubepods.slice"].properties
            assert kubepods["Wants"] == ["-.slice"]
            assert kubepods["DefaultDependencies"] is False
            assert kubepods["MemoryAccounting"] is kubepods["TasksAccounting"] is True
            assert systemd.units["kubepods-besteffort.slice"].properties["CPUShares"] == 2

            h.write("web.yaml", manifest("web", "{cpu: 250m, memory: 64Mi}"))
            await h.wait_for(lambda: fake.calls_of("RunPodSandbox"))
            (web,) = h.components.pods.pods() if h.components else []
            unit = pod_slice("burstable", web.uid)
            assert not h.sandboxes("web")
            assert unit in systemd.active()  # made before the (failed) sandbox
            await h.wait_for(lambda: h.sandboxes("web"))
            path = slice_path(unit)
            (sandbox,) = h.sandboxes("web")
            assert sandbox.config.linux.cgroup_parent == path
            props = systemd.units[unit].properties
            assert props["CPUShares"] == 256
            assert props["TasksMax"] == 100
            assert props["Wants"] == [BURSTABLE]
            assert props["Description"] == f"libcontainer container {unit}"
            assert "MemoryLimit" not in props and "CPUQuotaPerSecUSec" not in props
            assert (tree / "cpu,cpuacct" / path.strip("/") / "cpu.shares").read_text() == "256"
            assert (tree / "pids" / path.strip("/") / "pids.max").read_text() == "100"
            # hierarchies systemd does not manage are made through the filesystem
            assert (tree / "hugetlb" / path.strip("/")).is_dir()
            assert (tree / "cpuset" / path.strip("/")).is_dir()
            # the QoS slice follows the Burstable pods' requests
            assert systemd.units[BURSTABLE].properties["CPUShares"] == 256
            assert "SetUnitProperties" in systemd.calls

            (h.manifests / "web.yaml").unlink()
            await h.wait_for(lambda: not h.sandboxes("web"))
            await h.wait_for(lambda: unit not in systemd.active())
            await h.wait_for(lambda: not any(tree.glob(f"*/{path.strip('/')}")))
            assert systemd.units[BURSTABLE].properties["CPUShares"] == 2
        nursery.cancel_scope.cancel()


async def test_guaranteed_and_best_effort_slices(
    fake: FakeRuntime, short_tmp: Path, bus: str, patient_clock: trio.abc.Clock
) -> None:
    fake.cgroup_driver = api.SYSTEMD
    tree = short_tmp / "cgroup"
    v1_tree(tree)
    systemd = FakeSystemd(bus, tree)
    async with trio.open_nursery() as nursery:
        await nursery.start(systemd.serve)
        async with running_kubelet(fake, short_tmp, systemd=systemd_host(bus)) as h:
            both = "{cpu: 500m, memory: 128Mi}"
            h.write("db.yaml", manifest("db", both, both))
            h.write("idle.yaml", manifest("idle"))
            await h.wait_for(lambda: h.sandboxes("db") and h.sandboxes("idle"))
            db = pod_slice("guaranteed", uid_of(h, "db"))
            props = systemd.units[db].properties
            assert props["Wants"] == ["kubepods.slice"]
            assert props["CPUShares"] == 512
            assert props["CPUQuotaPeriodUSec"] == 100_000
            assert props["CPUQuotaPerSecUSec"] == 500_000
            assert props["MemoryLimit"] == 128 * 1024 * 1024
            cpu = tree / "cpu,cpuacct" / slice_path(db).strip("/")
            assert (cpu / "cpu.cfs_quota_us").read_text() == "50000"
            (sandbox,) = h.sandboxes("db")
            assert sandbox.config.linux.cgroup_parent == slice_path(db)
            idle = pod_slice("besteffort", uid_of(h, "idle"))
            assert systemd.units[idle].properties["CPUShares"] == 2
            assert systemd.units[idle].properties["Wants"] == ["kubepods-besteffort.slice"]
        nursery.cancel_scope.cancel()


async def test_cgroup_v2_properties(
    fake: FakeRuntime, short_tmp: Path, bus: str, patient_clock: trio.abc.Clock
) -> None:
    fake.cgroup_driver = api.SYSTEMD
    tree = short_tmp / "cgroup"
    v2_tree(tree)
    systemd = FakeSystemd(bus, tree)
    async with trio.open_nursery() as nursery:
        await nursery.start(systemd.serve)
        async with running_kubelet(fake, short_tmp, systemd=systemd_host(bus)) as h:
            h.write(
                "db.yaml", manifest("db", "{cpu: 250m, memory: 64Mi}", "{cpu: 250m, memory: 64Mi}")
            )
            await h.wait_for(lambda: h.sandboxes("db"))
            db = pod_slice("guaranteed", uid_of(h, "db"))
            props = systemd.units[db].properties
            assert props["CPUWeight"] == 10
            assert "CPUShares" not in props
            assert props["MemoryMax"] == 64 * 1024 * 1024
            assert props["CPUQuotaPerSecUSec"] == 250_000
            assert props["IOAccounting"] is True
            where = tree / slice_path(db).strip("/")
            assert (where / "cpu.weight").read_text() == "10"
            assert (where / "cpu.max").read_text() == "25000 100000"
            assert (where / "memory.max").read_text() == str(64 * 1024 * 1024)
        nursery.cancel_scope.cancel()


async def test_orphaned_slices_are_stopped_and_removed(
    fake: FakeRuntime, short_tmp: Path, bus: str, patient_clock: trio.abc.Clock
) -> None:
    """Left by an earlier kubelet: the slice of a pod nobody knows is stopped and its
    directories go; kubepods and the QoS slices stay."""
    fake.cgroup_driver = api.SYSTEMD
    tree = short_tmp / "cgroup"
    fs = TreeCgroupFs(v1_tree(tree))
    gone = "kubepods-besteffort-podgone_1.slice"
    fs.create(slice_path(gone))
    systemd = FakeSystemd(bus, tree)
    for unit in (*QOS_SLICES, gone):
        systemd.units[unit] = FakeUnit(unit)
    async with trio.open_nursery() as nursery:
        await nursery.start(systemd.serve)
        async with running_kubelet(fake, short_tmp, systemd=systemd_host(bus)) as h:
            h.write("web.yaml", manifest("web", "{cpu: 250m}"))
            await h.wait_for(lambda: h.sandboxes("web"))
            await h.wait_for(lambda: gone not in systemd.active())
            await h.wait_for(lambda: not any(tree.glob(f"*/{slice_path(gone).strip('/')}")))
            assert set(QOS_SLICES) <= set(systemd.active())
            assert pod_slice("burstable", uid_of(h, "web")) in systemd.active()
        nursery.cancel_scope.cancel()


async def test_systemd_errors_and_absence_are_reported_and_retried(
    fake: FakeRuntime,
    short_tmp: Path,
    bus: str,
    patient_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A D-Bus error on StartTransientUnit, then systemd gone from the bus for a while:
    each attempt is a FailedCreatePodContainer; the pod starts once systemd answers."""
    fake.cgroup_driver = api.SYSTEMD
    tree = short_tmp / "cgroup"
    v1_tree(tree)
    systemd = FakeSystemd(bus, tree)
    with caplog.at_level(EVENT_LOG_LEVEL):
        async with trio.open_nursery() as nursery:
            serving = trio.CancelScope()

            async def serve(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                with serving:
                    await systemd.serve(task_status=task_status)

            await nursery.start(serve)
            async with running_kubelet(fake, short_tmp, systemd=systemd_host(bus)) as h:
                systemd.fail("StartTransientUnit", "org.freedesktop.systemd1.JobFailed")
                h.write("web.yaml", manifest("web", "{cpu: 250m}"))
                await h.wait_for(lambda: failures(caplog) >= 1)
                assert "org.freedesktop.systemd1.JobFailed" in failures_text(caplog)
                serving.cancel()  # systemd goes away
                await h.wait_for(lambda: failures(caplog) >= 2, timeout=120)
                assert not h.sandboxes("web")
                serving = trio.CancelScope()
                await nursery.start(serve)
                await h.wait_for(lambda: h.sandboxes("web"), timeout=120)
                unit = pod_slice("burstable", uid_of(h, "web"))
                assert unit in systemd.active()
            nursery.cancel_scope.cancel()


def failures(caplog: pytest.LogCaptureFixture) -> int:
    return failures_text(caplog).count("FailedCreatePodContainer")


def failures_text(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(
        r.getMessage() for r in caplog.records if "FailedCreatePodContainer" in r.getMessage()
    )


async def start_refused(
    fake: FakeRuntime, tmp: Path, systemd: SystemdAccess, *extra: str
) -> ConfigError:
    caught: list[ConfigError] = []
    try:
        async with running_kubelet(fake, tmp, *extra, systemd=systemd):
            raise AssertionError("the kubelet started")
    except* ConfigError as group:
        caught += [e for e in _leaves(group)]
    assert len(caught) == 1
    return caught[0]


def _leaves(group: BaseExceptionGroup[Any]) -> list[Any]:
    out: list[Any] = []
    for exc in group.exceptions:
        out += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return out


async def test_the_systemd_driver_is_refused_where_systemd_does_not_run(
    fake: FakeRuntime, short_tmp: Path, bus: str, patient_clock: trio.abc.Clock
) -> None:
    """The runtime does not say (RuntimeConfig Unimplemented): the configured driver is
    used; without /run/systemd/system start-up stops; with it but no systemd on the bus
    too. Nothing was created."""
    fake.cgroup_driver = None
    absent = SystemdAccess(bus=bus, running=lambda: False)
    error = await start_refused(fake, short_tmp, absent, "--cgroup-driver=systemd")
    (problem,) = error.problems
    assert problem.field == "cgroupDriver"
    assert problem.message == "systemd not running on this host, cannot use systemd cgroups manager"
    error = await start_refused(fake, short_tmp, systemd_host(bus), "--cgroup-driver=systemd")
    (problem,) = error.problems
    assert problem.message == (
        "cannot use the systemd cgroups manager: org.freedesktop.systemd1 is not on the system bus"
    )
    assert not fake.sandboxes


async def test_the_runtime_driver_wins_over_the_configured_one(
    fake: FakeRuntime,
    short_tmp: Path,
    patient_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The runtime says cgroupfs: ``--cgroup-driver=systemd`` is ignored (logged), the
    kubelet runs with cgroupfs paths even where systemd does not run."""
    fake.cgroup_driver = api.CGROUPFS
    absent = SystemdAccess(bus="unix:path=/nonexistent", running=lambda: False)
    with caplog.at_level(logging.INFO):
        async with running_kubelet(fake, short_tmp, "--cgroup-driver=systemd", systemd=absent) as h:
            h.write("web.yaml", manifest("web", "{cpu: 250m}"))
            await h.wait_for(lambda: h.sandboxes("web"))
            (sandbox,) = h.sandboxes("web")
            uid = sandbox.config.metadata.uid
            assert sandbox.config.linux.cgroup_parent == f"/kubepods/burstable/pod{uid}"
    assert (
        "Using cgroup driver setting received from the CRI runtime cgroupDriver=cgroupfs "
        "(cgroupDriver: systemd in the configuration is ignored)"
    ) in caplog.text
