"""PLEG vectors PLEG-01…PLEG-11 (upstream's rules) with a scripted runtime and a fake clock."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    RuntimePodStatus,
    SandboxInfo,
    SandboxState,
)
from kubelet.pleg import EventType, PodCache, PodLifecycleEvent
from kubelet.pleg.generator import Pleg, PlegState, PodStates, RuntimeLister, diff_relists

R, E, U = PlegState.RUNNING, PlegState.EXITED, PlegState.UNKNOWN
Started, Died, Removed = (
    EventType.CONTAINER_STARTED,
    EventType.CONTAINER_DIED,
    EventType.CONTAINER_REMOVED,
)


class ScriptedRuntime(RuntimeLister):
    def __init__(self) -> None:
        self.pods: PodStates = {}
        self.failing: set[str] = set()
        self.fetched: list[str] = []
        self.views: dict[str, RuntimePodStatus] = {}
        """What a status read gives per pod (an empty status for any other)."""

    async def relist(self) -> PodStates:
        return self.pods

    async def status(self, uid: str) -> RuntimePodStatus:
        self.fetched.append(uid)
        if uid in self.failing:
            raise RuntimeError("inspect failed")
        return self.views.get(uid, RuntimePodStatus(uid=uid))


def make(
    capacity: int = 100,
) -> tuple[Pleg, ScriptedRuntime, trio.MemoryReceiveChannel[PodLifecycleEvent], PodCache]:
    runtime = ScriptedRuntime()
    cache = PodCache(runtime.status)
    send, recv = trio.open_memory_channel[PodLifecycleEvent](capacity)
    return Pleg(runtime, cache, send), runtime, recv, cache


def drain(recv: trio.MemoryReceiveChannel[PodLifecycleEvent]) -> set[tuple[str, EventType, str]]:
    out = set()
    while True:
        try:
            e = recv.receive_nowait()
        except trio.WouldBlock:
            return out
        out.add((e.uid, e.type, e.data))


async def test_PLEG_01_02_03_relisting() -> None:
    pleg, runtime, recv, _ = make()
    runtime.pods = {"1234": {"c1": E, "c2": R, "c3": U}, "4567": {"c1": E}}
    await pleg.relist()
    assert drain(recv) == {("1234", Started, "c2"), ("4567", Died, "c1"), ("1234", Died, "c1")}
    await pleg.relist()  # PLEG-02: nothing changed
    assert drain(recv) == set()
    runtime.pods = {"1234": {"c2": E, "c3": R}, "4567": {"c4": R}}
    await pleg.relist()  # PLEG-03
    assert drain(recv) == {
        ("1234", Removed, "c1"),
        ("1234", Died, "c2"),
        ("1234", Started, "c3"),
        ("4567", Removed, "c1"),
        ("4567", Started, "c4"),
    }


async def test_PLEG_04_event_channel_full_drops_and_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pleg, runtime, recv, _ = make(capacity=3)
    runtime.pods = {"1234": {"c1": E, "c2": R}, "4567": {"c1": E}}
    await pleg.relist()
    drain(recv)
    runtime.pods = {"1234": {"c2": E, "c3": R}, "4567": {"c4": R}}
    with caplog.at_level(logging.ERROR):
        await pleg.relist()
    assert len(drain(recv)) == 3
    assert pleg.discarded_events == 2
    # one line for the relist's discards, not one per event
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("PLEG event channel is full, discarded 2 events (first ")
    caplog.clear()
    runtime.pods = {"1234": {"c2": E, "c3": R}}
    await pleg.relist()  # 4567 gone: its events fit
    assert pleg.discarded_events == 2 and caplog.records == []


async def test_PLEG_05_missing_containers() -> None:
    pleg, runtime, recv, _ = make()
    runtime.pods = {"p": {"c1": R, "c2": R, "c3": E}}
    await pleg.relist()
    drain(recv)
    runtime.pods = {"p": {"c1": R}}
    await pleg.relist()
    assert drain(recv) == {("p", Died, "c2"), ("p", Removed, "c2"), ("p", Removed, "c3")}


async def test_PLEG_06_missing_pod_deletes_cache_entry() -> None:
    pleg, runtime, recv, cache = make()
    runtime.pods = {"p": {"c2": R}}
    await pleg.relist()
    assert cache.get("p") is not None
    drain(recv)
    runtime.pods = {}
    await pleg.relist()
    assert drain(recv) == {("p", Died, "c2"), ("p", Removed, "c2")}
    assert cache.get("p") is None


async def test_PLEG_07_failed_inspect_retried_next_relist() -> None:
    pleg, runtime, recv, _ = make()
    runtime.pods = {"a": {"c": R}, "b": {"c": R}}
    runtime.failing = {"b"}
    await pleg.relist()
    assert drain(recv) == {("a", Started, "c")}
    runtime.failing = set()
    await pleg.relist()
    assert drain(recv) == {("b", Started, "c")}
    assert runtime.fetched.count("b") == 2


async def test_PLEG_08_09_10_health(autojump_clock: trio.abc.Clock) -> None:
    pleg, _, _, _ = make()
    assert pleg.healthy() == (False, "pleg has yet to be successful")
    await pleg.relist()
    await trio.sleep(60)
    assert pleg.healthy() == (True, "")
    await trio.sleep(121)
    ok, why = pleg.healthy()
    assert not ok
    assert why == "pleg was last seen active 181s ago; threshold is 180s"


async def test_PLEG_11_reinspect_sends_pod_sync() -> None:
    pleg, runtime, recv, _ = make()
    runtime.pods = {"p": {"c": R}}
    await pleg.relist()
    drain(recv)
    runtime.failing = {"p"}
    pleg.request_reinspect("p")
    await pleg.relist()
    assert drain(recv) == set()  # failure: stays queued, no event
    runtime.failing = set()
    await pleg.relist()
    assert drain(recv) == {("p", EventType.POD_SYNC, "")}
    await pleg.relist()
    assert drain(recv) == set()


async def test_relist_every_second(autojump_clock: trio.abc.Clock) -> None:
    pleg, runtime, recv, _ = make()
    async with trio.open_nursery() as nursery:
        await nursery.start(pleg.run)
        runtime.pods = {"p": {"c": R}}
        await trio.sleep(1.01)
        assert drain(recv) == {("p", Started, "c")}
        assert pleg.relist_interval == pytest.approx(1.0)
        nursery.cancel_scope.cancel()


def test_unknown_changes_are_not_sent_but_computed() -> None:
    events = diff_relists({"p": {"c": R}}, {"p": {"c": U}})
    assert [e.type for e in events["p"]] == [EventType.CONTAINER_CHANGED]


async def test_a_relist_vouches_for_the_cache_after_it_began(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A worker whose previous step ended before the last relist began gets the cached
    view without a CRI read; otherwise (or for a pod the relist could not read) it reads."""
    pleg, runtime, _, cache = make()
    runtime.pods = {"a": {"c": R}, "b": {"c": R}}
    await pleg.relist()
    runtime.pods = {"a": {"c": R}, "b": {"c": E}}  # b changed, and cannot be read
    runtime.failing = {"b"}
    step_ended = cache.mark()
    await trio.sleep(0.5)
    await pleg.relist()
    runtime.fetched.clear()
    assert await cache.newer_than("a", step_ended) is cache.get("a")
    assert runtime.fetched == []
    await trio.sleep(0.1)
    await cache.newer_than("a", cache.mark())  # after the relist began: read
    await cache.newer_than("a", None)  # a first sync: read
    with pytest.raises(RuntimeError):
        await cache.newer_than("b", step_ended)  # its entry is not vouched for: read
    assert runtime.fetched == ["a", "a", "b"]
    pleg.request_reinspect("a")
    await trio.sleep(0.5)
    await pleg.relist()  # reads "a" for its re-inspection, then vouches for it again
    runtime.fetched.clear()
    assert await cache.newer_than("a", step_ended) is cache.get("a")
    assert runtime.fetched == []


