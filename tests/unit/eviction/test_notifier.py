"""The memory threshold notifier: the armed value (memory_threshold_notifier_test.go) and the
eventfd loop (the kernel's part played by the test: a regular file stands for
cgroup.event_control and the test signals the eventfd itself)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from kubelet.eviction import parse_thresholds
from kubelet.eviction.notifier import CgroupThresholdNotifier, description, memcg_threshold
from kubelet.stats import MemoryUsage

Mi = 1024 * 1024
Gi = 1024 * Mi


def test_threshold_is_capacity_minus_eviction_plus_inactive_file() -> None:
    (hard,) = parse_thresholds({"memory.available": "1Gi"})
    # capacity 3Gi (available 1Gi + working set 2Gi), inactive file 1Gi (usage 3Gi)
    memory = MemoryUsage(available=1 * Gi, working_set=2 * Gi, usage=3 * Gi)
    assert memcg_threshold(hard, memory) == 3 * Gi - 1 * Gi + 1 * Gi
    (pct,) = parse_thresholds({"memory.available": "10%"})
    assert memcg_threshold(pct, memory) == 3 * Gi - int(3 * Gi * 0.10000000149011612) + Gi


def test_incomplete_summary_is_refused() -> None:
    (hard,) = parse_thresholds({"memory.available": "1Gi"})
    with pytest.raises(ValueError, match="incomplete"):
        memcg_threshold(hard, MemoryUsage(available=1, working_set=1))


def test_descriptions() -> None:
    hard, alloc = parse_thresholds({"memory.available": "1Gi"}, enforce_node_allocatable=("pods",))
    (soft,) = parse_thresholds({}, {"memory.available": "1Gi"}, {"memory.available": "1m"})
    assert description(hard) == "hard memory eviction threshold"
    assert description(alloc) == "hard allocatable memory eviction threshold"
    assert description(soft) == "soft memory eviction threshold"


@pytest.fixture
def memcg(tmp_path: Path) -> Path:
    (tmp_path / "memory.usage_in_bytes").write_text("0\n")
    (tmp_path / "cgroup.event_control").write_text("")
    return tmp_path


def registered(memcg: Path) -> list[int]:
    """(eventfd, watched fd, threshold) as last written to cgroup.event_control."""
    return [int(x) for x in (memcg / "cgroup.event_control").read_text().split()]


async def test_arm_registers_and_wait_returns_on_signal(
    memcg: Path, autojump_clock: trio.abc.Clock
) -> None:
    notifier = CgroupThresholdNotifier(memcg)
    await notifier.arm(12345)
    event_fd, _, value = registered(memcg)
    assert value == 12345
    crossings = 0

    async def waiter() -> None:
        nonlocal crossings
        while True:
            await notifier.wait()
            crossings += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(1)
        assert crossings == 0
        os.eventfd_write(event_fd, 1)
        await trio.sleep(0.1)
        assert crossings == 1
        (memcg / "cgroup.event_control").write_text("")  # the kernel keeps no file content
        await notifier.arm(999)  # re-armed while the waiter waits: it keeps waiting on the new fd
        new_fd, _, value = registered(memcg)
        assert value == 999
        await trio.sleep(1)
        assert crossings == 1
        os.eventfd_write(new_fd, 1)
        await trio.sleep(0.1)
        assert crossings == 2
        nursery.cancel_scope.cancel()
    notifier.close()


async def test_wait_before_arm_waits_for_it(memcg: Path, autojump_clock: trio.abc.Clock) -> None:
    notifier = CgroupThresholdNotifier(memcg)
    done = trio.Event()

    async def waiter() -> None:
        await notifier.wait()
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(30)
        await notifier.arm(1)
        event_fd, _, _ = registered(memcg)
        os.eventfd_write(event_fd, 1)
        with trio.fail_after(1):
            await done.wait()
    notifier.close()


async def test_arm_failure_leaks_nothing(tmp_path: Path) -> None:
    notifier = CgroupThresholdNotifier(tmp_path / "missing")
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError):
        await notifier.arm(1)
    assert len(os.listdir("/proc/self/fd")) == before


async def test_keep_armed_registers_the_newest_update_and_reports_failures(memcg: Path) -> None:
    notifier = CgroupThresholdNotifier(memcg)
    failures: list[OSError] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(notifier.keep_armed, failures.append)
        notifier.update(1)
        notifier.update(2)  # before the armer ran: only the newest is registered
        with trio.fail_after(5):
            while not (memcg / "cgroup.event_control").read_text():
                await trio.sleep(0.001)
        assert registered(memcg)[2] == 2
        (memcg / "cgroup.event_control").unlink()  # the kernel refuses: reported, not raised
        notifier.update(3)
        with trio.fail_after(5):
            while not failures:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    notifier.close()
    assert isinstance(failures[0], FileNotFoundError)
