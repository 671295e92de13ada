"""Which pod goes first: upstream's ranking per starved resource (eviction/helpers.go).

Comparators apply in order, the first that tells two pods apart wins:

- memory: usage above the memory request first, then lower priority first, then the
  larger usage − request first;
- disk (bytes or inodes): the same with the pod's disk usage, measured over the
  filesystems the signal is about (see ``disk_usage_kinds``);
- pid: lower priority first, then more processes first.

A pod without usage figures is ranked before those with (it may be the culprit), and
with no figures a pod's usage is 0. Python's sort is stable, so pods the comparators
cannot tell apart keep the caller's order (upstream's sort.Sort does not promise it).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

from kubelet.api import Pod, Volume
from kubelet.cgroups import resource_request
from kubelet.stats import FsUsage, PodUsage

from .thresholds import EPHEMERAL_STORAGE, INODES, MEMORY, Signal

__all__ = [
    "FsKind",
    "StatsOf",
    "disk_usage",
    "disk_usage_kinds",
    "local_volume_names",
    "rank",
]

StatsOf = Mapping[str, PodUsage]
"""pod usage by pod UID"""

Cmp = Callable[[Pod, Pod], int]


class FsKind(enum.Enum):
    """Which part of a pod's disk usage counts for a signal."""

    ROOT = "root"
    """the containers' writable layers"""
    LOGS = "logs"
    LOCAL_VOLUMES = "localVolumeSource"
    IMAGES = "images"
    """image layers: named by upstream's tables, counted nowhere per pod"""


ALL_FS = (FsKind.IMAGES, FsKind.ROOT, FsKind.LOGS, FsKind.LOCAL_VOLUMES)


def disk_usage_kinds(
    signal: Signal, dedicated_image_fs: bool, split_container_fs: bool
) -> tuple[FsKind, ...]:
    """The fs kinds a disk signal measures (``buildSignalToRankFunc``)."""
    on_node = signal in (Signal.NODEFS_AVAILABLE, Signal.NODEFS_INODES_FREE)
    on_image = signal in (Signal.IMAGEFS_AVAILABLE, Signal.IMAGEFS_INODES_FREE)
    on_container = signal in (Signal.CONTAINERFS_AVAILABLE, Signal.CONTAINERFS_INODES_FREE)
    if dedicated_image_fs and not split_container_fs:
        if on_node:
            return (FsKind.LOGS, FsKind.LOCAL_VOLUMES)
        if on_image or on_container:
            return (FsKind.ROOT, FsKind.IMAGES)
    elif dedicated_image_fs and split_container_fs:
        if on_node or on_container:
            return (FsKind.LOGS, FsKind.LOCAL_VOLUMES, FsKind.ROOT)
        if on_image:
            return (FsKind.IMAGES,)
    return ALL_FS


def _is_local_ephemeral(v: Volume) -> bool:
    if v.git_repo is not None or v.config_map is not None:
        return True
    return v.empty_dir is not None and not v.empty_dir.get("medium")


def local_volume_names(pod: Pod) -> tuple[str, ...]:
    """Volumes whose usage counts as the pod's local disk (hostPath, emptyDir on disk, …)."""
    return tuple(
        v.name for v in pod.spec.volumes if v.host_path is not None or _is_local_ephemeral(v)
    )


def _bytes(fs: FsUsage | None) -> int:
    return fs.used or 0 if fs is not None else 0


def _inodes(fs: FsUsage | None) -> int:
    return fs.inodes_used or 0 if fs is not None else 0


def disk_usage(pod: Pod, stats: PodUsage, kinds: Sequence[FsKind]) -> dict[str, int]:
    """The pod's ``ephemeral-storage`` bytes and ``inodes`` over ``kinds``."""
    used = inodes = 0
    for c in stats.containers:
        if FsKind.ROOT in kinds:
            used += _bytes(c.rootfs)
            inodes += _inodes(c.rootfs)
        if FsKind.LOGS in kinds:
            used += _bytes(c.logs)
            inodes += _inodes(c.logs)
    if FsKind.LOCAL_VOLUMES in kinds:
        volumes = {v.name: v.fs for v in stats.volumes}
        for name in local_volume_names(pod):
            if name in volumes:
                used += _bytes(volumes[name])
                inodes += _inodes(volumes[name])
    return {EPHEMERAL_STORAGE: used, INODES: inodes}


def priority(pod: Pod) -> int:
    return pod.spec.priority if pod.spec.priority is not None else 0


def _cmp_bool(a: bool, b: bool) -> int:
    """True before False."""
    return 0 if a == b else (-1 if a else 1)


def _sign(x: int | Fraction) -> int:
    return (x > 0) - (x < 0)


def _by_priority(p1: Pod, p2: Pod) -> int:
    return _sign(priority(p1) - priority(p2))