def _shown(uid: str, sandbox: str, containers: dict[str, ContainerRunState]) -> RuntimePodStatus:
    return RuntimePodStatus(
        uid=uid,
        sandboxes=(SandboxInfo(id=sandbox, state=SandboxState.READY),),
        containers=tuple(
            ContainerInfo(id=cid, name=cid, state=state) for cid, state in containers.items()
        ),
    )


async def test_a_pod_its_cache_entry_already_shows_is_not_read_again() -> None:
    """A worker read its pod right after starting it: the relist that then lists the new
    sandbox and container sends their events without reading the pod again; a pod whose
    entry shows other states (c has exited since, or is missing) is read."""
    views = {"p": _shown("p", "s", {"c": ContainerRunState.RUNNING})}
    pleg, runtime, recv, cache = make()
    runtime.views = views
    fetched = runtime.fetched
    await cache.refresh("p")  # the worker's read after its action
    runtime.pods = {"p": {"s": R, "c": R}, "q": {"s2": R}}
    await pleg.relist()
    assert drain(recv) == {("p", Started, "s"), ("p", Started, "c"), ("q", Started, "s2")}
    assert fetched == ["p", "q"]  # the worker's read, then only q
    runtime.pods = {"p": {"s": R, "c": E}, "q": {"s2": R}}
    await pleg.relist()  # the entry still shows c running: read
    assert drain(recv) == {("p", Died, "c")}
    assert fetched == ["p", "q", "p"]
    runtime.pods = {"p": {"s": R, "c": E, "d": U}, "q": {"s2": R}}
    await pleg.relist()  # d created meanwhile, not in the entry: read
    assert fetched == ["p", "q", "p", "p"]


