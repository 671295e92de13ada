"""Pacer: a long pass gives the loop back once per slice, and only then; it lets a relist by."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kubelet.stats import Pacer
from kubelet.stats.pace import URGENT_WAIT, Urgent


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_tick_yields_only_once_the_slice_is_used_up() -> None:
    clock = Clock()
    pacer = Pacer(0.005, clock)
    with trio.testing.assert_no_checkpoints():
        await pacer.tick()
        clock.now = 0.004
        await pacer.tick()
    clock.now = 0.005
    with trio.testing.assert_checkpoints():
        await pacer.tick()
    assert pacer.yields == 1
    clock.now = 0.009  # a new slice began at the yield (0.005)
    with trio.testing.assert_no_checkpoints():
        await pacer.tick()
    clock.now = 0.010
    with trio.testing.assert_checkpoints():
        await pacer.tick()
    assert pacer.yields == 2


async def test_a_pass_lets_urgent_work_by_once_and_not_for_long(
    autojump_clock: trio.abc.Clock,
) -> None:
    """At a yield during urgent work the pass waits for its end, once per piece of
    work (its next yields are checkpoints), URGENT_WAIT at most; outside urgent work a
    yield is a checkpoint."""
    urgent = Urgent()
    pacer = Pacer(0.0, Clock(), urgent)  # a yield at every tick
    ended = trio.Event()

    async def relist(seconds: float) -> None:
        with urgent.running():
            await trio.sleep(seconds)
        ended.set()

    t0 = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relist, 0.05)
        await trio.testing.wait_all_tasks_blocked()
        await pacer.tick()
        assert ended.is_set() and trio.current_time() - t0 == pytest.approx(0.05)
    with trio.testing.assert_checkpoints():
        await pacer.tick()  # nothing urgent: a plain yield
    t1 = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relist, 1.0)  # a relist that takes too long
        await trio.testing.wait_all_tasks_blocked()
        await pacer.tick()
        assert trio.current_time() - t1 == pytest.approx(URGENT_WAIT)
        await pacer.tick()  # the same work again: not waited for twice
        assert trio.current_time() - t1 == pytest.approx(URGENT_WAIT)
    assert pacer.yields == 4
