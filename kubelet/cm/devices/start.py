"""Starting the device manager in the container manager's nursery."""

from __future__ import annotations

import functools
import os

import trio

from kubelet.config import features

from ..capabilities import ResourceManager
from ..parts import CmParts
from .manager import DeviceManager
from .registration import serve_registration

PLUGINS_DIR = "device-plugins"


async def start(parts: CmParts, nursery: trio.Nursery) -> ResourceManager:
    """Restore the checkpoint, then serve the registration socket (made anew, so
    plugins register again) and write checkpoints, in ``nursery``."""
    directory = os.path.join(parts.options.root_dir, PLUGINS_DIR)
    manager = DeviceManager(
        directory,
        nursery,
        changed=parts.changed,
        file_io=parts.file_io,
        metrics=parts.metrics,
        health_changed=(
            parts.health_changed
            if parts.options.features.enabled(features.RESOURCE_HEALTH_STATUS)
            else None
        ),
    )
    await manager.restore()
    nursery.start_soon(manager.write_checkpoints)
    await nursery.start(
        functools.partial(serve_registration, count=manager.count_registration),
        directory,
        manager.register,
    )
    return manager
