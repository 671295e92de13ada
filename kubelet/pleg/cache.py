"""The pod cache: the newest runtime view of each pod, shared by the PLEG and the workers.

Entries are refreshed through one fetcher (a CRI status read). The PLEG refreshes pods
that changed; a pod worker refreshes its own pod before every sync, so it never acts on
a view older than its last action. A read that began before another never replaces
it, so the cache never goes back in time when a slow read (the PLEG's) finishes after a
quicker, later one (a worker's, right after it acted). Readers get immutable
``RuntimePodStatus`` objects.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Awaitable, Callable

import trio

from kubelet.cri.types import RuntimePodStatus

StatusFetcher = Callable[[str], Awaitable[RuntimePodStatus]]


class PodCache:
    """uid → the newest ``RuntimePodStatus``, refreshed through one fetcher."""

    def __init__(
        self, fetch: StatusFetcher, *, clock: Callable[[], float] = trio.current_time
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._entries: dict[str, RuntimePodStatus] = {}
        self._order = itertools.count()
        self._asked_at: dict[str, int] = {}
        """The order in which the read behind each entry began (or, after ``delete``
        while reads were in flight, the delete's): a read that began earlier (the PLEG's,
        say, overtaken by a worker's read after its action) never replaces the entry."""
        self._reading: collections.Counter[str] = collections.Counter()

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
