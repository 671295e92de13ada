"""The kubelet's PodSyncer: one pod worker step = fresh runtime view + CRI actions."""

from __future__ import annotations

import logging

from kubelet.api.pod import Pod
from kubelet.runtime.cache import PodCache
from kubelet.runtime.podsync import PodRuntime, all_gone

from .workers import PodSyncer, SyncResult

log = logging.getLogger(__name__)


class TeardownIncomplete(RuntimeError):
    """Something of the pod is still on the runtime after a teardown pass."""


class KubeletPodSyncer(PodSyncer):
    """Reads the pod's runtime state through the cache, then acts on it.

    The view is refreshed before every step, so a worker never acts on a view older
    than its own last action. The waiting reasons of the last sync are kept per pod
    (CrashLoopBackOff, ErrImagePull, ...) for status reporting.
    """

    def __init__(self, cache: PodCache, pod_runtime: PodRuntime) -> None:
        self.cache = cache
        self.pod_runtime = pod_runtime
        self.waiting: dict[str, dict[str, tuple[str, str]]] = {}

    async def sync_pod(self, pod: Pod) -> SyncResult:
        status = await self.cache.refresh(pod.uid)
        outcome = await self.pod_runtime.sync(pod, status)
        self.waiting[pod.uid] = outcome.waiting
        for name, (reason, message) in outcome.waiting.items():
            log.info("pod %s container %s waiting: %s: %s", pod.key, name, reason, message)
        error = "; ".join(outcome.errors) or None
        return SyncResult(requeue_after=outcome.requeue_after, error=error)

    async def terminate_pod(self, pod: Pod, grace: int | None) -> None:
        status = await self.cache.refresh(pod.uid)
        if not all_gone(status):
            log.info("tearing down pod %s", pod.key)
            await self.pod_runtime.terminate(pod, status, grace)
            status = await self.cache.refresh(pod.uid)
            if not all_gone(status):
                raise TeardownIncomplete(
                    f"pod {pod.key}: {len(status.containers)} containers and "
                    f"{len(status.sandboxes)} sandboxes still on the runtime"
                )
            log.info("pod %s torn down", pod.key)
        self.cache.delete(pod.uid)
        self.waiting.pop(pod.uid, None)
