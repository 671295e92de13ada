"""Garbage collectors: dead containers, sandboxes and pod log directories; unused images.

Upstream runs container GC every minute and image GC every 5 minutes (StartGarbageCollection),
and the eviction manager calls both as node-level reclaim under disk pressure. Here the
decisions are pure (``containers.plan``; ``images`` records, order, age and space
decisions, event texts) and the collectors apply them through the CRI.

``run.run_gc`` runs the rest: the two periodic loops in the collectors' nursery (inputs:
ListContainers / ListPodSandbox / ListImages / ImageFsInfo from the runtime, the pod
workers' "content removable" and "runtime removable" answers per pod UID, sources-ready,
the pod logs directory), applying a plan (StopContainer for unknown-state containers,
RemoveContainer, StopPodSandbox + RemovePodSandbox, rmtree of log directories off the
event loop, RemoveImage), and the events ContainerGCFailed, ImageGCFailed,
FreeDiskSpaceFailed and InvalidDiskCapacity through the recorder.
"""

from .collector import GarbageCollectors
from .logs import LEGACY_CONTAINER_LOGS_DIR, legacy_log_symlink
from .run import GcParts, image_gc_policy, run_gc

__all__ = [
    "LEGACY_CONTAINER_LOGS_DIR",
    "GarbageCollectors",
    "GcParts",
    "image_gc_policy",
    "legacy_log_symlink",
    "run_gc",
]
