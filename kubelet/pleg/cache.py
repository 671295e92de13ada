"""The pod cache: the newest runtime view of each pod, shared by the PLEG and the workers.

Entries are refreshed through one fetcher (a CRI status read). The PLEG refreshes pods
that changed, and after each relist marks the cache current as of the relist's start
(:meth:`PodCache.mark_fresh`). A pod worker never acts on a view older than its own
last action (a :class:`ViewMark` it takes right after acting): :meth:`PodCache.newer_than`
gives the cached entry when the read behind it began after that mark, or the last relist
began after it (upstream's ``GetNewerThan``: an entry modified after the time asked, or
the cache's global timestamp after it; a periodic sync then costs no CRI call), and reads
the runtime otherwise. A read that began before another never replaces
it, so the cache never goes back in time when a slow read (the PLEG's) finishes after a
quicker, later one (a worker's, right after it acted). Readers get immutable
``RuntimePodStatus`` objects.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator

import attrs
import trio

from kubelet.cri import RuntimePodStatus

StatusFetcher = Callable[[str], Awaitable[RuntimePodStatus]]


@attrs.frozen
class ViewMark:
    """A moment in the cache's order of events (``PodCache.mark``): ``at`` on the clock,
    and ``seq`` in the order reads begin, which tells a read begun just after the mark
    from one begun just before it at the same clock time (a fake clock's instant)."""

    at: float
    seq: int


class PodCache:
    """uid → the newest ``RuntimePodStatus``, refreshed through one fetcher."""

    def __init__(
        self,
        fetch: StatusFetcher,
        *,
        clock: Callable[[], float] = trio.current_time,
        unlisted: Callable[[str], bool] | None = None,
    ) -> None:
        self._fetch = fetch
        self._unlisted = unlisted
        """True when the PLEG's last relist listed nothing of a uid (``RuntimeView``)."""
        self._clock = clock
        self._entries: dict[str, RuntimePodStatus] = {}
        self._order = itertools.count()
        self._asked_at: dict[str, int] = {}
        """The order in which the read behind each entry began (or, after ``delete``
        while reads were in flight, the delete's): a read that began earlier (the PLEG's,
        say, overtaken by a worker's read after its action) never replaces the entry."""
        self._reading: collections.Counter[str] = collections.Counter()
        self._in_hand: dict[str, tuple[int, int]] = {}
        """uid → (how many steps hold it, which hold this is in the cache's order)."""
        self._fresh_at: float | None = None
        """When the last relist that found every entry current began (``mark_fresh``)."""
        self._stale: frozenset[str] = frozenset()
        """Pods that relist could not vouch for (a failed read, a re-inspection asked)."""

    def mark_fresh(self, began: float, stale: Iterable[str] = ()) -> None:
        """A relist that began at ``began`` saw no change the entries do not show, except
        for ``stale``: a pod whose sandboxes and containers keep their states keeps its
        status (an exit, a restart or a new sandbox is a state change, and refreshed)."""
        self._fresh_at = began
        self._stale = frozenset(stale)

    @contextlib.contextmanager
    def in_hand(self, uid: str) -> Iterator[None]:
        """``uid``'s worker is at work on it (a sync or a teardown, which reads the pod
        after acting on it): a relist meanwhile leaves the pod to it (``Pleg``)."""
        count, hold = self._in_hand.get(uid, (0, 0))
        self._in_hand[uid] = (count + 1, hold if count else next(self._order))
        try:
            yield
        finally:
            count, hold = self._in_hand[uid]
            if count > 1:
                self._in_hand[uid] = (count - 1, hold)
            else:
                del self._in_hand[uid]

    def held(self, uid: str) -> int | None:
        """Which hold ``uid``'s worker has on it (``in_hand``; one number per uninterrupted
        hold), or None."""
        held = self._in_hand.get(uid)
        return None if held is None else held[1]

    def mark(self) -> ViewMark:
        """Now, for a later ``newer_than``: a pod worker takes it after its last action."""
        return ViewMark(self._clock(), next(self._order))

    async def newer_than(self, uid: str, since: ViewMark | None) -> RuntimePodStatus:
        """``uid``'s view as of ``since`` or later: the cached entry when the read behind it
        began after ``since`` (a worker's own read after acting, or the PLEG's since), or
        when the last relist vouches for it; else a read now.

        ``since`` None (the pod has no sync or teardown behind it in this process, or its
        last teardown found it gone) reads, unless the last relist listed nothing of the
        pod: then it has nothing on the runtime, as only its own worker creates anything
        for it (upstream's first sync also starts from the cache's empty status, no call).
        """
        if since is None and self._first_sync_of_nothing(uid):
            return RuntimePodStatus(uid=uid, timestamp=self._clock())
        entry = self._entries.get(uid)
        if entry is not None and since is not None:
            if self._asked_at[uid] > since.seq:
                return entry
            if (
                self._fresh_at is not None
                and self._fresh_at >= since.at
                and uid not in self._stale
                and uid not in self._reading
            ):
                return entry
        return await self.refresh(uid)

    def _first_sync_of_nothing(self, uid: str) -> bool:
        unlisted = self._unlisted
        return (
            unlisted is not None
            and uid not in self._reading
            and uid not in self._entries
            and unlisted(uid)
        )

    async def refresh(self, uid: str) -> RuntimePodStatus:
        """Read ``uid`` from the runtime now and remember it; the newest view is returned
        (a concurrent read that began after this one wins)."""
        asked = next(self._order)
        self._reading[uid] += 1
        try:
            status = await self._fetch(uid)
            if asked > self._asked_at.get(uid, -1):
                self._entries[uid] = status
                self._asked_at[uid] = asked
            return self._entries.get(uid, status)
        finally:
            self._reading[uid] -= 1
            if not self._reading[uid]:
                del self._reading[uid]
                if uid not in self._entries:
                    self._asked_at.pop(uid, None)  # no read left that a delete must stop

    def get(self, uid: str) -> RuntimePodStatus | None:
        return self._entries.get(uid)

    def delete(self, uid: str) -> None:
        """Forget ``uid``; a read of it still in flight does not bring it back."""
        self._entries.pop(uid, None)
        if uid in self._reading:
            self._asked_at[uid] = next(self._order)
        else:
            self._asked_at.pop(uid, None)

    def statuses(self) -> list[RuntimePodStatus]:
        """Every pod's newest view (the running-pods gauges read them)."""
        return list(self._entries.values())

    def uids(self) -> set[str]:
        return set(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