async def test_a_reinspection_reads_a_pod_its_entry_shows() -> None:
    views = {"p": _shown("p", "s", {})}
    pleg, runtime, recv, cache = make()
    runtime.views = views
    fetched = runtime.fetched
    await cache.refresh("p")
    runtime.pods = {"p": {"s": R}}
    pleg.request_reinspect("p")
    await pleg.relist()
    assert fetched == ["p", "p"]
    assert drain(recv) == {("p", Started, "s")}


async def test_a_pod_gone_from_the_listing_is_not_read() -> None:
    """Upstream's relist deletes the entry of a pod it no longer lists, without reading
    it (nothing of it is left to read); its events still go out."""
    pleg, runtime, recv, cache = make()
    runtime.pods = {"p": {"s": R, "c": E}}
    await pleg.relist()
    drain(recv)
    runtime.fetched.clear()
    runtime.pods = {}
    await pleg.relist()
    assert drain(recv) == {("p", Died, "s"), ("p", Removed, "s"), ("p", Removed, "c")}
    assert runtime.fetched == [] and cache.get("p") is None


async def test_a_pod_its_worker_has_in_hand_is_left_to_a_later_relist(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Listed while its worker is at work on it (it reads the pod once it has acted),
    a changed pod is neither read nor vouched for, and its worker gets a PodSync instead
    of its events (to sync again after its step); the next relist finds its changes
    again, shown by the worker's read, and sends its events."""
    views = {"p": _shown("p", "s", {"c": ContainerRunState.RUNNING})}
    pleg, runtime, recv, cache = make()
    runtime.views = views
    fetched = runtime.fetched
    with cache.in_hand("p"):
        acted = cache.mark()
        runtime.pods = {"p": {"s": R}, "q": {"s2": R}}
        await pleg.relist()  # p's sandbox is there, its container not yet
        assert drain(recv) == {("q", Started, "s2"), ("p", EventType.POD_SYNC, "")}
        assert fetched == ["q"]
        await cache.refresh("p")  # the worker's read after acting
        await trio.sleep(1)
        runtime.pods = {"p": {"s": R, "c": R}, "q": {"s2": R}}
        await pleg.relist()  # still in hand, and shown by the read: events
        assert drain(recv) == {("p", Started, "s"), ("p", Started, "c")}
    runtime.pods = {"p": {"s": R, "c": E}, "q": {"s2": R}}
    with cache.in_hand("p"):
        await trio.sleep(1)
        await pleg.relist()  # c exited: not read while in hand, not vouched for
        assert drain(recv) == {("p", EventType.POD_SYNC, "")}
        assert fetched == ["q", "p"]
        stale = cache.get("p")
        assert await cache.newer_than("p", acted) is stale  # its worker's own read
        fetched.clear()
        later = cache.mark()  # the worker acted again (say)
        views["p"] = _shown("p", "s", {"c": ContainerRunState.EXITED})
        await trio.sleep(1)
        assert (await cache.newer_than("p", later)).containers[0].state is E_STATE
        assert fetched == ["p"]
    await pleg.relist()  # out of hand: found again, shown by the read above
    assert drain(recv) == {("p", Died, "c")}
    assert fetched == ["p"]


E_STATE = ContainerRunState.EXITED


async def test_one_pod_sync_per_step_for_a_pod_left_to_its_worker() -> None:
    """Relists during one long step send one PodSync (requests coalesce while the worker
    is busy); a later step that the relists find again gets its own."""
    pleg, runtime, recv, cache = make()
    runtime.pods = {"p": {"s": R}}
    with cache.in_hand("p"):
        with cache.in_hand("p"):  # nested: still the same hold
            await pleg.relist()
        await pleg.relist()
        assert recv.statistics().current_buffer_used == 1
        assert drain(recv) == {("p", EventType.POD_SYNC, "")}
        assert runtime.fetched == []
        await pleg.relist()
        assert drain(recv) == set()
    with cache.in_hand("p"):
        await pleg.relist()
        assert drain(recv) == {("p", EventType.POD_SYNC, "")}
    await pleg.relist()
    assert drain(recv) == {("p", Started, "s")}
    assert runtime.fetched == ["p"]


async def test_a_relist_with_nothing_to_read_does_not_give_the_loop_away() -> None:
    """A steady relist (no pod to read) runs from its listing to its end in one go: a
    yield there let a long pass of another task (the summary's) into its measured time."""
    pleg, runtime, recv, _ = make()
    runtime.pods = {"p": {"s": R, "c": R}}
    await pleg.relist()
    drain(recv)
    with trio.testing.assert_no_checkpoints():
        await pleg.relist()  # the scripted listing itself never yields
    runtime.pods = {"p": {"s": R, "c": E}}
    with trio.testing.assert_checkpoints():
        await pleg.relist()  # p to read: the reads are made in a nursery
    assert drain(recv) == {("p", Died, "c")}


class SlowRuntime(ScriptedRuntime):
    """Each relist takes 0.2 s; ``stalled`` makes the next one hang."""

    stalled = False

    async def relist(self) -> PodStates:
        await trio.sleep(0.2)
        if self.stalled:
            await trio.sleep_forever()
        return self.pods


async def test_between_relists_returns_right_after_a_relist_ends(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Relists run [0, 0.2], [1.2, 1.4], [2.4, 2.6] ...: a wait begun just after one
    ends returns at once, one begun between or during relists returns when the next
    ends, and a relist that never ends holds it one period and a second at most."""
    runtime = SlowRuntime()
    send, _ = trio.open_memory_channel[PodLifecycleEvent](100)
    pleg = Pleg(runtime, PodCache(runtime.status), send)
    async with trio.open_nursery() as nursery:
        await nursery.start(pleg.run)
        t0 = trio.current_time() - 0.2
        await pleg.between_relists()
        assert trio.current_time() - t0 == pytest.approx(0.2)
        await trio.sleep(0.3)
        await pleg.between_relists()
        assert trio.current_time() - t0 == pytest.approx(1.4)
        await trio.sleep(0.9)  # 2.3: the next relist begins at 2.4
        await pleg.between_relists()
        assert trio.current_time() - t0 == pytest.approx(2.6)
        await trio.sleep(0.9)  # 3.5: the next relist begins at 3.6 and hangs
        runtime.stalled = True
        await pleg.between_relists()
        assert trio.current_time() - t0 == pytest.approx(5.5)
        nursery.cancel_scope.cancel()
