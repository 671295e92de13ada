"""Housekeeping over the runtime: what the syncLoop's periodic clean-up acts on.

The syncLoop decides (every 2 s, once every source has been seen) which runtime pods no
source wants; ``RuntimeHousekeeper`` is how it reads and cleans: the pods the runtime
holds, stand-ins to tear the orphans down, pod directories nobody owns, mirror pods
whose static pod is gone and pod cgroups of pods nobody knows (both done in its own
nursery, so the loop never waits on the API or on killing and removing a cgroup),
expired back-off entries.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Iterable

import trio

from kubelet.api import Pod
from kubelet.cgroups import PodCgroups
from kubelet.decisions import Backoff
from kubelet.pleg import RuntimeView, pod_from_runtime
from kubelet.volumes import VolumeManager

from .mirror import MirrorClient
from .syncloop import OrphanPod

log = logging.getLogger("kubelet.agent")

LISTING_REUSE = 2.0
"""Seconds a PLEG relist's listing may serve housekeeping's look at the runtime (the
PLEG relists every second; upstream's runtime cache for it is 3 s old at most). An
orphan found in it is acted on only after a fresh listing shows it too."""


class RuntimeHousekeeper:
    """Implements ``syncloop.Housekeeper`` over the CRI, the pod directories and the API."""

    def __init__(
        self,
        view: RuntimeView,
        backoffs: Iterable[Backoff],
        mirrors: MirrorClient | None,
        volumes: VolumeManager | None,
        cgroups: PodCgroups | None = None,
    ) -> None:
        self._view = view
        self._backoffs = tuple(backoffs)
        self._mirrors = mirrors
        self._volumes = volumes
        self._cgroups = cgroups
        self._deleting: set[str] = set()
        self._sweeping = False
        self._unpublishing: set[str] = set()
        self._send, self._jobs = trio.open_memory_channel[Callable[[], Awaitable[None]]](math.inf)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The clean-ups' nursery: one task per orphaned mirror pod, one per cgroup sweep."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            async for job in self._jobs:
                nursery.start_soon(job)

    def orphan_pod_cgroups(self, known: Callable[[str], bool]) -> None:
        """Upstream's cleanupOrphanedPodCgroups, one sweep at a time, off the loop."""
        if self._cgroups is None or not self._cgroups.enabled or self._sweeping:
            return
        self._sweeping = True
        self._send.send_nowait(functools.partial(self._sweep_cgroups, self._cgroups, known))

    async def _sweep_cgroups(self, cgroups: PodCgroups, known: Callable[[str], bool]) -> None:
        volumes = self._volumes
        on_disk = volumes.pod_uids_on_disk() if volumes is not None else set()
        try:
            await cgroups.sweep(known, on_disk.__contains__)
        except Exception as exc:  # the next housekeeping pass tries again
            log.warning("housekeeping: orphaned pod cgroups not swept: %s", exc)
        finally:
            self._sweeping = False

    def orphan_pod_dirs(self, in_use: set[str]) -> None:
        if self._volumes is None:
            return
        for uid in self._volumes.pod_uids_on_disk() - in_use:
            if self._volumes.has_csi_volumes(uid):  # its drivers unpublish them first
                if uid not in self._unpublishing:
                    self._unpublishing.add(uid)
                    self._send.send_nowait(functools.partial(self._orphan_csi, uid))
                continue
            if self._volumes.cleanup(uid):  # False: a mount stays, tried again next pass
                log.info("removed orphaned pod directory of %s", uid)

    async def _orphan_csi(self, uid: str) -> None:
        """An orphaned pod's CSI volumes unpublished (a restarted kubelet finds them
        from vol_data.json), then its directory removed; a failure waits for the next pass."""
        assert self._volumes is not None
        try:
            if await self._volumes.teardown_csi(uid) and self._volumes.cleanup(uid):
                log.info("removed orphaned pod directory of %s", uid)
        finally:
            self._unpublishing.discard(uid)

    def orphan_mirror(self, mirror: Pod) -> None:
        if self._mirrors is None or mirror.uid in self._deleting:
            return
        self._deleting.add(mirror.uid)
        log.info("deleting orphaned mirror pod %s", mirror.key)
        self._send.send_nowait(functools.partial(self._delete_mirror, mirror))

    async def _delete_mirror(self, mirror: Pod) -> None:
        assert self._mirrors is not None
        try:
            await self._mirrors.delete(mirror)
        finally:
            self._deleting.discard(mirror.uid)

    def tidy(self) -> None:
        for backoff in self._backoffs:
            backoff.gc()

    def listed_uids(self) -> Collection[str] | None:
        return self._view.listed_uids(LISTING_REUSE)

    async def runtime_pods(self) -> Iterable[OrphanPod]:
        return [
            OrphanPod(uid, name, namespace)
            for uid, (namespace, name) in (await self._view.pod_identities()).items()
        ]

    def orphan_as_pod(self, orphan: OrphanPod) -> Pod:
        return pod_from_runtime(orphan.uid, orphan.namespace, orphan.name)
