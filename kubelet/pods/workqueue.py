"""When each pod next needs a sync: backoff expiry, periodic resync.

Owned by the syncLoop, which sleeps until the earliest due time (or its 1 s tick) and
hands due pods to their workers. Times are on the Trio clock.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import trio


class WorkQueue:
    """uid → due time; re-queuing a uid replaces its previous due time."""

    def __init__(self, clock: Callable[[], float] = trio.current_time) -> None:
        self._clock = clock
        self._due: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def enqueue(self, uid: str, delay: float) -> None:
        when = self._clock() + max(delay, 0.0)
        self._due[uid] = when
        heapq.heappush(self._heap, (when, uid))

    def forget(self, uid: str) -> None:
        self._due.pop(uid, None)

    def due_at(self, uid: str) -> float | None:
        return self._due.get(uid)

    def next_due(self) -> float:
        """The earliest due time, or +inf when nothing is queued."""
        while self._heap:
            when, uid = self._heap[0]
            if self._due.get(uid) == when:
                return when
            heapq.heappop(self._heap)  # stale entry
        return math.inf

    def pop_due(self) -> list[str]:
        """Every uid whose time has come, in due order."""
        now = self._clock()
        out: list[str] = []
        while self._heap and self._heap[0][0] <= now:
            when, uid = heapq.heappop(self._heap)
            if self._due.get(uid) == when:
                del self._due[uid]
                out.append(uid)
        return out

    def __len__(self) -> int:
        return len(self._due)
