"""The pod cache: the newest runtime view of each pod, shared by the PLEG and the workers.

Entries are refreshed through one fetcher (a CRI status read). The PLEG refreshes pods
that changed; a pod worker refreshes its own pod before every sync, so it never acts on
a view older than its last action. Readers get immutable ``RuntimePodStatus`` objects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from .types import RuntimePodStatus

StatusFetcher = Callable[[str], Awaitable[RuntimePodStatus]]


class PodCache:
    def __init__(
        self, fetch: StatusFetcher, *, clock: Callable[[], float] = trio.current_time
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._entries: dict[str, RuntimePodStatus] = {}

    async def refresh(self, uid: str) -> RuntimePodStatus:
        """Read ``uid`` from the runtime now and remember it."""
        status = await self._fetch(uid)
        self._entries[uid] = status
        return status

    def get(self, uid: str) -> RuntimePodStatus | None:
        return self._entries.get(uid)

    def delete(self, uid: str) -> None:
        self._entries.pop(uid, None)

    def uids(self) -> set[str]:
        return set(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
