"""trio-asyncio's loop with kubelet.cri.aioloop's batched step: asyncio's semantics kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import trio
import trio_asyncio
from trio_asyncio._base import BaseTrioEventLoop

from kubelet.cri import aioloop


@pytest.fixture
async def loop() -> AsyncIterator[asyncio.AbstractEventLoop]:
    aioloop.install()
    async with trio_asyncio.open_loop() as opened:
        yield opened


def test_installed_by_the_cri_client() -> None:
    import kubelet.cri  # noqa: F401

    assert BaseTrioEventLoop._main_loop_one is aioloop._main_loop_one


async def test_callbacks_run_in_order(loop: asyncio.AbstractEventLoop) -> None:
    """Callbacks run in the order queued; one queued by a callback runs too, later."""
    ran: list[str] = []
    for name in "abcde":
        loop.call_soon(ran.append, name)
    loop.call_soon(lambda: loop.call_soon(ran.append, "later"))
    skipped = loop.call_soon(ran.append, "cancelled")
    skipped.cancel()
    await trio.testing.wait_all_tasks_blocked()
    assert ran == ["a", "b", "c", "d", "e", "later"]


async def test_a_busy_asyncio_side_does_not_starve_trio(loop: asyncio.AbstractEventLoop) -> None:
    """A callback that queues itself again runs once per step: the step runs only what
    was queued when it began, then checkpoints, so Trio tasks keep running."""
    spins = 0

    def spin() -> None:
        nonlocal spins
        spins += 1
        if spins < 1000:
            loop.call_soon(spin)

    loop.call_soon(spin)
    for _ in range(5):
        await trio.lowlevel.checkpoint()
    assert 1 <= spins <= 10
    await trio.testing.wait_all_tasks_blocked()
    assert spins == 1000


async def test_timers_fire_at_their_time(
    loop: asyncio.AbstractEventLoop, autojump_clock: trio.abc.Clock
) -> None:
    fired: list[tuple[str, float]] = []
    start = trio.current_time()
    loop.call_later(2.5, lambda: fired.append(("b", trio.current_time() - start)))
    loop.call_later(1.0, lambda: fired.append(("a", trio.current_time() - start)))
    cancelled = loop.call_later(1.5, lambda: fired.append(("cancelled", 0.0)))
    cancelled.cancel()
    await trio.sleep(3)
    assert fired == [("a", 1.0), ("b", 2.5)]


async def test_asyncio_tasks_and_trio_calls_still_work(
    loop: asyncio.AbstractEventLoop, autojump_clock: trio.abc.Clock
) -> None:
    async def aio_side() -> float:
        await asyncio.sleep(0.5)
        return await trio_asyncio.trio_as_aio(trio_side)()

    async def trio_side() -> float:
        await trio.sleep(0.25)
        return trio.current_time()

    start = trio.current_time()
    results = []
    async with trio.open_nursery() as nursery:
        for _ in range(20):

            async def one() -> None:
                results.append(await trio_asyncio.aio_as_trio(aio_side)())

            nursery.start_soon(one)
    assert results == [start + 0.75] * 20


async def test_cancelling_an_asyncio_task_from_trio(
    loop: asyncio.AbstractEventLoop, autojump_clock: trio.abc.Clock
) -> None:
    cleaned = []

    async def hang() -> None:
        try:
            await asyncio.sleep(100)
        finally:
            cleaned.append(trio.current_time())

    with trio.move_on_after(1):
        await trio_asyncio.aio_as_trio(hang)()
    assert cleaned == [pytest.approx(trio.current_time())]


async def test_callbacks_are_checked_in_debug_mode_only(
    loop: asyncio.AbstractEventLoop, autojump_clock: trio.abc.Clock
) -> None:
    """As asyncio's own loop: a coroutine function handed to call_soon/call_later/call_at
    is refused in debug mode; outside it the (costly) check is not made at all."""

    async def coroutine_function() -> None: ...

    loop.set_debug(True)
    with pytest.raises(TypeError, match="coroutines cannot be used with call_soon"):
        loop.call_soon(coroutine_function)
    with pytest.raises(TypeError, match="call_later"):
        loop.call_later(1.0, coroutine_function)
    with pytest.raises(TypeError, match="call_at"):
        loop.call_at(loop.time() + 1.0, coroutine_function)
    loop.set_debug(False)
    checked: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop, "_check_callback", lambda callback, method: checked.append(method))
        ran: list[str] = []
        loop.call_soon(ran.append, "soon")
        loop.call_later(0.5, ran.append, "later")
        loop.call_at(loop.time() + 1.0, ran.append, "at")
        await trio.sleep(2)
    assert ran == ["soon", "later", "at"]
    assert checked == []


class _LoopSteps(trio.abc.Instrument):
    """Counts the steps of the loop's own task (the one running ``_main_loop``)."""

    def __init__(self) -> None:
        self.steps = 0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith("._main_loop"):
            self.steps += 1


async def test_a_batch_that_empties_the_queue_takes_no_extra_step(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Two callbacks queued at once: the loop wakes with the first, runs the second as a
    batch and, the queue empty, waits again in the same step (a checkpoint only when
    more is queued: the busy case above)."""
    ran: list[str] = []
    await trio.testing.wait_all_tasks_blocked()
    steps = _LoopSteps()
    trio.lowlevel.add_instrument(steps)
    try:
        loop.call_soon(ran.append, "a")
        loop.call_soon(ran.append, "b")
        await trio.testing.wait_all_tasks_blocked()
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert ran == ["a", "b"]
    assert steps.steps == 1
