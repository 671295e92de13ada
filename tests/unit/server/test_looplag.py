"""The event-loop lag monitor: a step that holds the loop is seen, timed and exported."""

from __future__ import annotations

import logging

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing

from kubelet.metrics import KubeletMetrics, exposition
from kubelet.server.looplag import LoopLag, watching_loop


@attrs.define
class StepClock:
    """The monitor's real clock, advanced only by the step that 'blocks'."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


async def blocking_step(clock: StepClock, seconds: float) -> None:
    """One task step that takes ``seconds`` without a checkpoint (as a read of a FIFO or
    a decode of a huge body does), then yields."""
    clock.now += seconds
    await trio.lowlevel.checkpoint()


async def test_a_long_step_is_observed_with_its_task(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kubelet.server.looplag")
    seen: list[float] = []
    clock = StepClock()
    lag = LoopLag(seen.append, clock=clock)
    async with watching_loop(lag), trio.open_nursery() as nursery:
        nursery.start_soon(blocking_step, clock, 0.001, name="quick")
        nursery.start_soon(blocking_step, clock, 0.3, name="decoder")
        nursery.start_soon(blocking_step, clock, 0.02, name="walker")
        await trio.sleep(1)
    assert sorted(seen) == pytest.approx([0.02, 0.3])  # the 1 ms step is ordinary work
    assert lag.longest == pytest.approx(0.3)
    assert lag.stalls == 2
    held = [r for r in caplog.records if r.getMessage().startswith("Event loop held")]
    assert [r.kubelet_fields["task"] for r in held] == ["decoder"]  # type: ignore[attr-defined]


async def test_removed_when_the_block_ends(autojump_clock: trio.testing.MockClock) -> None:
    seen: list[float] = []
    clock = StepClock()
    async with watching_loop(LoopLag(seen.append, clock=clock)):
        await trio.lowlevel.checkpoint()  # the step that installed it is not timed
        await blocking_step(clock, 0.5)
    await blocking_step(clock, 0.5)
    assert seen == [0.5]


async def test_exported_as_a_histogram_and_the_longest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    metrics = KubeletMetrics(process=False)
    clock = StepClock()
    async with watching_loop(LoopLag(metrics.observe_loop_lag, clock=clock)):
        await trio.lowlevel.checkpoint()
        await blocking_step(clock, 1.5)
        await blocking_step(clock, 0.04)
    text = exposition(metrics.registry).decode()
    assert 'kubelet_event_loop_lag_seconds_bucket{le="0.05"} 1.0' in text
    assert 'kubelet_event_loop_lag_seconds_bucket{le="2.5"} 2.0' in text
    assert "kubelet_event_loop_lag_seconds_count 2.0" in text
    assert "kubelet_event_loop_lag_max_seconds 1.5" in text


async def test_the_step_that_installs_it_is_not_timed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Trio calls no ``before_task_step`` for the step running when the instrument is added:
    that step has no beginning to measure from (the clock's origin is not one)."""
    seen: list[float] = []
    clock = StepClock(now=5000.0)
    async with watching_loop(LoopLag(seen.append, clock=clock)):
        clock.now += 0.001
        await trio.lowlevel.checkpoint()
        await blocking_step(clock, 0.2)
    assert seen == [pytest.approx(0.2)]
