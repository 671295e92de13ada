"""The eviction manager's hold on the pods: who is active, the kill path, "cleaned up".

Upstream's ``killPodNow``: an evicted pod goes through its pod worker like any
termination (containers in teardown order with the grace period override, then the
sandbox), and the worker's status function makes its final status Failed, reason
``Evicted``. Here the syncer is told first (``syncer.evict``: every status it generates
for the pod from then on is the evicted one), then the worker terminates the pod; the
call returns once the pod is terminated or the grace period and a margin have passed.
A terminated evicted pod's worker is dropped, so the pod's later deletion runs its
teardown again (which finds nothing left) and reports it finished.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs
import trio

from kubelet.api.pod import Pod
from kubelet.eviction.decide import Eviction

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

    def active_pods(self) -> Sequence[Pod]:
        """Pods that hold, or will hold, the node's resources (``GetActivePods``)."""
        return [
            w.pod
            for uid, w in self.workers.workers.items()
            if uid not in self.rejected
            and uid not in self.syncer.evicted
            and self.workers.is_active(uid)
        ]

    async def evict(self, eviction: Eviction) -> None:
        pod = eviction.pod
        self.syncer.evict(pod, eviction)
        self.workers.terminate(pod, eviction.grace_period_override)
        with trio.move_on_after(eviction.grace_period_override + KILL_MARGIN) as scope:
            await self.workers.wait_terminated(pod.uid)
        if scope.cancelled_caught:
            raise TimeoutError(f"pod {pod.key} did not stop in time")
        self.workers.forget(pod.uid)

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
        if uid in self.syncer.evicted or pod.status.reason == "Evicted":
            return self._stopped(uid)
        return pod.metadata.deletion_timestamp is not None and self._stopped(uid)

    def runtime_removable(self, uid: str) -> bool:
        return self._stopped(uid)
