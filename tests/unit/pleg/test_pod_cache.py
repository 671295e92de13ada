"""PodCache: a read that began earlier never replaces a view read after it."""

from __future__ import annotations

import trio
import trio.testing

from kubelet.cri import RuntimePodStatus
from kubelet.pleg import PodCache


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


async def test_reads_begun_at_the_same_instant_keep_their_order(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Under a fake clock an action takes no time: the PLEG's read and a worker's read
    right after its action can begin at the same instant; the later one still wins."""
    views = ["running", "killed"]
    delays = [5.0, 1.0]

    async def fetch(uid: str) -> RuntimePodStatus:
        view, delay = views.pop(0), delays.pop(0)
        await trio.sleep(delay)
        return RuntimePodStatus(uid=uid, name=view)

    cache = PodCache(fetch)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cache.refresh, "u1")  # the PLEG's: sees "running", slow
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(cache.refresh, "u1")  # the worker's, same instant: "killed"
    entry = cache.get("u1")
    assert entry is not None and entry.name == "killed"


async def test_a_read_in_flight_does_not_bring_a_deleted_pod_back(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def fetch(uid: str) -> RuntimePodStatus:
        await trio.sleep(1)
        return RuntimePodStatus(uid=uid, name="running")

    cache = PodCache(fetch)
    await cache.refresh("u1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cache.refresh, "u1")  # the PLEG's read, in flight
        await trio.sleep(0.5)
        cache.delete("u1")  # the pod was torn down meanwhile
    assert cache.get("u1") is None and cache.uids() == set()
    # nothing is kept for it once no read is in flight; a new read stores again
    assert (await cache.refresh("u1")).name == "running" and cache.get("u1") is not None


async def test_a_pod_the_last_relist_did_not_list_starts_from_an_empty_view() -> None:
    """A pod's first sync (``since`` None) of a pod the relist listed nothing of reads
    nothing from the runtime, as upstream's first sync; a listed one, or any later sync
    that the relist does not vouch for, still reads."""
    fetched: list[str] = []

    async def fetch(uid: str) -> RuntimePodStatus:
        fetched.append(uid)
        return RuntimePodStatus(uid=uid, name="read")

    listed = {"old"}
    cache = PodCache(fetch, unlisted=lambda uid: uid not in listed)
    new = await cache.newer_than("new", None)
    assert (new.uid, new.name, new.sandboxes, new.containers) == ("new", "", (), ())
    assert fetched == [] and cache.get("new") is None  # nothing cached from a guess
    assert (await cache.newer_than("old", None)).name == "read"
    assert (await cache.newer_than("new", cache.mark())).name == "read"  # after a sync: a read
    assert fetched == ["old", "new"]
    cache.delete("new")
    assert (await cache.newer_than("new", None)).name == ""  # torn down, all gone


async def test_without_a_relist_behind_it_the_first_sync_reads() -> None:
    fetched: list[str] = []

    async def fetch(uid: str) -> RuntimePodStatus:
        fetched.append(uid)
        return RuntimePodStatus(uid=uid)

    await PodCache(fetch).newer_than("u1", None)
    await PodCache(fetch, unlisted=lambda uid: False).newer_than("u1", None)
    assert fetched == ["u1", "u1"]


async def test_a_read_begun_after_the_mark_serves_without_a_relist(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A worker's read right after its action is as new as its next step needs, with no
    relist since (upstream: an entry modified after the time asked); a read that began
    before the mark, even at the same clock instant, is not."""
    fetched: list[str] = []

    async def fetch(uid: str) -> RuntimePodStatus:
        fetched.append(uid)
        return RuntimePodStatus(uid=uid, name=f"read {len(fetched)}")

    cache = PodCache(fetch)
    await cache.refresh("u1")  # before the action (same instant: a fake clock)
    acted = cache.mark()
    assert (await cache.newer_than("u1", acted)).name == "read 2"  # older: read
    assert (await cache.newer_than("u1", acted)).name == "read 2"  # begun after: served
    assert fetched == ["u1", "u1"]
    later = cache.mark()
    await trio.sleep(1)
    assert (await cache.newer_than("u1", later)).name == "read 3"
    cache.delete("u1")
    assert (await cache.newer_than("u1", later)).name == "read 4"  # no entry: read


async def test_a_read_in_flight_does_not_hide_an_entry_begun_after_the_mark(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The PLEG reading the pod meanwhile does not make the worker read it again."""
    fetched: list[str] = []

    async def fetch(uid: str) -> RuntimePodStatus:
        fetched.append(uid)
        await trio.sleep(1)
        return RuntimePodStatus(uid=uid, name=f"read {len(fetched)}")

    cache = PodCache(fetch)
    acted = cache.mark()
    await cache.refresh("u1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cache.refresh, "u1")  # the PLEG's, in flight
        await trio.sleep(0.5)
        assert (await cache.newer_than("u1", acted)).name == "read 1"
        assert fetched == ["u1", "u1"]
