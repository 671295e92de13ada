"""The usage figures eviction and garbage collection read: a typed subset of stats/v1alpha1.

``/stats/summary`` (``provider.SummaryProvider``) serves the same figures as JSON; this is
the shape decisions take, so they never index dictionaries. The summary provider makes
them directly for the eviction manager (``SummaryProvider.usage``); ``from_json`` reads
that JSON (upstream's field names) into them, for the image filesystem and as the
reference the direct figures are tested against. Times are seconds since the epoch;
every figure is optional, as in upstream's schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from kubelet.goformat import parse_time

__all__ = [
    "ContainerUsage",
    "FsUsage",
    "MemoryUsage",
    "NodeUsage",
    "PodUsage",
    "Summary",
    "VolumeUsage",
    "from_json",
]

SYSTEM_CONTAINER_PODS = "pods"


@attrs.frozen(kw_only=True)
class FsUsage:
    time: float | None = None
    available: int | None = None
    capacity: int | None = None
    used: int | None = None
    inodes_free: int | None = None
    inodes: int | None = None
    inodes_used: int | None = None


@attrs.frozen(kw_only=True)
class MemoryUsage:
    time: float | None = None
    available: int | None = None
    usage: int | None = None
    working_set: int | None = None


@attrs.frozen(kw_only=True)
class ContainerUsage:
    name: str
    memory: MemoryUsage | None = None
    rootfs: FsUsage | None = None
    logs: FsUsage | None = None


@attrs.frozen(kw_only=True)
class VolumeUsage:
    name: str
    fs: FsUsage


@attrs.frozen(kw_only=True)
class PodUsage:
    uid: str
    name: str = ""
    namespace: str = ""
    memory: MemoryUsage | None = None
    containers: tuple[ContainerUsage, ...] = ()
    volumes: tuple[VolumeUsage, ...] = ()
    ephemeral_storage: FsUsage | None = None
    process_count: int | None = None


@attrs.frozen(kw_only=True)
class NodeUsage:
    memory: MemoryUsage | None = None
    pods_memory: MemoryUsage | None = None
    """the "pods" system container: what allocatableMemory.available is measured on"""
    fs: FsUsage | None = None
    image_fs: FsUsage | None = None
    container_fs: FsUsage | None = None
    rlimit_time: float | None = None
    max_pid: int | None = None
    num_processes: int | None = None


@attrs.frozen(kw_only=True)
class Summary:
    node: NodeUsage = attrs.field(factory=NodeUsage)
    pods: tuple[PodUsage, ...] = ()

    def pod(self, uid: str) -> PodUsage | None:
        return next((p for p in self.pods if p.uid == uid), None)


Json = Mapping[str, Any]


def _time(stamp: Any) -> float | None:
    if not isinstance(stamp, str):
        return None
    return parse_time(stamp)


def _int(obj: Json, key: str) -> int | None:
    value = obj.get(key)
    if type(value) is int:  # the usual case, without isinstance's two checks
        return value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_mapping(obj: Any) -> bool:
    """``isinstance(obj, Mapping)``, quick for the dicts a summary is made of (the ABC
    check is most of ``from_json``'s time over 500 pods)."""
    return type(obj) is dict or isinstance(obj, Mapping)


def _fs(obj: Any) -> FsUsage | None:
    if not _is_mapping(obj):
        return None
    return FsUsage(
        time=_time(obj.get("time")),
        available=_int(obj, "availableBytes"),
        capacity=_int(obj, "capacityBytes"),
        used=_int(obj, "usedBytes"),
        inodes_free=_int(obj, "inodesFree"),
        inodes=_int(obj, "inodes"),
        inodes_used=_int(obj, "inodesUsed"),
    )


def _memory(obj: Any) -> MemoryUsage | None:
    if not _is_mapping(obj):
        return None
    return MemoryUsage(
        time=_time(obj.get("time")),
        available=_int(obj, "availableBytes"),
        usage=_int(obj, "usageBytes"),
        working_set=_int(obj, "workingSetBytes"),
    )


def _container(obj: Json) -> ContainerUsage:
    return ContainerUsage(
        name=str(obj.get("name", "")),
        memory=_memory(obj.get("memory")),
        rootfs=_fs(obj.get("rootfs")),
        logs=_fs(obj.get("logs")),
    )


def _pod(obj: Json) -> PodUsage:
    ref = obj.get("podRef") or {}
    volumes = tuple(
        VolumeUsage(name=str(v.get("name", "")), fs=_fs(v) or FsUsage())
        for v in obj.get("volume") or ()
        if _is_mapping(v)
    )
    process = obj.get("process_stats") or {}
    return PodUsage(
        uid=str(ref.get("uid", "")),
        name=str(ref.get("name", "")),
        namespace=str(ref.get("namespace", "")),
        memory=_memory(obj.get("memory")),
        containers=tuple(_container(c) for c in obj.get("containers") or () if c),
        volumes=volumes,
        ephemeral_storage=_fs(obj.get("ephemeral-storage")),
        process_count=_int(process, "process_count") if _is_mapping(process) else None,
    )


def from_json(summary: Json) -> Summary:
    """A ``/stats/summary`` document (stats/v1alpha1 field names) as typed figures."""
    return Summary(node=_node(summary), pods=tuple(_pod(p) for p in _pod_rows(summary)))


def _pod_rows(summary: Json) -> list[Json]:
    return [p for p in summary.get("pods") or () if _is_mapping(p)]


def _node(summary: Json) -> NodeUsage:
    node = summary.get("node") or {}
    pods_memory = None
    for sc in node.get("systemContainers") or ():
        if _is_mapping(sc) and sc.get("name") == SYSTEM_CONTAINER_PODS:
            pods_memory = _memory(sc.get("memory"))
    runtime = node.get("runtime") or {}
    rlimit = node.get("rlimit") or {}
    return NodeUsage(
        memory=_memory(node.get("memory")),
        pods_memory=pods_memory,
        fs=_fs(node.get("fs")),
        image_fs=_fs(runtime.get("imageFs")),
        container_fs=_fs(runtime.get("containerFs")),
        rlimit_time=_time(rlimit.get("time")),
        max_pid=_int(rlimit, "maxpid"),
        num_processes=_int(rlimit, "curproc"),
    )
