"""The client-side token bucket: burst at once, then QPS, on trio's (autojump) clock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kubelet.api import TokenBucket
from kubelet.api.ratelimit import Unlimited, client_limiter


async def times_of(limiter: TokenBucket, n: int) -> list[float]:
    """Start ``n`` acquirers in order; return when each got its token (relative)."""
    start = trio.current_time()
    got: list[float] = []

    async def one() -> None:
        await limiter.acquire()
        got.append(trio.current_time() - start)

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(one)
            await trio.testing.wait_all_tasks_blocked()
    return sorted(got)


async def test_burst_then_qps(autojump_clock: trio.testing.MockClock) -> None:
    bucket = TokenBucket(qps=2, burst=3)
    times = await times_of(bucket, 7)
    assert times == pytest.approx([0, 0, 0, 0.5, 1.0, 1.5, 2.0])


async def test_kubelet_defaults_100_at_once_then_50_per_second(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bucket = TokenBucket(qps=50, burst=100)
    start = trio.current_time()
    for _ in range(100):
        await bucket.acquire()
    assert trio.current_time() == start
    for _ in range(50):
        await bucket.acquire()
    assert trio.current_time() - start == pytest.approx(1.0)


async def test_refills_while_idle_up_to_burst(autojump_clock: trio.testing.MockClock) -> None:
    bucket = TokenBucket(qps=1, burst=2)
    assert bucket.try_acquire() and bucket.try_acquire()
    assert not bucket.try_acquire()
    await trio.sleep(1.5)
    assert bucket.tokens == pytest.approx(1.5)
    await trio.sleep(100)
    assert bucket.tokens == pytest.approx(2)  # never more than the burst


async def test_waiters_are_served_in_order(autojump_clock: trio.testing.MockClock) -> None:
    bucket = TokenBucket(qps=10, burst=1)
    order: list[int] = []

    async def one(i: int) -> None:
        await bucket.acquire()
        order.append(i)

    async with trio.open_nursery() as nursery:
        for i in range(5):
            nursery.start_soon(one, i)
            await trio.testing.wait_all_tasks_blocked()
    assert order == [0, 1, 2, 3, 4]


async def test_cancelled_waiter_gives_its_token_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bucket = TokenBucket(qps=1, burst=1)
    await bucket.acquire()
    with trio.move_on_after(0.25):
        await bucket.acquire()  # would have waited 1 s
    # The abandoned reservation is returned: the next caller waits 0.75 s, not 1.75 s.
    start = trio.current_time()
    await bucket.acquire()
    assert trio.current_time() - start == pytest.approx(0.75)


def test_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="qps"):
        TokenBucket(0, 1)
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(1, 0)


def test_client_go_defaults() -> None:
    limiter = client_limiter(0, 0)
    assert isinstance(limiter, TokenBucket)
    assert (limiter.qps, limiter.burst) == (5.0, 10)
    limiter = client_limiter(50, 100)
    assert isinstance(limiter, TokenBucket)
    assert (limiter.qps, limiter.burst) == (50.0, 100)
    assert isinstance(client_limiter(-1, 0), Unlimited)


async def test_unlimited_never_waits(autojump_clock: trio.testing.MockClock) -> None:
    limiter = Unlimited()
    start = trio.current_time()
    for _ in range(10_000):
        await limiter.acquire()
    assert trio.current_time() == start
