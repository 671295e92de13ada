"""Pods the node needs stopped (graceful node shutdown), stopped by their pod workers.

``PodKiller.run`` (in the pod lifecycle's nursery) reads the shutdown manager's requests
(``kubelet.node.shutdown.handoff``): each pod gets a termination with the group's grace,
its status the manager's reason, message and ``DisruptionTarget`` condition, and the
request is answered once the pod is stopped. Requests run concurrently: the manager
decides the order (priority groups) and how long it waits for each group.
"""

from __future__ import annotations

import logging

import trio

from kubelet.api.pod import PodCondition
from kubelet.node.shutdown.handoff import KillRequest
from kubelet.status.killed import Kill

from .manager import PodManager
from .syncer import KubeletPodSyncer
from .workers import PodWorkers

__all__ = ["PodKiller"]

log = logging.getLogger(__name__)


class PodKiller:
    """Answers kill requests through the pod workers."""

    def __init__(self, pods: PodManager, workers: PodWorkers, syncer: KubeletPodSyncer) -> None:
        self.pods = pods
        self.workers = workers
        self.syncer = syncer

    async def run(
        self,
        requests: trio.MemoryReceiveChannel[KillRequest],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            async for request in requests:
                nursery.start_soon(self._kill, request)

    async def _kill(self, request: KillRequest) -> None:
        uid = request.pod.uid
        try:
            pod = self.pods.get(uid)
            if pod is None or not self.workers.is_known(uid):
                return  # never started here: nothing to stop
            how = request.how
            self.syncer.kills[uid] = Kill(
                how.reason,
                how.message,
                tuple(
                    PodCondition(
                        type=c["type"],
                        status=c["status"],
                        reason=c.get("reason", ""),
                        message=c.get("message", ""),
                        last_transition_time=c.get("lastTransitionTime"),
                    )
                    for c in how.conditions
                ),
            )
            self.workers.terminate(pod, how.grace)
            await self.workers.wait_terminated(uid)
        finally:
            request.done.set()
