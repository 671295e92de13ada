"""The desired pods: what the merged sources say this node should run."""

from __future__ import annotations

from collections.abc import Callable

from kubelet.api import Pod


def _as_is(pod: Pod) -> Pod:
    return pod


class PodManager:
    """uid → Pod, plus a full-name index. Only the syncLoop writes to it."""

    def __init__(self) -> None:
        self._by_uid: dict[str, Pod] = {}
        self._mirrors: dict[str, Pod] = {}
        """full name → the API's mirror pod of our static pod of that name"""
        self._rejected: set[str] = set()
        """pods admission refused: never run, so never active"""
        self.allocated: Callable[[Pod], Pod] = _as_is
        """a pod as it runs (its allocation: set once the allocations exist)"""

    def set_rejected(self, uid: str) -> None:
        self._rejected.add(uid)

    def set_mirror(self, mirror: Pod) -> None:
        self._mirrors[mirror.full_name] = mirror

    def remove_mirror(self, mirror: Pod) -> None:
        current = self._mirrors.get(mirror.full_name)
        if current is not None and current.uid == mirror.uid:
            del self._mirrors[mirror.full_name]

    def mirror_for(self, pod: Pod) -> Pod | None:
        return self._mirrors.get(pod.full_name)

    def mirrors(self) -> list[Pod]:
        return list(self._mirrors.values())

    def translate_uid(self, uid: str) -> str:
        """The static pod's UID for its mirror pod's ``uid``; any other UID unchanged
        (upstream's ``TranslatePodUID``: requests may name a static pod by its mirror)."""
        for mirror in self._mirrors.values():
            if mirror.uid == uid:
                static = [p for p in self.by_full_name(mirror.full_name) if not p.is_mirror]
                return static[0].uid if static else uid
        return uid

    def upsert(self, pod: Pod) -> None:
        self._by_uid[pod.uid] = pod

    def remove(self, uid: str) -> Pod | None:
        self._rejected.discard(uid)
        return self._by_uid.pop(uid, None)

    def get(self, uid: str) -> Pod | None:
        return self._by_uid.get(uid)

    def by_full_name(self, full_name: str) -> list[Pod]:
        return [p for p in self._by_uid.values() if p.full_name == full_name]

    def pods(self) -> list[Pod]:
        return list(self._by_uid.values())

    def active(self) -> list[Pod]:
        """The pods that may run: admitted, not finished (as far as their status says)
        and not being deleted. The QoS cgroups are sized from them (upstream's active pods)."""
        return [
            p
            for p in self._by_uid.values()
            if p.uid not in self._rejected
            and p.status.phase not in ("Succeeded", "Failed")
            and p.metadata.deletion_timestamp is None
        ]

    def uids(self) -> set[str]:
        return set(self._by_uid)

    def __len__(self) -> int:
        return len(self._by_uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._by_uid