def _with_stats(stats: StatsOf, measure: Callable[[Pod, PodUsage, Pod, PodUsage], int]) -> Cmp:
    def cmp(p1: Pod, p2: Pod) -> int:
        s1, s2 = stats.get(p1.uid), stats.get(p2.uid)
        if s1 is None or s2 is None:
            return _cmp_bool(s1 is None, s2 is None)
        return measure(p1, s1, p2, s2)

    return cmp


def _memory_used(s: PodUsage) -> int:
    return s.memory.working_set or 0 if s.memory is not None else 0


def _exceeds_memory(stats: StatsOf, pod_level: bool) -> Cmp:
    def measure(p1: Pod, s1: PodUsage, p2: Pod, s2: PodUsage) -> int:
        e1 = _memory_used(s1) > resource_request(p1, MEMORY, pod_level_resources=pod_level)
        e2 = _memory_used(s2) > resource_request(p2, MEMORY, pod_level_resources=pod_level)
        return _cmp_bool(e1, e2)

    return _with_stats(stats, measure)


def _memory(stats: StatsOf, pod_level: bool) -> Cmp:
    def measure(p1: Pod, s1: PodUsage, p2: Pod, s2: PodUsage) -> int:
        over1 = _memory_used(s1) - resource_request(p1, MEMORY, pod_level_resources=pod_level)
        over2 = _memory_used(s2) - resource_request(p2, MEMORY, pod_level_resources=pod_level)
        return _sign(over2 - over1)

    return _with_stats(stats, measure)


def _processes(stats: StatsOf) -> Cmp:
    def measure(p1: Pod, s1: PodUsage, p2: Pod, s2: PodUsage) -> int:
        return _sign((s2.process_count or 0) - (s1.process_count or 0))

    return _with_stats(stats, measure)


def _exceeds_disk(stats: StatsOf, kinds: Sequence[FsKind], resource: str, pod_level: bool) -> Cmp:
    def measure(p1: Pod, s1: PodUsage, p2: Pod, s2: PodUsage) -> int:
        r1 = resource_request(p1, resource, pod_level_resources=pod_level)
        r2 = resource_request(p2, resource, pod_level_resources=pod_level)
        e1 = disk_usage(p1, s1, kinds)[resource] > r1
        e2 = disk_usage(p2, s2, kinds)[resource] > r2
        return _cmp_bool(e1, e2)

    return _with_stats(stats, measure)


def _disk(stats: StatsOf, kinds: Sequence[FsKind], resource: str, pod_level: bool) -> Cmp:
    # Upstream subtracts the ephemeral-storage request for inodes too.
    def measure(p1: Pod, s1: PodUsage, p2: Pod, s2: PodUsage) -> int:
        r1 = resource_request(p1, EPHEMERAL_STORAGE, pod_level_resources=pod_level)
        r2 = resource_request(p2, EPHEMERAL_STORAGE, pod_level_resources=pod_level)
        over1 = disk_usage(p1, s1, kinds)[resource] - r1
        over2 = disk_usage(p2, s2, kinds)[resource] - r2
        return _sign(over2 - over1)

    return _with_stats(stats, measure)


def _ordered(pods: Sequence[Pod], *cmps: Cmp) -> list[Pod]:
    def combined(p1: Pod, p2: Pod) -> int:
        for cmp in cmps:
            result = cmp(p1, p2)
            if result:
                return result
        return 0

    return sorted(pods, key=functools.cmp_to_key(combined))


_MEMORY_SIGNALS = (Signal.MEMORY_AVAILABLE, Signal.ALLOCATABLE_MEMORY_AVAILABLE)
_INODE_SIGNALS = (
    Signal.NODEFS_INODES_FREE,
    Signal.IMAGEFS_INODES_FREE,
    Signal.CONTAINERFS_INODES_FREE,
)


def rank(
    signal: Signal,
    pods: Sequence[Pod],
    stats: StatsOf,
    *,
    dedicated_image_fs: bool = False,
    split_container_fs: bool = False,
    pod_level_resources: bool = True,
) -> list[Pod]:
    """``pods`` in the order they would be evicted for ``signal``."""
    if signal in _MEMORY_SIGNALS:
        return _ordered(
            pods,
            _exceeds_memory(stats, pod_level_resources),
            _by_priority,
            _memory(stats, pod_level_resources),
        )
    if signal is Signal.PID_AVAILABLE:
        return _ordered(pods, _by_priority, _processes(stats))
    kinds = disk_usage_kinds(signal, dedicated_image_fs, split_container_fs)
    resource = INODES if signal in _INODE_SIGNALS else EPHEMERAL_STORAGE
    return _ordered(
        pods,
        _exceeds_disk(stats, kinds, resource, pod_level_resources),
        _by_priority,
        _disk(stats, kinds, resource, pod_level_resources),
    )
