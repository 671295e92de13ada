"""The eviction manager's hold on the pods: who is active, the kill path, "cleaned up".

Upstream's ``killPodNow``: an evicted pod goes through its pod worker like any
termination (containers in teardown order with the grace period override, then the
sandbox), and the worker's status function makes its final status Failed, reason
``Evicted``. Here it is the kubelet's one kill (``killer.kill_pod``) with a ``Kill``
that reclaims: the worker stops the pod and removes its containers and files, every
status of it is the evicted one; the call returns once the pod is terminated or the
grace period and a margin have passed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs
import trio

from kubelet.api import Pod
from kubelet.eviction import REASON, Eviction, eviction_conditions
from kubelet.goformat import rfc3339
from kubelet.status import Kill

from .killer import kill_pod
from .manager import PodManager
from .syncer import KubeletPodSyncer
from .workers import PodPhase, PodWorkers

log = logging.getLogger(__name__)

KILL_MARGIN = 10.0
"""Seconds beyond the grace period the eviction waits for the pod to stop."""


@attrs.frozen
class PodEvictor:
    """``eviction.run.EvictablePods`` over the pod workers and the syncer."""

    workers: PodWorkers
    syncer: KubeletPodSyncer
    rejected: dict[str, str]
    """the syncLoop's rejected pods (never active)"""
    pods: PodManager
    """the pods the sources want: a runtime orphan being torn down is none of them"""

    def active_pods(self) -> Sequence[Pod]:
        """Pods that hold, or will hold, the node's resources (``GetActivePods``), as
        they run: ranked by their allocation's requests. Only pods the pod manager holds,
        as upstream: an orphan found on the runtime is stopped by housekeeping, never
        chosen for eviction (nor waited for as its cleanup)."""
        allocated = self.syncer.allocations.allocated
        return [
            allocated(w.pod)
            for uid, w in self.workers.workers.items()
            if uid not in self.rejected
            and uid in self.pods
            and not self.syncer.evicted(uid)
            and self.workers.is_active(uid)
        ]

    async def evict(self, eviction: Eviction) -> None:
        pod = eviction.pod
        grace = eviction.grace_period_override
        now = rfc3339(self.syncer.wall_clock())
        kill = Kill(REASON, eviction.message.text, grace, eviction_conditions(eviction, now), True)
        with trio.move_on_after(grace + KILL_MARGIN) as scope:
            await kill_pod(self.workers, self.syncer, pod, kill)
        if scope.cancelled_caught:
            raise TimeoutError(f"pod {pod.key} did not stop in time")

    def cleaned_up(self, pod: Pod) -> bool:
        phase = self.workers.phase(pod.uid)
        return phase is None or phase is PodPhase.TERMINATED


@attrs.frozen
class PodGcView:
    """``gc.collector.PodStates`` over the desired pods and the workers.

    Upstream's ``ShouldPodContentBeRemoved``: a desired pod's content goes once it was
    evicted, or is being deleted and has stopped; a pod no source wants, once its
    worker is done (or it has none). ``ShouldPodRuntimeBeRemoved``: the worker has
    terminated the pod, or there is no worker.
    """

    pods: PodManager
    workers: PodWorkers
    syncer: KubeletPodSyncer

    def _stopped(self, uid: str) -> bool:
        phase = self.workers.phase(uid)
        return phase is None or phase is PodPhase.TERMINATED

    def content_removable(self, uid: str) -> bool:
        pod = self.pods.get(uid)
        if pod is None:
            return self._stopped(uid)
        if self.syncer.evicted(uid) or pod.status.reason == REASON:
            return self._stopped(uid)
        return pod.metadata.deletion_timestamp is not None and self._stopped(uid)

    def runtime_removable(self, uid: str) -> bool:
        return self._stopped(uid)
