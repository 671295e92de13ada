"""Probe results per container instance, one store per probe kind.

The store is the truth: pod sync reads it (``get``, ``ids_with``) to decide kills and
readiness. The updates channel only wakes the syncLoop when a result changes, so a
dropped update (a stalled consumer) delays a reaction until the next sync but never
loses state. Keys are runtime container IDs as the runtime view holds them (no
``containerd://`` prefix).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable

import attrs
import trio

from kubelet.api import Pod

__all__ = [
    "UPDATES_CAPACITY",
    "ProbeKind",
    "Result",
    "ResultUpdate",
    "ResultsManager",
]

log = logging.getLogger(__name__)

UPDATES_CAPACITY = 1024
"""Buffered updates per store before new ones are dropped (with a warning)."""


class Result(enum.Enum):
    """A container's probe state as the kubelet acts on it."""

    SUCCESS = "Success"
    FAILURE = "Failure"
    UNKNOWN = "Unknown"


class ProbeKind(enum.Enum):
    """Which probe; the value is upstream's name (metrics labels, event messages)."""

    LIVENESS = "Liveness"
    READINESS = "Readiness"
    STARTUP = "Startup"


@attrs.frozen
class ResultUpdate:
    """A result changed: which probe, which container instance of which pod."""

    kind: ProbeKind
    container_id: str
    result: Result
    pod_uid: str
    container_name: str = ""


class ResultsManager:
    """Results of one probe kind, keyed by container ID.

    ``updates`` is the receive side the syncLoop consumes; an update is sent only when
    the stored result changes (or a container ID is seen for the first time).
    """

    def __init__(self, kind: ProbeKind, *, capacity: int = UPDATES_CAPACITY) -> None:
        self.kind = kind
        self._results: dict[str, Result] = {}
        self._send, self.updates = trio.open_memory_channel[ResultUpdate](capacity)
        self.dropped = 0

    def set(self, container_id: str, result: Result, pod: Pod, container_name: str = "") -> None:
        """Store ``result``; publish an update if it differs from the stored one."""
        if self._results.get(container_id) is result:
            return
        self._results[container_id] = result
        update = ResultUpdate(self.kind, container_id, result, pod.uid, container_name)
        try:
            self._send.send_nowait(update)
        except trio.WouldBlock:
            self.dropped += 1
            log.warning(
                "%s probe updates are not being consumed; dropped the one for %s",
                self.kind.value,
                container_id[:13],
            )
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def get(self, container_id: str) -> Result | None:
        """The stored result, None if there is none for this container instance."""
        return self._results.get(container_id)

    def remove(self, container_id: str) -> None:
        """Forget a container instance (its worker stopped or the instance is gone)."""
        self._results.pop(container_id, None)

    def ids_with(self, result: Result, among: Iterable[str]) -> frozenset[str]:
        """The container IDs ``among`` whose stored result is ``result`` (e.g. a pod's
        liveness failures: a pod sync asks about its own containers only)."""
        results = self._results
        return frozenset(cid for cid in among if results.get(cid) is result)

    def __len__(self) -> int:
        return len(self._results)

    def close(self) -> None:
        """No more updates: the consumer's ``async for`` ends."""
        self._send.close()
