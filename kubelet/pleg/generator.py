"""PLEG: the pod lifecycle event generator.

Every second it lists the runtime (two CRI calls: ListPodSandbox and ListContainers),
compares each container's state with the previous listing, refreshes the pod cache for
the pods that changed and sends one event per change to the syncLoop. Sandboxes count
as containers (READY = running, NOTREADY = exited).

Unlike upstream, the status of changed pods is fetched concurrently (bounded), so a
slow pod does not hold up every other pod's events, and a pod whose status fetch fails
is retried on the next relist without blocking the others (vector PLEG-07).

Two changed pods need no read: one the listing no longer shows (its entry goes, as
upstream's), and one whose cached view already shows exactly the listed states (its
worker read it right after acting): a read would give that same view, as a sandbox or
container that keeps its state keeps its status (the rule ``PodCache.mark_fresh`` rests
on). A changed pod whose worker is at work on it (``PodCache.in_hand``: it reads the
pod once it has acted) is left to a later relist, as a pod whose read failed: its
changes are found again then, most often shown by that read. Its worker gets a PodSync
at once instead of the events (one per step), so that, as with them, its next step
follows this one (on the view it reads after acting).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping
from typing import Protocol

import attrs
import trio

from kubelet.cri import ContainerRunState, RuntimePodStatus, SandboxState, channel, trace
from kubelet.stats import pace

from .cache import PodCache

log = logging.getLogger(__name__)

RELIST_PERIOD = 1.0
RELIST_THRESHOLD = 180.0
EVENT_CHANNEL_CAPACITY = 1000
STATUS_FETCH_CONCURRENCY = 16
JUST_RELISTED = 0.05
"""``Pleg.between_relists`` returns at once this soon after a relist ended."""


class PlegState(enum.Enum):
    """A container's state as the PLEG compares it."""

    RUNNING = "running"
    EXITED = "exited"
    UNKNOWN = "unknown"
    NON_EXISTENT = "non-existent"


class EventType(enum.Enum):
    CONTAINER_STARTED = "ContainerStarted"
    CONTAINER_DIED = "ContainerDied"
    CONTAINER_REMOVED = "ContainerRemoved"
    CONTAINER_CHANGED = "ContainerChanged"
    POD_SYNC = "PodSync"


@attrs.frozen
class PodLifecycleEvent:
    """Something happened to one container (or sandbox) ``data`` of pod ``uid``."""

    uid: str
    type: EventType
    data: str = ""


def pleg_state(state: ContainerRunState) -> PlegState:
    """CRI CREATED counts as unknown, as upstream does."""
    if state is ContainerRunState.RUNNING:
        return PlegState.RUNNING
    if state is ContainerRunState.EXITED:
        return PlegState.EXITED
    return PlegState.UNKNOWN


def cached_states(status: RuntimePodStatus) -> dict[str, PlegState]:
    """A cached view's sandboxes and containers as a relist lists them."""
    out = {
        s.id: PlegState.RUNNING if s.state is SandboxState.READY else PlegState.EXITED
        for s in status.sandboxes
    }
    out.update((c.id, pleg_state(c.state)) for c in status.containers)
    return out


def events_for(uid: str, cid: str, old: PlegState, new: PlegState) -> list[PodLifecycleEvent]:
    """The events for one container whose state went from ``old`` to ``new`` (as generateEvents)."""
    if old is new:
        return []
    if new is PlegState.RUNNING:
        return [PodLifecycleEvent(uid, EventType.CONTAINER_STARTED, cid)]
    if new is PlegState.EXITED:
        return [PodLifecycleEvent(uid, EventType.CONTAINER_DIED, cid)]
    if new is PlegState.UNKNOWN:
        return [PodLifecycleEvent(uid, EventType.CONTAINER_CHANGED, cid)]
    if old is PlegState.EXITED:
        return [PodLifecycleEvent(uid, EventType.CONTAINER_REMOVED, cid)]
    return [
        PodLifecycleEvent(uid, EventType.CONTAINER_DIED, cid),
        PodLifecycleEvent(uid, EventType.CONTAINER_REMOVED, cid),
    ]


PodStates = Mapping[str, Mapping[str, PlegState]]
"""uid → container/sandbox id → state, as one relist saw it."""


_NOTHING: Mapping[str, PlegState] = {}


