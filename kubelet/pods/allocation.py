"""Each pod's allocation: the resources it was admitted with, which it keeps.

``decisions.resize`` says why (this kubelet applies no in-place resize) and how an
allocation is found. The store decides it once per pod, when the kubelet first meets
the pod (admission, else its first sync): from its spec, or -- a restarted kubelet --
from what its containers on the runtime were created with. It hands out the pod as it
runs: its spec with the allocation's resources, the same object for the same pod, so
identity checks downstream (admission's request sums, the status memo) still hold.
"""

from __future__ import annotations

from collections.abc import Callable

from kubelet.api import Pod
from kubelet.cri import RuntimePodStatus
from kubelet.decisions import Allocation, allocated_pod, allocation_of

__all__ = ["Allocations"]


def _nothing(uid: str) -> RuntimePodStatus | None:
    return None


class Allocations:
    """uid → the pod's allocation. ``recorded`` gives the runtime's view of a pod, if
    any (the PLEG's cache, warm from its first relist before any pod is admitted)."""

    def __init__(self, recorded: Callable[[str], RuntimePodStatus | None] = _nothing) -> None:
        self._recorded = recorded
        self._by_uid: dict[str, Allocation] = {}
        self._last: dict[str, tuple[Pod, Pod]] = {}
        """uid → (the pod last asked about, as it runs)"""

    def allocated(self, pod: Pod) -> Pod:
        """``pod`` as it runs: its spec with the resources it was allocated (decided now
        if this is the first time the pod is met)."""
        last = self._last.get(pod.uid)
        if last is not None and last[0] is pod:
            return last[1]
        allocation = self._by_uid.get(pod.uid)
        if allocation is None:
            allocation = allocation_of(pod, self._recorded(pod.uid))
            self._by_uid[pod.uid] = allocation
        running = allocated_pod(pod, allocation)
        self._last[pod.uid] = (pod, running)
        return running

    def forget(self, uid: str) -> None:
        """The pod is gone (or refused): a pod of that UID met later starts afresh."""
        self._by_uid.pop(uid, None)
        self._last.pop(uid, None)

    def __contains__(self, uid: object) -> bool:
        return uid in self._by_uid

    def __len__(self) -> int:
        return len(self._by_uid)
