"""Pod volume usage, measured off the hot path and kept for a period (upstream's
``volumeStatsAggPeriod``).

A pod's volumes live in ``<root-dir>/pods/<uid>/volumes/<plugin>/<name>``. Each is walked
(``fs.TreeWalk``: allocated bytes and inodes, never leaving its filesystem, in bounded
memory whatever the tree) in a worker thread; the figures are reused until they are a
period old, so neither a summary request nor the eviction manager's 10 s pass walks a
big volume more than once a period. A period of 0 or less turns the measuring off: pods
then report no ``volume`` figures and their ephemeral storage counts containers only,
as upstream. The volume's filesystem (statvfs) gives capacity and available, as
upstream's ``MetricsDu`` does.

Anyone may ask for the figures (``/stats/summary`` on the read-only port), as often as
they like, so asking must not multiply the work: a pod is measured by one pass at a time
(the others get the figures it had, or wait for the pass when it has none yet), and the
walks share a few threads (``WALK_THREADS``). A pass walks a volume for at most
``max_entries`` entries or ``max_seconds`` (so the eviction manager's pass, which waits
for it, is held up little by any pod); a bigger tree is walked on by the next passes
from where it stopped, and the pod's figures count as stale until it ends, so every pass
(the eviction manager's, every 10 s) takes it further. Meanwhile a volume reports the
larger of its last whole figure and what the walk in progress has counted: never less
than a walk has seen, so an emptyDir over its ``sizeLimit`` is evicted as soon as that
much is seen, however many files come before its bytes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from . import fs
from .claimrecords import read_claim_records
from .fs import DirUsage, TreeWalk

T = TypeVar("T")

__all__ = [
    "AGG_PERIOD",
    "REPORTED_PLUGINS",
    "WALK_THREADS",
    "PodVolume",
    "ReportedUsage",
    "ReportedVolumes",
    "VolumeUsageCache",
]

AGG_PERIOD = 60.0
"""seconds a measurement is reused (``volumeStatsAggPeriod``'s default, 1m)"""

WALK_THREADS = 2
"""worker threads the volume walks of all pods use at once"""


REPORTED_PLUGINS = frozenset({"kubernetes.io~csi"})
"""plugin directories whose volumes are never walked: their driver reports their figures
(a CSI driver's NodeGetVolumeStats), and a walk would stop at the driver's mount anyway"""


@attrs.frozen
class ReportedUsage:
    """A volume's figures as its driver reports them (CSI NodeGetVolumeStats)."""

    capacity: int
    available: int
    used: int
    inodes: int = 0
    inodes_free: int = 0
    inodes_used: int = 0
    abnormal: bool | None = None
    """the driver's volume condition (gate CSIVolumeHealth; None: not reported)"""


ReportedVolumes = Callable[[str], Awaitable[Mapping[str, ReportedUsage]]]
"""pod uid → its driver-reported volumes' figures, by volume name"""


@attrs.frozen
class PodVolume:
    name: str
    plugin: str
    """the plugin directory, e.g. ``kubernetes.io~empty-dir``"""
    path: str
    usage: DirUsage
    pvc: tuple[str, str] | None = None
    """the claim of a persistentVolumeClaim or ephemeral volume: (name, namespace)"""
    reported: ReportedUsage | None = None
    """the driver's figures (capacity and available too), for a volume not walked"""


_Dir = tuple[str, str, Path, "tuple[str, str] | None"]
"""(volume name, plugin directory, path, its claim as (name, namespace) or None)"""


def _claim_volumes(pod_root: Path) -> list[_Dir]:
    """The pod's volumes: those under its ``volumes`` directory, then its claim volumes
    mounted from elsewhere (measured at the PersistentVolume's path, named by the pod's
    volume name). A claim whose volume lives under the pod (a CSI one) is that entry."""
    records = read_claim_records(str(pod_root))
    by_volume = {r.volume: (r.claim, r.namespace) for r in records.values()}
    dirs: list[_Dir] = [
        (name, plugin, path, by_volume.get(name))
        for name, plugin, path in _volume_dirs(pod_root / "volumes")
    ]
    inside = str(pod_root) + os.sep
    for record in records.values():
        if not record.path.startswith(inside) and os.path.isdir(record.path):
            claim = (record.claim, record.namespace)
            dirs.append((record.volume, record.plugin, Path(record.path), claim))
    return dirs


def _volume_dirs(root: Path) -> list[tuple[str, str, Path]]:
    """(name, plugin, path) of the volumes under a pod's ``volumes`` directory (the
    kubelet makes these two levels; the pod writes only below them)."""
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
class _Volume:
    walk: TreeWalk | None = None
    """the walk in progress (None: the last one ended)"""
    last: DirUsage | None = None
    """the figures of the last walk that ended"""
    ended: float = -math.inf
    """when it ended"""

    def usage(self) -> DirUsage:
        """What to report: the last whole figures, raised to what the walk in progress
        has counted (incomplete while it goes on)."""
        if self.walk is None:
            assert self.last is not None
            return self.last
        seen = self.walk.usage()
        if self.last is None:
            return seen
        return DirUsage(
            max(self.last.bytes, seen.bytes), max(self.last.inodes, seen.inodes), complete=False
        )


@attrs.define
class _Pod:
    measured: float = -math.inf
    """when the last pass began"""
    volumes: list[PodVolume] | None = None
    """the figures of the last pass (None: none ended yet)"""
    walks: dict[str, _Volume] = attrs.field(factory=dict)
    """by volume path"""
    running: trio.Event | None = None
    """set when the pass in progress ends"""

    def keep(self, paths: set[str]) -> None:
        """Forget the volumes not in ``paths``, closing their walks."""
        for path, volume in self.walks.items():
            if path not in paths and volume.walk is not None:
                volume.walk.close()
        self.walks = {k: v for k, v in self.walks.items() if k in paths}

    def fresh(self, now: float, period: float) -> bool:
        return (
            self.volumes is not None
            and now - self.measured < period
            and all(v.walk is None for v in self.walks.values())
        )


def _never_cancelled() -> None:
    """A walk on the event loop is cancelled between slices, never inside one."""


@attrs.define
class VolumeUsageCache:
    root_dir: str
    clock: Callable[[], float]
    period: float = AGG_PERIOD
    max_entries: int = fs.MAX_ENTRIES
    """entries of a volume one pass walks (the next pass goes on from there)"""
    max_seconds: float = fs.SLICE_SECONDS
    """time one pass walks a volume (the same)"""
    limiter: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(WALK_THREADS))
    in_threads: bool = True
    """walk in worker threads (False: on the event loop, for tests on a fake clock, where
    a worker thread looks like idleness and the clock would jump ahead)"""
    reported: ReportedVolumes | None = None
    """the figures of the volumes in ``REPORTED_PLUGINS`` (None: they are left out)"""
    _pods: dict[str, _Pod] = attrs.field(factory=dict)

    def last(self, uid: str) -> list[PodVolume]:
        """The pod's figures of the last pass, without measuring (metrics scrapes)."""
        pod = self._pods.get(uid)
        return list(pod.volumes or ()) if pod is not None else []

    async def pod_volumes(self, uid: str) -> list[PodVolume]:
        """The volumes of pod ``uid`` with their usage (at most a period old, or a walk
        in progress); none at all when the period is 0 or negative (measuring off, as
        upstream's analyzer)."""
        if self.period <= 0:
            return []
        pod = self._pods.setdefault(uid, _Pod())
        while True:
            if pod.fresh(self.clock(), self.period):
                assert pod.volumes is not None
                return pod.volumes
            if pod.running is None:
                return await self._pass(uid, pod)
            if pod.volumes is not None:
                return pod.volumes  # a pass is measuring: its previous figures meanwhile
            await pod.running.wait()

    async def _pass(self, uid: str, pod: _Pod) -> list[PodVolume]:
        """Measure the pod's volumes (one pass at a time per pod: callers check
        ``running`` first). Cancelled, it keeps what its walks counted."""
        pod.running = done = trio.Event()
        try:
            began = self.clock()
            root = Path(self.root_dir) / "pods" / uid
            dirs = await self._run(_claim_volumes, root)
            volumes = await self._reported(uid, dirs)
            for name, plugin, path, pvc in dirs:
                if plugin in REPORTED_PLUGINS:
                    continue
                volume = pod.walks.setdefault(str(path), _Volume())
                await self._measure(volume, str(path), began)
                volumes.append(PodVolume(name, plugin, str(path), volume.usage(), pvc))
            pod.keep({v.path for v in volumes})
            pod.measured, pod.volumes = began, volumes
            return volumes
        finally:
            pod.running = None
            done.set()
            if self._pods.get(uid) is not pod:  # forgotten meanwhile
                pod.keep(set())

    async def _reported(self, uid: str, dirs: list[_Dir]) -> list[PodVolume]:
        """The pod's volumes whose driver reports their figures (a driver that does not
        answer leaves its volume out, as upstream's)."""
        if self.reported is None or not any(d[1] in REPORTED_PLUGINS for d in dirs):
            return []
        figures = await self.reported(uid)
        out = []
        for name, plugin, path, pvc in dirs:
            usage = figures.get(name) if plugin in REPORTED_PLUGINS else None
            if usage is not None:
                used = DirUsage(usage.used, usage.inodes_used, complete=True)
                out.append(PodVolume(name, plugin, str(path), used, pvc, usage))
        return out

    async def _measure(self, volume: _Volume, path: str, now: float) -> None:
        """One slice of the volume's walk, unless its last one ended within the period."""
        if volume.walk is None:
            if now - volume.ended < self.period:
                return
            volume.walk = TreeWalk(path)
        check = trio.from_thread.check_cancelled if self.in_threads else _never_cancelled
        seen = await self._run(volume.walk.advance, self.max_entries, check, self.max_seconds)
        if seen.complete:
            volume.walk, volume.last, volume.ended = None, seen, self.clock()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if not self.in_threads:
            await trio.lowlevel.checkpoint()
            return fn(*args)
        return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)

    def keep(self, uids: set[str]) -> None:
        """Forget pods that are gone (a pass in progress closes its own walks)."""
        for uid, pod in self._pods.items():
            if uid not in uids and pod.running is None:
                pod.keep(set())
        self._pods = {k: v for k, v in self._pods.items() if k in uids}
