"""The summary provider as the eviction manager and the image collector read it.

``UsageReader`` turns ``/stats/summary`` into the typed figures of ``kubelet.stats.summary``
(the eviction manager's ``SummarySource``: the node's, then those of the pods it asks
for), gives the image filesystem alone (the image collector's thresholds), and tells how
the runtime's filesystems are laid out: whether images live on a filesystem of their own
(another device than ``--root-dir``), and whether the writable layers are apart from
them (ImageFsInfo's container filesystem).
"""

from __future__ import annotations

import os
from collections.abc import Set

import attrs

from kubelet.cri import CriError
from kubelet.goformat import rfc3339

from .provider import SummaryProvider
from .summary import FsUsage, PodUsage, Summary, from_json
from .summary import NodeUsage as NodeFigures


def _device(path: str) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


@attrs.frozen
class UsageReader:
    provider: SummaryProvider

    async def summary(self) -> Summary:
        return await self.provider.usage()

    async def node_usage(self) -> NodeFigures:
        return await self.provider.node_usage()

    async def pods_usage(self, wanted: Set[str] | None) -> tuple[PodUsage, ...]:
        return await self.provider.pods_usage(wanted)

    async def image_fs(self) -> FsUsage | None:
        runtime = await self.provider.runtime_fs(rfc3339(self.provider.wall_clock()))
        return from_json({"node": {"runtime": runtime or {}}}).node.image_fs

    async def disk_layout(self) -> tuple[bool, bool]:
        """(dedicated image filesystem, writable layers split from images); raises
        ``CriError`` while the runtime does not answer (the manager asks again)."""
        images = self.provider.images
        if images is None:
            return False, False
        info = await images.image_fs_info()
        if not info.image_filesystems:
            raise CriError("ImageFsInfo", "the runtime reports no image filesystem")
        image_mount = info.image_filesystems[0].fs_id.mountpoint
        root = _device(self.provider.root_dir)
        image = _device(image_mount) if image_mount else None
        dedicated = image is not None and root is not None and image != root
        container_mount = (
            info.container_filesystems[0].fs_id.mountpoint if info.container_filesystems else ""
        )
        split = bool(container_mount) and container_mount != image_mount
        return dedicated, split
