"""``SystemdBus`` against a fake systemd on a private dbus-daemon: jobs, errors,
timeouts and a bus daemon restart.

The clock is fake but jumps only after 20 ms without anything to do, so that the
dbus-daemon (another process) answers before time moves on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet.cgroups import SystemdAccess, SystemdBus
from kubelet.cgroups.slices import start_properties
from kubelet.cgroups.systemd import SystemdError, SystemdUnavailable
from kubelet.testing import FakeSystemd, private_bus, v1_tree

UNIT = "kubepods.slice"


@pytest.fixture
def patient_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0.02)


@pytest.fixture
async def bus(short_tmp: Path) -> AsyncIterator[str]:
    async with private_bus(short_tmp / "dbus") as address:
        yield address


async def tick(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """A deadline always near: the autojump clock then moves 0.1 s at a time while the
    dbus-daemon is slow to answer, never straight to a call's 30 s timeout."""
    task_status.started()
    while True:
        await trio.sleep(0.1)


def fake_systemd(bus: str, tmp: Path) -> FakeSystemd:
    v1_tree(tmp / "cgroup")
    return FakeSystemd(bus, tmp / "cgroup")


async def test_start_set_stop(short_tmp: Path, bus: str, patient_clock: trio.abc.Clock) -> None:
    systemd = fake_systemd(bus, short_tmp)
    async with trio.open_nursery() as nursery:
        await nursery.start(tick)
        await nursery.start(systemd.serve)
        client: SystemdBus = await nursery.start(SystemdBus(SystemdAccess(bus, lambda: True)).serve)
        props = [*start_properties(UNIT, "-.slice", 1), ("CPUShares", ("t", 1024))]
        assert await client.start_slice(UNIT, props) is True
        assert systemd.subscribed == 1
        assert systemd.active() == [UNIT]
        assert (short_tmp / "cgroup" / "cpu,cpuacct" / UNIT / "cpu.shares").read_text() == "1024"
        # started again (a restarted kubelet): UnitExists, the properties are set instead
        assert await client.start_slice(UNIT, [("CPUShares", ("t", 2048))]) is False
        assert systemd.units[UNIT].properties["CPUShares"] == 2048
        await client.set_properties(UNIT, [("TasksMax", ("t", 10))])
        assert systemd.units[UNIT].properties["TasksMax"] == 10
        await client.stop_unit(UNIT)
        assert systemd.active() == []
        await client.stop_unit(UNIT)  # NoSuchUnit: already stopped
        with pytest.raises(SystemdError, match=r"^SetUnitProperties kubepods.slice: .*NoSuchUnit"):
            await client.set_properties(UNIT, [("TasksMax", ("t", 10))])
        nursery.cancel_scope.cancel()


async def test_failed_and_lost_jobs(
    short_tmp: Path, bus: str, patient_clock: trio.abc.Clock
) -> None:
    systemd = fake_systemd(bus, short_tmp)
    async with trio.open_nursery() as nursery:
        await nursery.start(tick)
        await nursery.start(systemd.serve)
        client: SystemdBus = await nursery.start(SystemdBus(SystemdAccess(bus, lambda: True)).serve)
        systemd.results[UNIT] = "failed"
        with pytest.raises(
            SystemdError, match=r"^error creating systemd unit `kubepods.slice`: got `failed`$"
        ):
            await client.start_slice(UNIT, [])
        other = "other.slice"
        systemd.results[other] = ""
        started = trio.current_time()
        with pytest.raises(
            SystemdError, match=r"^Timeout waiting for systemd to create other.slice$"
        ):
            await client.start_slice(other, [])
        assert trio.current_time() - started == pytest.approx(30, abs=1)
        systemd.fail("StartTransientUnit", "org.freedesktop.systemd1.JobFailed")
        with pytest.raises(
            SystemdError, match=r"^StartTransientUnit x.slice: org.freedesktop.systemd1.JobFailed: "
        ):
            await client.start_slice("x.slice", [])
        nursery.cancel_scope.cancel()


async def test_systemd_absent_is_refused(
    short_tmp: Path, bus: str, patient_clock: trio.abc.Clock
) -> None:
    with pytest.raises(SystemdUnavailable, match=r"org\.freedesktop\.systemd1 is not on the"):
        await SystemdBus(SystemdAccess(bus, lambda: True)).serve()
    with pytest.raises(SystemdUnavailable, match=r"^systemd not running on this host"):
        await SystemdBus(SystemdAccess(bus, lambda: False)).serve()


async def test_reconnects_after_the_bus_daemon_restarts(
    short_tmp: Path, patient_clock: trio.abc.Clock
) -> None:
    where = short_tmp / "dbus"
    async with trio.open_nursery() as nursery:
        await nursery.start(tick)
        async with private_bus(where) as address:
            systemd = fake_systemd(address, short_tmp)
            scope = trio.CancelScope()

            async def serve(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                with scope:
                    await systemd.serve(task_status=task_status)

            await nursery.start(serve)
            client: SystemdBus = await nursery.start(
                SystemdBus(SystemdAccess(address, lambda: True)).serve
            )
            await client.start_slice(UNIT, [])
            scope.cancel()
        # the daemon is gone: calls fail at once, nothing hangs
        with pytest.raises(SystemdError):
            await client.set_properties(UNIT, [("TasksMax", ("t", 5))])
        async with private_bus(where) as again:
            assert again == address
            scope = trio.CancelScope()
            await nursery.start(serve)
            with trio.fail_after(120):
                while True:
                    try:
                        await client.set_properties(UNIT, [("TasksMax", ("t", 5))])
                        break
                    except SystemdError:
                        await trio.sleep(0.5)
            assert systemd.units[UNIT].properties["TasksMax"] == 5
            assert systemd.subscribed == 2
            nursery.cancel_scope.cancel()
