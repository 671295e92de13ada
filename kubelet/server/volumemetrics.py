"""``kubelet_volume_stats_*`` on ``/metrics``: the figures of every claim volume.

Upstream's volume stats collector reports, per persistentVolumeClaim (or ephemeral)
volume, its capacity, available and used bytes and its inodes, labelled ``namespace``
and ``persistentvolumeclaim``; a claim two pods use is reported once. The figures are
the ones ``/stats/summary`` gives the volume (with its ``pvcRef``).
``kubelet_volume_stats_health_status_abnormal`` (1 abnormal, 0 healthy) is there for a
claim whose row has ``volumeHealthStats``: its CSI driver reports volume conditions and
the CSIVolumeHealth gate is on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from kubelet.metrics import exposition

Json = dict[str, Any]

_FAMILIES = (
    ("capacity_bytes", "capacityBytes", "Capacity in bytes of the volume"),
    ("available_bytes", "availableBytes", "Number of available bytes in the volume"),
    ("used_bytes", "usedBytes", "Number of used bytes in the volume"),
    ("inodes", "inodes", "Maximum number of inodes in the volume"),
    ("inodes_free", "inodesFree", "Number of free inodes in the volume"),
    ("inodes_used", "inodesUsed", "Number of used inodes in the volume"),
)


class _VolumeStats(Collector):
    def __init__(self, rows: Iterable[Json]) -> None:
        self.rows = list(rows)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = [
            (GaugeMetricFamily(f"kubelet_volume_stats_{name}", f"[ALPHA] {text}",
                               labels=["namespace", "persistentvolumeclaim"]), key)
            for name, key, text in _FAMILIES
        ]  # fmt: skip
        health = GaugeMetricFamily(
            "kubelet_volume_stats_health_status_abnormal",
            "[ALPHA] Abnormal volume health status. The count is either 1 or 0. 1 indicates "
            "the volume is unhealthy, 0 indicates volume is healthy",
            labels=["namespace", "persistentvolumeclaim"],
        )
        seen: set[tuple[str, str]] = set()
        for row in self.rows:
            ref = row.get("pvcRef") or {}
            labels = (str(ref.get("namespace", "")), str(ref.get("name", "")))
            if not ref or labels in seen:
                continue
            seen.add(labels)
            for family, key in families:
                if key in row:
                    family.add_metric(list(labels), float(row[key]))
            condition = row.get("volumeHealthStats")
            if isinstance(condition, dict):
                health.add_metric(list(labels), 1.0 if condition.get("abnormal") else 0.0)
        for family, _ in families:
            yield family
        yield health


def volume_stats_text(volume_rows: Iterable[Json]) -> bytes:
    """The exposition text of the claim volumes among ``volume_rows`` (summary rows)."""
    registry = CollectorRegistry()
    registry.register(_VolumeStats(volume_rows))
    return exposition(registry, bare=())
