"""The DRA device health cache: changes reported, stale entries read Unknown."""

import trio

from kubelet.cm.dra.health import HealthCache


async def test_changes_and_staleness(autojump_clock: trio.abc.Clock) -> None:
    cache = HealthCache(timeout=30.0)
    assert cache.get("gpu", "pool", "dev-0") == "Unknown"
    changed = cache.update("gpu", {("pool", "dev-0"): "Healthy"})
    assert changed == {("gpu", "pool", "dev-0")}
    assert cache.get("gpu", "pool", "dev-0") == "Healthy"
    assert cache.update("gpu", {("pool", "dev-0"): "Healthy"}) == set()
    assert cache.update("gpu", {("pool", "dev-0"): "Unhealthy"}) == {("gpu", "pool", "dev-0")}
    await trio.sleep(31)
    assert cache.get("gpu", "pool", "dev-0") == "Unknown"
    assert cache.update("gpu", {}) == {("gpu", "pool", "dev-0")}
    assert cache.clear("gpu") == {("gpu", "pool", "dev-0")}