def diff_relists(old: PodStates, new: PodStates) -> dict[str, list[PodLifecycleEvent]]:
    """Events per pod between two relists; pods without events are left out."""
    out: dict[str, list[PodLifecycleEvent]] = {}
    for uid in old.keys() | new.keys():
        before = old.get(uid, _NOTHING)
        after = new.get(uid, _NOTHING)
        if before == after:  # the steady case: one comparison in C, no per-container work
            continue
        events: list[PodLifecycleEvent] = []
        for cid in before.keys() | after.keys():
            events += events_for(
                uid,
                cid,
                before.get(cid, PlegState.NON_EXISTENT),
                after.get(cid, PlegState.NON_EXISTENT),
            )
        if events:
            out[uid] = events
    return out


class RuntimeLister(Protocol):
    """What the PLEG needs from the runtime (``RuntimeView`` over the CRI; fakes in tests)."""

    async def relist(self) -> PodStates: ...


class Pleg:
    """Relist loop, event source and health signal. Run ``run`` in its own task."""

    def __init__(
        self,
        lister: RuntimeLister,
        cache: PodCache,
        events: trio.MemorySendChannel[PodLifecycleEvent],
        *,
        period: float = RELIST_PERIOD,
        threshold: float = RELIST_THRESHOLD,
        clock: Callable[[], float] = trio.current_time,
        on_relist: Callable[[float, float], None] | None = None,
    ) -> None:
        self._lister = lister
        self._cache = cache
        self._events = events
        self._period = period
        self._threshold = threshold
        self._clock = clock
        self._states: dict[str, dict[str, PlegState]] = {}
        self._reinspect: set[str] = set()
        self._synced_holds: dict[str, int] = {}
        """The worker's hold on each pod left to it for which a PodSync went out."""
        self.last_relist: float | None = None
        self.last_relist_duration: float = 0.0
        self.relist_interval: float = 0.0
        self.discarded_events = 0
        """Events dropped on a full channel, ever (upstream's ``pleg_discard_events``)."""
        self._discarded: list[PodLifecycleEvent] = []
        """Those of the relist under way: logged once at its end."""
        self.on_relist = on_relist
        """Called with (start, duration) after each successful relist (metrics)."""
        self._relisted = trio.Event()
        """Set when the relist under way (or the next) ends, then replaced."""
        self._relist_ended: float | None = None

    def healthy(self) -> tuple[bool, str]:
        """(ok, why not): unhealthy before the first relist or after ``threshold`` silence."""
        if self.last_relist is None:
            return False, "pleg has yet to be successful"
        since = self._clock() - self.last_relist
        if since > self._threshold:
            return (
                False,
                f"pleg was last seen active {since:.0f}s ago; threshold is {self._threshold:.0f}s",
            )
        return True, ""

    async def between_relists(self) -> None:
        """Return right after a relist ended: at once if one just did, else when the one
        under way (or the next) ends, waiting one period and a second at most.

        The eviction pass waits here before it reads the pods' stats: containerd asks
        every container's shim for them (0.6-0.9 s at 500 pods), and a relist meanwhile
        got its two lists answered 3 to 8 times slower. Started here, the read has the
        period before the next relist to itself. Nothing else changes: the pass still
        reads the same stats, ending at most this wait later."""
        ended = self._relist_ended
        if ended is not None and self._clock() - ended <= JUST_RELISTED:
            return
        with trio.move_on_after(self._period + 1.0):
            await self._relisted.wait()

    def request_reinspect(self, uid: str) -> None:
        """Refresh ``uid``'s cache entry on the next relist and send PodSync."""
        self._reinspect.add(uid)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        channel.PRIORITY.set(True)  # the relist's calls pass the pod workers' queue
        started = False
        while True:
            try:
                with pace.URGENT.running():  # paced passes let it by (kubelet.stats.pace)
                    await self.relist()
            finally:
                self._relist_ended = self._clock()
                self._relisted.set()
                self._relisted = trio.Event()
            if not started:
                task_status.started()
                started = True
            await trio.sleep(self._period)

    async def relist(self) -> None:
        """One relist: list, diff, refresh changed pods, emit events."""
        start = self._clock()
        if self.last_relist is not None:
            self.relist_interval = start - self.last_relist
        try:
            current = await self._lister.relist()
        except Exception as exc:  # a runtime outage: keep old states, stay silent
            log.warning("PLEG relist failed: %s", exc)
            return
        listed = self._clock()
        changed = diff_relists(self._states, current)
        to_fetch = set(changed) | self._reinspect
        unread = self._unread(to_fetch, current)
        holds = {u: self._cache.held(u) for u in to_fetch - unread - self._reinspect}
        later = {u for u, hold in holds.items() if hold is not None}
        results = dict.fromkeys(unread, True)
        if read := to_fetch - unread - later:  # none: no nursery, no yield to the loop
            results.update(await self._refresh(read))
        kept = dict(current)  # the listing, with the old view of pods not taken in
        for uid in to_fetch:
            if uid in later or not results.get(uid, False):
                # keep the old view of this pod so its events are found again next time
                if uid in later:
                    self._sync_after_step(uid, holds[uid])
                else:
                    self._reinspect.add(uid)
                if uid in self._states:
                    kept[uid] = self._states[uid]
                else:
                    kept.pop(uid, None)
                continue
            if uid not in current:
                self._cache.delete(uid)
            for event in changed.get(uid, ()):
                self._send(event)
            if uid in self._reinspect and uid not in changed:
                self._send(PodLifecycleEvent(uid, EventType.POD_SYNC))
            self._reinspect.discard(uid)
        self._report_discards()
        self._states = {uid: dict(states) for uid, states in kept.items()}
        self._synced_holds = {u: h for u, h in self._synced_holds.items() if u in later}
        self._cache.mark_fresh(start, self._reinspect | later)
        self.last_relist = self._clock()
        self.last_relist_duration = self.last_relist - start
        if self.on_relist is not None:
            self.on_relist(start, self.last_relist_duration)
        if trace.TRACE is not None:
            trace.TRACE.record(
                "relist",
                t=time.monotonic(),
                d=self.last_relist_duration,
                lists=listed - start,
                pods=len(kept),
            )

    def _unread(self, uids: set[str], current: PodStates) -> set[str]:
        """The pods among ``uids`` whose status the listing already gives: gone from it
        (nothing to read; the entry is deleted), or shown by their cached view (a
        re-inspection asked for reads anyway)."""
        out = set()
        for uid in uids:
            listed = current.get(uid)
            if listed is None:
                out.add(uid)
            elif uid not in self._reinspect:
                entry = self._cache.get(uid)
                if entry is not None and cached_states(entry) == listed:
                    out.add(uid)
        return out

    async def _refresh(self, uids: set[str]) -> dict[str, bool]:
        results: dict[str, bool] = {}
        limiter = trio.CapacityLimiter(STATUS_FETCH_CONCURRENCY)

        async def fetch(uid: str) -> None:
            async with limiter:
                try:
                    await self._cache.refresh(uid)
                    results[uid] = True
                except Exception as exc:
                    log.warning("PLEG: status of pod %s not refreshed: %s", uid, exc)
                    results[uid] = False

        async with trio.open_nursery() as nursery:
            for uid in uids:
                nursery.start_soon(fetch, uid)
        return results

    def _sync_after_step(self, uid: str, hold: int | None) -> None:
        """A PodSync for a pod left to its worker, once per hold: requests coalesce
        while the worker is at work, and the step after reads its own view."""
        if hold is not None and self._synced_holds.get(uid) != hold:
            self._synced_holds[uid] = hold
            self._send(PodLifecycleEvent(uid, EventType.POD_SYNC))

    def _send(self, event: PodLifecycleEvent) -> None:
        if event.type is EventType.CONTAINER_CHANGED:
            return  # generated but not sent, as upstream
        try:
            self._events.send_nowait(event)
        except trio.WouldBlock:
            self.discarded_events += 1
            self._discarded.append(event)

    def _report_discards(self) -> None:
        """One error line for the events a relist dropped, not one each: a relist finds
        every change since the last one at once, and with no consumer running until it
        ends, more than the channel holds (a ramp starting 500 pods a second) are
        dropped in a burst -- thousands of error lines that cost the ramp CPU."""
        if self._discarded:
            first, count = self._discarded[0], len(self._discarded)
            self._discarded = []
            log.error("PLEG event channel is full, discarded %d events (first %s)", count, first)
