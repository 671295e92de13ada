"""Pods the kubelet stops itself, through their pod workers: ``kill_pod``, and the
graceful node shutdown's requests.

``kill_pod`` is the one way (eviction and node shutdown; an active deadline is found by
the pod's own sync and takes the same ``Kill``): the syncer learns why (every status
of the pod says so from then on), the worker terminates the pod with the kill's grace,
and once it has, the worker is dropped, so the pod's later deletion runs its teardown
(which finds it stopped) and reports it finished.

``PodKiller.run`` (in the pod lifecycle's nursery) reads the shutdown manager's requests
(``kubelet.node.shutdown.handoff``): each pod gets a termination with the group's grace,
its status the manager's reason, message and ``DisruptionTarget`` condition, and the
request is answered once the pod is stopped. Requests run concurrently: the manager
decides the order (priority groups) and how long it waits for each group.
"""

from __future__ import annotations

import logging

import trio

from kubelet.api import Pod, PodCondition
from kubelet.node.shutdown import KillRequest, Termination
from kubelet.status import Kill

from .manager import PodManager
from .syncer import KubeletPodSyncer
from .workers import PodWorkers

__all__ = ["PodKiller", "kill_pod", "shutdown_kill"]

log = logging.getLogger(__name__)


async def kill_pod(workers: PodWorkers, syncer: KubeletPodSyncer, pod: Pod, kill: Kill) -> None:
    """Stop ``pod`` as ``kill`` says and return once it is stopped (upstream's
    ``killPodNow``). Being cancelled abandons the wait, never the termination."""
    syncer.kill(pod, kill)
    workers.terminate(pod, kill.grace)
    await workers.wait_terminated(pod.uid)
    workers.forget(pod.uid)


def shutdown_kill(how: Termination) -> Kill:
    """The shutdown manager's termination as a kill."""
    conditions = tuple(
        PodCondition(
            type=c["type"],
            status=c["status"],
            reason=c.get("reason", ""),
            message=c.get("message", ""),
            last_transition_time=c.get("lastTransitionTime"),
        )
        for c in how.conditions
    )
    return Kill(how.reason, how.message, how.grace, conditions)


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
            await kill_pod(self.workers, self.syncer, pod, shutdown_kill(request.how))
        finally:
            request.done.set()
