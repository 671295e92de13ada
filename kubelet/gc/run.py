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
from collections.abc import Callable

import attrs
import trio

from kubelet.config import Options
from kubelet.config.duration import format_duration
from kubelet.cri import CriError, ImageClient, RuntimeClient
from kubelet.errors import ConfigError, Problem
from kubelet.events.recorder import EventRecorder, ObjectRef, node_ref

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

__all__ = ["container_gc_policy", "image_gc_policy", "run_gc"]

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


async def run_gc(
    options: Options,
    node_name: str,
    runtime: RuntimeClient,
    images: ImageClient,
    pods: PodStates,
    sources_ready: Callable[[], bool],
    image_fs: ImageFs,
    recorder: EventRecorder,
    wall_clock: Callable[[], float],
    *,
    containers_log_dir: str = LEGACY_CONTAINER_LOGS_DIR,
    on_image_removed: Callable[[str], None] | None = None,
    task_status: trio.TaskStatus[GarbageCollectors] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Collect dead containers and unused images periodically; until cancelled.
    ``on_image_removed`` is called per image removed, with its reason (metrics)."""
    node = node_ref(node_name)
    policy = image_gc_policy(options)
    container_policy = container_gc_policy(options)
    containers = ContainerCollector(
        runtime, pods, sources_ready, options.config.pod_logs_dir, wall_clock,
        policy=container_policy, containers_log_dir=containers_log_dir,
    )  # fmt: skip
    image_collector = ImageCollector(
        runtime,
        images,
        image_fs,
        wall_clock,
        policy,
        await sandbox_images(runtime, DEFAULT_SANDBOX_IMAGE),
        began=wall_clock(),
        on_removed=on_image_removed,
    )
    collectors = GarbageCollectors(containers, image_collector)
    loops = GcLoops(collectors, recorder, node)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loops.containers)
        if policy.enabled:
            nursery.start_soon(loops.images)
        task_status.started(collectors)
