"""The garbage-collector component: containers every minute, images every five (upstream's).

``run_gc`` is the entry; it hands back ``GarbageCollectors``, which the eviction
manager uses as its node-level reclaim. ``image_gc_policy`` reads the configuration at
start-up (ConfigError names the field). Failures become node Warning events as
upstream records them: ``ContainerGCFailed`` at every failure, ``ImageGCFailed`` from the
second failure in a row, ``FreeDiskSpaceFailed`` when too little could be freed,
``InvalidDiskCapacity`` when the image filesystem reports no capacity.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

import attrs
import trio

from kubelet.config import Options
from kubelet.cri import CriError, ImageClient, RuntimeClient
from kubelet.errors import ConfigError, Problem
from kubelet.events import EventRecorder, ObjectRef, node_ref
from kubelet.goformat import format_duration

from . import containers as cplan
from . import images as iplan
from .collector import (
    ContainerCollector,
    GarbageCollectors,
    ImageCollector,
    ImageFs,
    NotEnoughFreed,
    PodStates,
)
from .logs import LEGACY_CONTAINER_LOGS_DIR

__all__ = ["GcParts", "container_gc_policy", "image_gc_policy", "run_gc"]

log = logging.getLogger(__name__)

DEFAULT_SANDBOX_IMAGE = "registry.k8s.io/pause:3.9"
"""The pause image image GC keeps besides what the runtime pins or names as its own
sandbox image. Upstream (1.35+) has no setting for it (``--pod-infra-container-image``
was removed) and relies on the runtime pinning its sandbox image."""

WARNING = "Warning"


def image_gc_policy(options: Options) -> iplan.ImageGCPolicy:
    """The image GC settings, checked as upstream's ``NewImageGCManager`` does."""
    cfg = options.config
    policy = iplan.ImageGCPolicy(
        high_threshold_percent=cfg.image_gc_high_threshold_percent,
        low_threshold_percent=cfg.image_gc_low_threshold_percent,
        min_age=cfg.image_minimum_gc_age,
        max_age=cfg.image_maximum_gc_age,
    )
    try:
        policy.validate()
    except ValueError as exc:
        field = (
            "imageGCLowThresholdPercent"
            if "LowThreshold" in str(exc)
            else ("imageGCHighThresholdPercent")
        )
        raise ConfigError(Problem(options.config_file, field, str(exc))) from None
    return policy


def container_gc_policy(options: Options) -> cplan.GCPolicy:
    """The deprecated container GC flags, checked as upstream's ``NewContainerGC``."""
    min_age = options.minimum_container_ttl_duration
    if min_age < 0:
        raise ConfigError(
            Problem(
                "--minimum-container-ttl-duration",
                "",
                f"invalid minimum garbage collection age: {format_duration(min_age)}",
            )
        )
    return cplan.GCPolicy(
        min_age=min_age,
        max_per_pod_container=options.maximum_dead_containers_per_container,
        max_containers=options.maximum_dead_containers,
    )


async def sandbox_images(runtime: RuntimeClient, configured: str) -> tuple[str, ...]:
    """The sandbox image(s) to keep: ``configured`` and the runtime's own setting
    (containerd's verbose status names its ``sandboxImage``)."""
    found = [configured] if configured else []
    try:
        status = await runtime.status(verbose=True)
    except CriError:
        return tuple(found)
    try:
        config = json.loads(status.info.get("config", "{}"))
    except ValueError:
        return tuple(found)
    image = config.get("sandboxImage") if isinstance(config, dict) else None
    if isinstance(image, str) and image:
        found.append(image)
    return tuple(found)


@attrs.define
class GcLoops:
    """The two periodic collections and how their failures are reported."""

    collectors: GarbageCollectors
    recorder: EventRecorder
    node: ObjectRef
    image_failures: iplan.FailureTracker = attrs.field(factory=iplan.FailureTracker)

    async def containers(self) -> None:
        """Every minute, from the start."""
        while True:
            try:
                await self.collectors.containers.collect()
            except Exception as exc:
                log.error("container garbage collection failed: %s", exc)
                self.recorder.record(self.node, WARNING, iplan.CONTAINER_GC_FAILED, str(exc))
            await trio.sleep(iplan.CONTAINER_GC_PERIOD)

    async def images(self) -> None:
        """Every five minutes, from the start."""
        while True:
            await self._images_once()
            await trio.sleep(iplan.PERIOD)

    async def _images_once(self) -> None:
        try:
            await self.collectors.images.collect()
        except Exception as exc:
            message = str(exc)
            if isinstance(exc, NotEnoughFreed):
                self.recorder.record(self.node, WARNING, iplan.FREE_DISK_SPACE_FAILED, message)
            elif message.startswith("invalid capacity"):
                self.recorder.record(self.node, WARNING, iplan.INVALID_DISK_CAPACITY, message)
            if self.image_failures.failed():
                log.error("image garbage collection failed multiple times in a row: %s", exc)
                self.recorder.record(self.node, WARNING, iplan.IMAGE_GC_FAILED, message)
            else:
                log.error("image garbage collection failed once: %s", exc)
        else:
            if self.image_failures.succeeded():
                log.info("image garbage collection succeeded again")


@attrs.frozen(kw_only=True)
class GcParts:
    """What the garbage collectors work over (``agent`` builds it)."""

    options: Options
    node_name: str
    runtime: RuntimeClient
    images: ImageClient
    pods: PodStates
    """whether a pod's dead containers may go"""
    sources_ready: Callable[[], bool]
    image_fs: ImageFs
    recorder: EventRecorder
    wall_clock: Callable[[], float]
    containers_log_dir: str = LEGACY_CONTAINER_LOGS_DIR
    on_image_removed: Callable[[str], None] | None = None
    """called per image removed, with its reason (metrics)"""
    before_remove: Callable[[str], Awaitable[None]] | None = None
    """the container manager's post-stop hook, before a dead container is removed"""


async def run_gc(
    parts: GcParts,
    *,
    task_status: trio.TaskStatus[GarbageCollectors] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Collect dead containers and unused images periodically; until cancelled."""
    p = parts
    policy = image_gc_policy(p.options)
    containers = ContainerCollector(
        p.runtime,
        p.pods,
        p.sources_ready,
        p.options.config.pod_logs_dir,
        p.wall_clock,
        policy=container_gc_policy(p.options),
        containers_log_dir=p.containers_log_dir,
        before_remove=p.before_remove,
    )
    image_collector = ImageCollector(
        p.runtime,
        p.images,
        p.image_fs,
        p.wall_clock,
        policy,
        await sandbox_images(p.runtime, DEFAULT_SANDBOX_IMAGE),
        began=p.wall_clock(),
        on_removed=p.on_image_removed,
    )
    collectors = GarbageCollectors(containers, image_collector)
    loops = GcLoops(collectors, p.recorder, node_ref(p.node_name))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loops.containers)
        if policy.enabled:
            nursery.start_soon(loops.images)
        task_status.started(collectors)
