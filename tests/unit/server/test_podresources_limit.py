"""The pod-resources rate limit: upstream's token bucket (100 a second, bursts of 10)."""

from __future__ import annotations

from kubelet.server.podresources import TokenBucket


def test_burst_then_qps() -> None:
    now = [0.0]
    bucket = TokenBucket(clock=lambda: now[0])
    assert [bucket.allow() for _ in range(11)] == [True] * 10 + [False]
    now[0] += 0.01  # one token per 10 ms
    assert [bucket.allow(), bucket.allow()] == [True, False]
    now[0] += 10.0  # never more than the burst saved up
    assert sum(bucket.allow() for _ in range(20)) == 10
