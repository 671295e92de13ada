"""The garbage collectors: the plans of ``containers`` and ``images`` applied through the CRI.

``ContainerCollector.collect`` lists containers and sandboxes, asks the pod machinery
which pods are gone (``PodStates``), and removes what ``containers.plan`` names: dead
containers (an unknown one is stopped first), empty sandboxes that are not ready, the
log directories of removed pods. ``ImageCollector`` keeps the image records (first
detected, last used), and ``collect`` removes what ``imageMaximumGCAge`` and the
high/low thresholds allow; ``delete_unused`` is the eviction manager's reclaim.
Nothing here removes a running container, a ready sandbox, an image a container uses,
a pinned image or the sandbox image.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Protocol

import attrs
import trio

from kubelet.cri import CriError, ImageClient, RuntimeClient, api, labels
from kubelet.stats import FsUsage

from . import containers as cplan
from . import images as iplan
from .logs import (
    LEGACY_CONTAINER_LOGS_DIR,
    container_id_of_symlink,
    dangling,
    legacy_log_symlink,
)

log = logging.getLogger(__name__)

STOP_TIMEOUT = 0
"""seconds a container in an unknown state is given to stop before removal"""

_STATES = {
    api.CONTAINER_RUNNING: cplan.RUNNING,
    api.CONTAINER_UNKNOWN: cplan.UNKNOWN,
    api.CONTAINER_EXITED: "exited",
    api.CONTAINER_CREATED: "created",
}


class PodStates(Protocol):
    """What the collectors ask of the pod machinery (``pods.evict.PodGcView``)."""

    def content_removable(self, uid: str) -> bool: ...

    def runtime_removable(self, uid: str) -> bool: ...


class GcError(Exception):
    """A collection failed; the text is what the event says."""


def _container_info(c: api.Container) -> cplan.GcContainer | None:
    uid = c.labels.get(labels.POD_UID)
    if not uid:
        return None  # not the kubelet's
    return cplan.GcContainer(
        id=c.id,
        name=c.metadata.name,
        pod_uid=uid,
        sandbox_id=c.pod_sandbox_id,
        state=_STATES.get(c.state, cplan.UNKNOWN),
        created_at=c.created_at / 1e9,
    )


def _remove_link(cid: str, link: str | None) -> list[str]:
    """A removed container's legacy log symlink goes with it, as upstream's."""
    if link is None:
        return []
    try:
        os.remove(link)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return [f"failed to remove container {cid} log legacy symbolic link {link}: {exc}"]
    return []


def _sandbox_info(s: api.PodSandbox) -> cplan.SandboxInfo | None:
    uid = s.labels.get(labels.POD_UID) or s.metadata.uid
    if not uid:
        return None
    state = cplan.READY if s.state == api.SANDBOX_READY else "notready"
    return cplan.SandboxInfo(id=s.id, pod_uid=uid, state=state, created_at=s.created_at / 1e9)


def _log_dirs(root: str) -> list[str]:
    try:
        return [n for n in os.listdir(root) if n.count("_") >= 2]
    except OSError:
        return []


@attrs.define
class ContainerCollector:
    runtime: RuntimeClient
    pods: PodStates
    sources_ready: Callable[[], bool]
    pod_logs_dir: str
    wall_clock: Callable[[], float]
    policy: cplan.GCPolicy = attrs.field(factory=cplan.GCPolicy)
    containers_log_dir: str = LEGACY_CONTAINER_LOGS_DIR
    before_remove: Callable[[str], Awaitable[None]] | None = None
    """the container manager's post-stop hook, told each container ID before removal"""

    async def collect(self, evict_non_deleted: bool = False) -> cplan.GCPlan:
        """One collection; GcError lists what failed (the rest was still removed)."""
        listed = await self.runtime.list_containers()
        found = [c for c in map(_container_info, listed) if c]
        links = {c.id: self._link_of(c) for c in listed}
        boxes = [s for s in map(_sandbox_info, await self.runtime.list_pod_sandbox()) if s]
        plan = cplan.plan(
            found,
            boxes,
            _log_dirs(self.pod_logs_dir),
            policy=self.policy,
            now=self.wall_clock(),
            all_sources_ready=self.sources_ready(),
            content_removable=self.pods.content_removable,
            runtime_removable=self.pods.runtime_removable,
            evict_non_deleted=evict_non_deleted,
        )
        errors = await self._apply(plan, links)
        if errors:
            raise GcError("; ".join(errors))
        return plan

    async def _remove_dead_symlinks(self) -> None:
        """Symlinks in the legacy container logs directory whose target is gone, but not
        while the runtime reports their container in a state other than exited (upstream's
        guard against log rotation's brief gap); a container it no longer knows is gone."""
        for path in dangling(self.containers_log_dir):
            cid = container_id_of_symlink(path)
            if cid is not None:
                try:
                    status = (await self.runtime.container_status(cid)).status
                except CriError as exc:
                    log.debug("container GC: status of %s for %s: %s", cid, path, exc)
                else:
                    if status.state != api.CONTAINER_EXITED:
                        continue
            try:
                os.remove(path)
                log.info("container GC: removed dead container log symlink %s", path)
            except OSError as exc:
                log.error("container GC: failed to remove log symlink %s: %s", path, exc)

    def _link_of(self, c: api.Container) -> str:
        """The container's legacy log symlink, named from its labels."""
        return legacy_log_symlink(
            self.containers_log_dir,
            c.id,
            c.labels.get(labels.CONTAINER_NAME, c.metadata.name),
            c.labels.get(labels.POD_NAME, ""),
            c.labels.get(labels.POD_NAMESPACE, ""),
        )

    async def _apply(self, plan: cplan.GCPlan, links: dict[str, str]) -> list[str]:
        errors: list[str] = []
        for cid in plan.stop_then_remove:
            try:
                await self.runtime.stop_container(cid, STOP_TIMEOUT)
            except CriError as exc:
                errors.append(f"failed to stop container {cid}: {exc}")
        for cid in plan.containers:
            try:
                if self.before_remove is not None:  # upstream's PostStopContainer
                    await self.before_remove(cid)
                await self.runtime.remove_container(cid)
                log.info("container GC: removed container %s", cid)
            except CriError as exc:
                errors.append(f"failed to remove container {cid}: {exc}")
                continue
            errors.extend(_remove_link(cid, links.get(cid)))
        for sid in plan.remove_sandboxes:
            try:
                await self.runtime.stop_pod_sandbox(sid)
                await self.runtime.remove_pod_sandbox(sid)
                log.info("container GC: removed sandbox %s", sid)
            except CriError as exc:
                errors.append(f"failed to remove sandbox {sid}: {exc}")
        for name in plan.remove_log_dirs:
            path = Path(self.pod_logs_dir) / name
            await trio.to_thread.run_sync(shutil.rmtree, path, True)
            log.info("container GC: removed pod log directory %s", path)
        await self._remove_dead_symlinks()
        return errors


