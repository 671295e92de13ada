"""ContainerStops: a pod's cleanup waits for the container stops in flight when it is due."""

from __future__ import annotations

import pytest
import trio

from kubelet.runtime.teardown import STOPS_FIRST_LIMIT, ContainerStops


async def _stop(stops: ContainerStops, takes: float) -> None:
    with stops.stopping():
        await trio.sleep(takes)


async def test_settle_returns_at_once_with_nothing_in_flight(
    autojump_clock: trio.abc.Clock,
) -> None:
    stops = ContainerStops()
    await stops.settle()
    assert trio.current_time() == 0


async def test_settle_waits_for_the_stops_in_flight_not_for_later_ones(
    autojump_clock: trio.abc.Clock,
) -> None:
    stops = ContainerStops()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop, stops, 0.5)
        nursery.start_soon(_stop, stops, 1.5)
        await trio.sleep(0.1)
        assert stops.in_flight() == 2
        settling = trio.current_time()
        async with trio.open_nursery() as waiting:
            waiting.start_soon(stops.settle)
            await trio.sleep(0.2)
            nursery.start_soon(_stop, stops, 1.9)  # begun later: not waited for
        assert trio.current_time() - settling == pytest.approx(1.4)  # the 1.5 s stop's end
        assert stops.in_flight() == 1
    assert stops.in_flight() == 0


async def test_settle_gives_up_after_its_limit(autojump_clock: trio.abc.Clock) -> None:
    stops = ContainerStops()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop, stops, 30)
        await trio.sleep(0.1)
        await stops.settle()
        assert trio.current_time() == pytest.approx(0.1 + STOPS_FIRST_LIMIT)
        nursery.cancel_scope.cancel()
    assert stops.in_flight() == 0  # a cancelled stop leaves the count too
