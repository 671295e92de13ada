"""Builders for the eviction and GC tests: pods with requests, usage summaries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubelet.api import (
    Container,
    ObjectMeta,
    Pod,
    PodSpec,
    Quantity,
    ResourceRequirements,
    Volume,
    parse_quantity,
)
from kubelet.stats import (
    ContainerUsage,
    FsUsage,
    MemoryUsage,
    NodeUsage,
    PodUsage,
    Summary,
    VolumeUsage,
)

Mi = 1024 * 1024
Gi = 1024 * Mi


def b(text: str) -> int:
    """Bytes of a quantity string ("100Mi")."""
    return parse_quantity(text).value()


def resources(
    requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None
) -> ResourceRequirements:
    return ResourceRequirements(
        requests={k: Quantity(v) for k, v in (requests or {}).items()},
        limits={k: Quantity(v) for k, v in (limits or {}).items()},
    )


def pod(
    name: str,
    priority: int | None = 0,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    *,
    volumes: Sequence[Volume] = (),
    annotations: Mapping[str, str] | None = None,
    grace: int | None = None,
    containers: Sequence[Container] | None = None,
    generation: int | None = None,
) -> Pod:
    """A one-container pod named ``name`` (container too), UID ``uid-<name>``."""
    if containers is None:
        containers = (Container(name=name, resources=resources(requests, limits)),)
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="default",
            uid=f"uid-{name}",
            annotations=dict(annotations or {}),
            generation=generation,
        ),
        spec=PodSpec(
            containers=tuple(containers),
            volumes=tuple(volumes),
            priority=priority,
            termination_grace_period_seconds=grace,
        ),
    )


def empty_dir(name: str = "local-volume", size_limit: str | None = None) -> Volume:
    spec: dict[str, str] = {}
    if size_limit is not None:
        spec["sizeLimit"] = size_limit
    return Volume(name=name, empty_dir=spec)


def memory_usage(p: Pod, working_set: str, container_ws: str | None = None) -> PodUsage:
    """Pod-level working set; each container reports ``container_ws`` when given."""
    containers = tuple(
        ContainerUsage(
            name=c.name,
            memory=MemoryUsage(working_set=b(container_ws)) if container_ws else None,
        )
        for c in p.spec.containers
    )
    return PodUsage(
        uid=p.uid,
        name=p.metadata.name,
        namespace=p.metadata.namespace,
        memory=MemoryUsage(working_set=b(working_set)),
        containers=containers,
    )


def disk_usage(
    p: Pod,
    rootfs: str,
    logs: str,
    per_volume: str,
    *,
    rootfs_inodes: int = 0,
    logs_inodes: int = 0,
    volume_inodes: int = 0,
    ephemeral: str | None = None,
) -> PodUsage:
    """Each container uses ``rootfs`` + ``logs``, each local volume ``per_volume``."""
    containers = tuple(
        ContainerUsage(
            name=c.name,
            rootfs=FsUsage(used=b(rootfs), inodes_used=rootfs_inodes),
            logs=FsUsage(used=b(logs), inodes_used=logs_inodes),
        )
        for c in p.spec.containers
    )
    volumes = tuple(
        VolumeUsage(name=v.name, fs=FsUsage(used=b(per_volume), inodes_used=volume_inodes))
        for v in p.spec.volumes
    )
    return PodUsage(
        uid=p.uid,
        name=p.metadata.name,
        namespace=p.metadata.namespace,
        containers=containers,
        volumes=volumes,
        ephemeral_storage=FsUsage(used=b(ephemeral)) if ephemeral else None,
    )


def memory_summary(
    available: str, pods: Sequence[PodUsage] = (), *, time: float | None = None
) -> Summary:
    """Node memory ``available`` out of twice that (as upstream's makeMemoryStats)."""
    m = MemoryUsage(time=time, available=b(available), working_set=b(available))
    return Summary(node=NodeUsage(memory=m, pods_memory=m), pods=tuple(pods))


def disk_summary(
    nodefs: str,
    imagefs: str,
    containerfs: str | None = None,
    pods: Sequence[PodUsage] = (),
    *,
    time: float | None = None,
    nodefs_inodes: tuple[int, int] | None = None,
) -> Summary:
    """Each filesystem ``available`` out of twice that (as upstream's makeDiskStats)."""

    def fs(available: str, inodes: tuple[int, int] | None = None) -> FsUsage:
        free, total = inodes if inodes else (None, None)
        return FsUsage(
            time=time,
            available=b(available),
            capacity=2 * b(available),
            inodes_free=free,
            inodes=total,
        )

    return Summary(
        node=NodeUsage(
            fs=fs(nodefs, nodefs_inodes),
            image_fs=fs(imagefs),
            container_fs=fs(containerfs or imagefs),
        ),
        pods=tuple(pods),
    )


def stats_of(usages: Sequence[PodUsage]) -> dict[str, PodUsage]:
    return {u.uid: u for u in usages}
