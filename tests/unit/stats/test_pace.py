"""Pacer: a long pass gives the loop back once per slice, and only then."""

from __future__ import annotations

import trio
import trio.testing

from kubelet.stats.pace import Pacer


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
