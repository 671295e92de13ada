"""Pod volume usage, measured off the hot path and kept for a period (upstream's
``volumeStatsAggPeriod``).

A pod's volumes live in ``<root-dir>/pods/<uid>/volumes/<plugin>/<name>``. Each is walked
(``fs.directory_usage``: allocated bytes and inodes, bounded, never leaving its
filesystem) in a worker thread; the figures are reused until they are a period old, so
neither a summary request nor the eviction manager's 10 s pass walks a big volume more
than once a period. A period of 0 or less turns the measuring off: pods then report no
``volume`` figures and their ephemeral storage counts containers only, as upstream.
The volume's filesystem (statvfs) gives capacity and available, as upstream's
``MetricsDu`` does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import attrs

from .fs import DirUsage, directory_usage_async

__all__ = ["AGG_PERIOD", "PodVolume", "VolumeUsageCache"]

AGG_PERIOD = 60.0
"""seconds a measurement is reused (``volumeStatsAggPeriod``'s default, 1m)"""


@attrs.frozen
class PodVolume:
    name: str
    plugin: str
    """the plugin directory, e.g. ``kubernetes.io~empty-dir``"""
    path: str
    usage: DirUsage


def _volume_dirs(root: Path) -> list[tuple[str, str, Path]]:
    out: list[tuple[str, str, Path]] = []
    try:
        plugins = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return out
    for plugin in plugins:
        try:
            volumes = sorted(os.scandir(plugin.path), key=lambda e: e.name)
        except OSError:
            continue
        out += [(v.name, plugin.name, Path(v.path)) for v in volumes if v.is_dir()]
    return out


@attrs.define
class VolumeUsageCache:
    root_dir: str
    clock: Callable[[], float]
    period: float = AGG_PERIOD
    _measured: dict[str, tuple[float, list[PodVolume]]] = attrs.field(factory=dict)

    async def pod_volumes(self, uid: str) -> list[PodVolume]:
        """The volumes of pod ``uid`` with their usage (at most a period old); none at all
        when the period is 0 or negative (measuring off, as upstream's analyzer)."""
        if self.period <= 0:
            return []
        now = self.clock()
        cached = self._measured.get(uid)
        if cached is not None and now - cached[0] < self.period:
            return cached[1]
        root = Path(self.root_dir) / "pods" / uid / "volumes"
        volumes = [
            PodVolume(name, plugin, str(path), await directory_usage_async(path))
            for name, plugin, path in _volume_dirs(root)
        ]
        self._measured[uid] = (now, volumes)
        return volumes

    def keep(self, uids: set[str]) -> None:
        """Forget pods that are gone."""
        self._measured = {k: v for k, v in self._measured.items() if k in uids}
