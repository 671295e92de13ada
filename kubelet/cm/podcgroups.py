"""The cgroups part of the container manager: each pod's cgroup before its sandbox and
after its teardown (``cgroups.run.PodCgroups`` does the work)."""

from __future__ import annotations

import logging

from kubelet.api import Pod
from kubelet.cgroups import FAILED_CREATE_POD_CONTAINER, CgroupError, PodCgroups

from .capabilities import PreparesPod, ReleasesPod, ResourceManager
from .resources import ResourceError

log = logging.getLogger(__name__)


class CgroupsPart(ResourceManager, PreparesPod, ReleasesPod):
    """The pod cgroup: made (with its limits) when missing at every sync, as upstream's
    SyncPod does first, so the sandbox and containers start inside it; removed once the
    pod is torn down and its volumes are gone (else housekeeping's sweep does it)."""

    name = "cgroups"

    def __init__(self, cgroups: PodCgroups) -> None:
        self.cgroups = cgroups

    async def prepare_pod(self, pod: Pod) -> None:
        try:
            await self.cgroups.ensure(pod)
        except CgroupError as exc:
            message = f"unable to ensure pod container exists: {exc}"
            raise ResourceError(FAILED_CREATE_POD_CONTAINER, message) from exc

    async def release_pod(self, pod: Pod) -> None:
        try:
            await self.cgroups.remove(pod.uid)
        except CgroupError as exc:  # the sweep tries again
            log.warning("pod %s: pod cgroup not removed: %s", pod.key, exc)
