"""``kubelet_volume_stats_*``: the figures of the volumes pods have through a claim.

Upstream's volume stats collector, on the kubelet's ``/metrics``: one sample per
PersistentVolumeClaim a pod mounts (labels ``namespace`` and ``persistentvolumeclaim``),
from the figures the stats summary last measured (a scrape measures nothing): a CSI
volume's as its driver reported them (NodeGetVolumeStats), another's from its walk and
the statvfs of its filesystem. A claim mounted by several pods is reported once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kubelet.api import Pod
from kubelet.stats import PodVolume, VolumeUsageCache

from .hoststats import FsSample, HostStats

_METRICS = (
    ("capacity_bytes", "Capacity in bytes of the volume"),
    ("available_bytes", "Number of available bytes in the volume"),
    ("used_bytes", "Number of used bytes in the volume"),
    ("inodes", "Maximum number of inodes in the volume"),
    ("inodes_free", "Number of free inodes in the volume"),
    ("inodes_used", "Number of used inodes in the volume"),
)


def claims_of(pod: Pod) -> dict[str, str]:
    """volume name → claim name, for the pod's persistentVolumeClaim volumes."""
    out = {}
    for volume in pod.spec.volumes:
        claim = volume.persistent_volume_claim or {}
        if claim.get("claimName"):
            out[volume.name] = str(claim["claimName"])
    return out


def _figures(volume: PodVolume, host: HostStats) -> tuple[int, int, int, int, int, int] | None:
    r = volume.reported
    if r is not None:
        return r.capacity, r.available, r.used, r.inodes, r.inodes_free, r.inodes_used
    fs: FsSample | None = host.filesystem(volume.path)
    if fs is None:
        return None
    used, inodes_used = volume.usage.bytes, volume.usage.inodes
    return fs.capacity, fs.available, used, fs.inodes, fs.inodes_free, inodes_used


class VolumeStatsCollector(Collector):
    def __init__(
        self, cache: VolumeUsageCache, host: HostStats, pods: Callable[[], Iterable[Pod]]
    ) -> None:
        self.cache = cache
        self.host = host
        self.pods = pods

    def collect(self) -> Iterator[Any]:
        families = [
            GaugeMetricFamily(
                f"kubelet_volume_stats_{name}",
                f"[ALPHA] {text}",
                labels=["namespace", "persistentvolumeclaim"],
            )
            for name, text in _METRICS
        ]
        seen: set[tuple[str, str]] = set()
        for pod in self.pods():
            claims = claims_of(pod)
            if not claims:
                continue
            for volume in self.cache.last(pod.uid):
                claim = claims.get(volume.name)
                key = (pod.metadata.namespace, claim or "")
                if claim is None or key in seen:
                    continue
                figures = _figures(volume, self.host)
                if figures is None:
                    continue
                seen.add(key)
                for family, value in zip(families, figures, strict=True):
                    family.add_metric(list(key), float(value))
        yield from families


def register_volume_stats(
    registry: CollectorRegistry,
    cache: VolumeUsageCache,
    host: HostStats,
    pods: Callable[[], Iterable[Pod]],
) -> None:
    registry.register(VolumeStatsCollector(cache, host, pods))