ImageFs = Callable[[], Awaitable[FsUsage | None]]


AGE = "age"
"""An image removed for being unused longer than ``imageMaximumGCAge``."""
SPACE = "space"
"""An image removed to free space (the thresholds, or eviction's reclaim)."""


@attrs.define
class ImageCollector:
    """Image records and the collections; ``began`` is when the kubelet started."""

    runtime: RuntimeClient
    images: ImageClient
    image_fs: ImageFs
    wall_clock: Callable[[], float]
    policy: iplan.ImageGCPolicy = attrs.field(factory=iplan.ImageGCPolicy)
    protected: tuple[str, ...] = ()
    """references never removed (the sandbox image)"""
    began: float = 0.0
    records: dict[str, iplan.ImageRecord] = attrs.field(factory=dict)
    removed: list[str] = attrs.field(factory=list)
    """image IDs removed, in order (bounded; tests and the debug console)"""
    on_removed: Callable[[str], None] | None = None
    """called once per image removed, with why: "age" or "space" (upstream's reasons in
    ``kubelet_image_garbage_collected_total``)"""

    async def detect(self) -> tuple[list[iplan.ImageInfo], set[str], set[str]]:
        """List images and containers; update the records; (images, in use, protected)."""
        listed = [
            iplan.ImageInfo(
                id=i.id,
                size=i.size,
                pinned=i.pinned,
                repo_tags=tuple(i.repo_tags),
                repo_digests=tuple(i.repo_digests),
            )
            for i in await self.images.list_images()
        ]
        refs: list[str] = []
        for c in await self.runtime.list_containers():
            refs += [c.image_ref, c.image.image]
        in_use = iplan.ids_of(listed, [r for r in refs if r])
        protected = iplan.ids_of(listed, self.protected)
        self.records = iplan.detect(self.records, listed, in_use, self.wall_clock())
        return listed, in_use, protected

    async def collect(self) -> None:
        """The periodic collection: old images, then space. GcError says what failed."""
        now = self.wall_clock()
        _, in_use, protected = await self.detect()
        order = iplan.eviction_order(self.records, in_use, protected)
        old = iplan.old_images(order, self.policy, now, self.began)
        errors = await self._remove(old, AGE)
        if errors:
            raise GcError(iplan.old_deletion_errors_message(f"{self.policy.max_age:g}s", errors))
        if self.policy.high_threshold_percent == 100:
            return
        fs = await self.image_fs()
        if fs is None or fs.capacity is None or fs.available is None:
            raise GcError("failed to get image filesystem stats")
        try:
            decision = iplan.space_decision(fs.capacity, fs.available, self.policy)
        except ValueError as exc:
            raise GcError(str(exc)) from None
        if decision.bytes_to_free > 0:
            log.info(
                "image GC: disk usage on the image filesystem is at %d%%, which is over the "
                "high threshold (%d%%); trying to free %d bytes down to the low threshold (%d%%)",
                decision.usage_percent,
                self.policy.high_threshold_percent,
                decision.bytes_to_free,
                self.policy.low_threshold_percent,
            )
            gone = set(old)
            rest = [(i, r) for i, r in order if i not in gone]
            await self._free(rest, decision.bytes_to_free, now)

    async def delete_unused(self) -> None:
        """Eviction's reclaim: every unused image past the minimum age."""
        _, in_use, protected = await self.detect()
        order = iplan.eviction_order(self.records, in_use, protected)
        candidates = iplan.free_space_candidates(order, self.policy, self.wall_clock())
        errors = await self._remove((i for i, _ in candidates), SPACE)
        if errors:
            raise GcError("; ".join(errors))

    async def _free(
        self, order: list[tuple[str, iplan.ImageRecord]], wanted: int, now: float
    ) -> None:
        freed = 0
        errors: list[str] = []
        for image_id, size in iplan.free_space_candidates(order, self.policy, now):
            if freed >= wanted:
                break
            failed = await self._remove([image_id], SPACE)
            errors += failed
            if not failed:
                freed += size
        if errors:
            raise GcError(iplan.deletion_errors_message(wanted, freed, errors))
        if freed < wanted:
            raise NotEnoughFreed(iplan.not_enough_freed_message(wanted, freed))

    async def _remove(self, ids: Iterable[str], reason: str) -> list[str]:
        errors: list[str] = []
        for image_id in ids:
            try:
                await self.images.remove_image(image_id)
            except CriError as exc:
                errors.append(f"failed to remove image {image_id}: {exc}")
                continue
            log.info("image GC: removed image %s", image_id)
            if self.on_removed is not None:
                self.on_removed(reason)
            self.records.pop(image_id, None)
            self.removed.append(image_id)
            del self.removed[:-100]
        return errors


class NotEnoughFreed(GcError):
    """The space pass found too little to remove (``FreeDiskSpaceFailed``)."""


@attrs.frozen
class GarbageCollectors:
    """Both collectors; the eviction manager's node-level reclaim (``NodeReclaimer``)."""

    containers: ContainerCollector
    images: ImageCollector

    async def delete_unused_containers(self) -> None:
        await self.containers.collect(evict_non_deleted=True)

    async def delete_unused_images(self) -> None:
        await self.images.delete_unused()
