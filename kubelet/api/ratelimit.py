"""Client-side rate limiting: client-go's token bucket (``flowcontrol.NewTokenBucketRateLimiter``).

The bucket starts full (``burst`` tokens) and refills at ``qps`` tokens per second. A
request takes a token; when none is left it reserves the next one and sleeps until that
token is due, so waiters are served in arrival order and a burst of N requests is spread
over N/qps seconds, as golang.org/x/time/rate's ``Wait`` does. Time is trio's clock,
so tests run it under ``autojump_clock``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

__all__ = ["DEFAULT_BURST", "DEFAULT_QPS", "Limiter", "TokenBucket", "Unlimited", "client_limiter"]

DEFAULT_QPS = 5.0
"""client-go's rest.DefaultQPS: what QPS 0 means."""
DEFAULT_BURST = 10
"""client-go's rest.DefaultBurst: what burst 0 means."""


class Limiter(Protocol):
    """What the API client needs from a rate limiter."""

    async def acquire(self) -> None: ...


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up; ``acquire`` waits for one."""

    def __init__(
        self, qps: float, burst: int, *, clock: Callable[[], float] = trio.current_time
    ) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self.qps = float(qps)
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last: float | None = None

    def _refill(self) -> float:
        now = self._clock()
        if self._last is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        return now

    @property
    def tokens(self) -> float:
        """Tokens available now (negative: that many requests are already waiting)."""
        self._refill()
        return self._tokens

    def try_acquire(self) -> bool:
        """Take a token if one is available now, without waiting (client-go's TryAccept)."""
        self._refill()
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    async def acquire(self) -> None:
        """Take a token, sleeping until it is due. Cancelled while waiting, the reserved
        token is given back, so an abandoned request does not delay the ones after it."""
        self._refill()
        self._tokens -= 1
        if self._tokens >= 0:
            await trio.lowlevel.checkpoint()
            return
        wait = -self._tokens / self.qps
        try:
            await trio.sleep(wait)
        except trio.Cancelled:
            self._tokens += 1
            raise


class Unlimited:
    """QPS < 0: no client-side limit (the kubelet's heartbeat client)."""

    async def acquire(self) -> None:
        await trio.lowlevel.checkpoint()


def client_limiter(qps: float, burst: int) -> Limiter:
    """The limiter client-go builds for a rest.Config: QPS 0 ⇒ 5, burst 0 ⇒ 10,
    QPS < 0 ⇒ none. The kubelet passes kubeAPIQPS / kubeAPIBurst (50 / 100)."""
    if qps < 0:
        return Unlimited()
    return TokenBucket(qps or DEFAULT_QPS, burst or DEFAULT_BURST)
