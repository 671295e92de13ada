"""PodCache: a read that began earlier never replaces a view read after it."""

from __future__ import annotations

import trio
import trio.testing

from kubelet.runtime.cache import PodCache
from kubelet.runtime.types import RuntimePodStatus


async def test_an_older_read_finishing_late_does_not_replace_a_newer_view(
    autojump_clock: trio.abc.Clock,
) -> None:
    delays = {"old": 5.0, "new": 1.0}
    order: list[str] = []

    async def fetch(uid: str) -> RuntimePodStatus:
        which = order.pop(0)
        await trio.sleep(delays[which])
        return RuntimePodStatus(uid=uid, name=which)

    cache = PodCache(fetch)
    results: dict[str, RuntimePodStatus] = {}

    async def read(which: str) -> None:
        order.append(which)
        results[which] = await cache.refresh("u1")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read, "old")  # the PLEG's read, say: begins first, ends last
        await trio.sleep(0.5)
        nursery.start_soon(read, "new")  # a worker's read after its action
    entry = cache.get("u1")
    assert entry is not None and entry.name == "new"
    assert results["old"].name == "new"  # the late read hands back the newest view
    # a later read replaces it as usual
    order.append("new")
    assert (await cache.refresh("u1")).name == "new"
    cache.delete("u1")
    assert cache.get("u1") is None and len(cache) == 0
