"""The shutdown manager over real D-Bus: a private dbus-daemon and a fake logind.

These run on the real clock (the bus daemon is another process, which autojump_clock
cannot see): nothing sleeps, every step waits for the event it needs, bounded by
``fail_after`` only as a guard. The grace periods are never waited out: pods stop at once.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from kubelet.node.shutdown import (
    LogindBus,
    LogindUnavailable,
    PriorityPeriod,
    ShutdownManager,
    ShutdownPod,
    Termination,
)
from kubelet.node.shutdown.plan import SYSTEM_CRITICAL_PRIORITY
from kubelet.testing import private_bus
from kubelet.testing.fakelogind import FakeLogind

GUARD = 20.0


@pytest.fixture
async def bus(short_tmp: Path) -> AsyncIterator[str]:
    async with private_bus(short_tmp / "dbus") as address:
        yield address


class Terminator:
    def __init__(self) -> None:
        self.order: list[tuple[str, int]] = []

    async def terminate(self, pod: ShutdownPod, how: Termination) -> None:
        self.order.append((pod.key, how.grace))
        await trio.lowlevel.checkpoint()


async def test_logind_calls_over_the_bus(bus: str, short_tmp: Path) -> None:
    logind = FakeLogind(bus, short_tmp / "conf.d", inhibit_delay_max=7.5)
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(logind.serve)
            async with LogindBus.open(bus) as client:
                assert await client.inhibit_delay_max() == 7.5
                fd = await client.inhibit()
                [lock] = logind.held()
                assert (lock.what, lock.who, lock.why, lock.mode) == (
                    "shutdown",
                    "kubelet",
                    "Kubelet needs time to handle node shutdown",
                    "delay",
                )
                os.fstat(fd)  # a real descriptor, ours now
                client.release(fd)
                await lock.released.wait()
                async with client.shutdown_signals() as signals:
                    await logind.prepare_for_shutdown(True)
                    await logind.prepare_for_shutdown(False)
                    assert [await signals.receive(), await signals.receive()] == [True, False]
            nursery.cancel_scope.cancel()


async def test_no_logind_on_the_bus_is_unavailable(bus: str, short_tmp: Path) -> None:
    with trio.fail_after(GUARD):
        with pytest.raises(
            LogindUnavailable, match=r"org\.freedesktop\.login1 is not on the system bus"
        ):
            async with LogindBus.open(bus):
                pass
        with pytest.raises(LogindUnavailable, match="cannot connect to the system bus"):
            async with LogindBus.open(f"unix:path={short_tmp}/nothing.sock"):
                pass


async def test_shutdown_with_three_priority_classes_over_dbus(
    bus: str, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dropins = short_tmp / "logind.conf.d"
    logind = FakeLogind(bus, dropins, inhibit_delay_max=5)
    groups = (
        PriorityPeriod(0, 10),
        PriorityPeriod(100000, 20),
        PriorityPeriod(SYSTEM_CRITICAL_PRIORITY, 30),
    )
    pods = [
        ShutdownPod("kube-system/dns", "u1", SYSTEM_CRITICAL_PRIORITY, 30),
        ShutdownPod("prod/db", "u2", 100000, 5),
        ShutdownPod("default/web", "u3", 0, 30),
    ]
    terminator = Terminator()
    manager = ShutdownManager(
        groups,
        active_pods=lambda: pods,
        terminator=terminator,
        connect=lambda: LogindBus.open(bus),
        dropin_dir=str(dropins),
    )
    with caplog.at_level(logging.INFO), trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(logind.serve)
            await nursery.start(manager.run)
            # logind allowed 5 s, the groups need 60: the drop-in raised it
            assert (dropins / "99-kubelet.conf").read_text().endswith("InhibitDelayMaxSec=60\n")
            assert logind.reloads == 1 and logind.inhibit_delay_max == 60
            [lock] = logind.held()
            await logind.prepare_for_shutdown(True)
            await lock.released.wait()
            assert terminator.order == [
                ("default/web", 10),
                ("prod/db", 5),
                ("kube-system/dns", 30),
            ]
            assert manager.shutting_down
            # the shutdown was cancelled: a new lock is taken
            await logind.prepare_for_shutdown(False)
            while len(logind.held()) != 1:
                await trio.lowlevel.checkpoint()
            assert not manager.shutting_down
            nursery.cancel_scope.cancel()
