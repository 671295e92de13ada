"""The CSI drivers registered on this node, and the plugin handler that registers them.

``CsiHandler`` is the plugin watcher's handler for type "CSIPlugin" (upstream's CSI
RegistrationHandler): it takes a driver that speaks CSI 1.x, asks it NodeGetInfo, keeps
its endpoint in ``CsiDrivers`` (what the volume code calls) and writes the node's CSI
facts (``NodeInfoManager``); deregistration undoes both.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from kubelet.cri import CriError
from kubelet.lazyinit import imported
from kubelet.pluginmanager import PluginRefused

from .facts import NodeInfo
from .nodeinfo import NodeInfoManager

if TYPE_CHECKING:
    from .client import CsiClient

log = logging.getLogger(__name__)

_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def highest_version(versions: Sequence[str]) -> tuple[int, int, int]:
    """The highest CSI 1.x version offered; PluginRefused when none is."""
    best: tuple[int, int, int] | None = None
    for text in versions:
        match = _VERSION.match(text.strip())
        if match is None:
            continue
        version = tuple(int(p or 0) for p in match.groups())
        if version[0] == 1 and (best is None or version > best):
            best = (version[0], version[1], version[2])
    if best is None:
        raise PluginRefused(f"none of the versions specified {list(versions)} are supported")
    return best


@attrs.define
class Driver:
    """A registered driver: where it listens, its version and what it told the node."""

    name: str
    endpoint: str
    version: tuple[int, int, int]
    client: CsiClient
    info: NodeInfo | None = None


class CsiDrivers:
    """name → registered driver; the volume code's way to a driver's Node service.

    It also keeps the node's attachable CSI volumes in use (``kubernetes.io/csi/<driver>^
    <volume handle>``), the Node's ``status.volumesInUse``: the attach/detach controller
    does not detach them while they are listed."""

    def __init__(self) -> None:
        self._drivers: dict[str, Driver] = {}
        self.in_use: set[str] = set()

    def get(self, name: str) -> Driver | None:
        return self._drivers.get(name)

    def names(self) -> list[str]:
        return sorted(self._drivers)

    def add(self, driver: Driver) -> None:
        old = self._drivers.get(driver.name)
        self._drivers[driver.name] = driver
        if old is not None and old.client is not driver.client:
            old.client.close()

    def remove(self, name: str) -> Driver | None:
        driver = self._drivers.pop(name, None)
        if driver is not None:
            driver.client.close()
        return driver

    def volumes_in_use(self) -> list[str]:
        return sorted(self.in_use)

    def close(self) -> None:
        for name in list(self._drivers):
            self.remove(name)


class CsiHandler:
    """The "CSIPlugin" handler of the plugin watcher."""

    def __init__(self, drivers: CsiDrivers, node_info: NodeInfoManager | None) -> None:
        self.drivers = drivers
        self.node_info = node_info

    def validate(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        try:
            version = highest_version(versions)
        except PluginRefused as exc:
            raise PluginRefused(
                f"validation failed for CSI Driver {name} at endpoint {endpoint}: {exc}"
            ) from None
        old = self.drivers.get(name)
        if old is not None and old.version > version:
            raise PluginRefused(
                f"validation failed for CSI Driver {name} at endpoint {endpoint}: "
                "the driver is already registered with a higher version"
            )

    async def register(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        # the gRPC client and the CSI protobuf load with the first driver, not at start-up,
        # in a worker thread
        await imported("kubelet.csi.client")
        from .client import CsiClient

        driver = Driver(name, endpoint, highest_version(versions), CsiClient(endpoint))
        try:
            driver.info = await driver.client.node_get_info()
        except CriError as exc:
            driver.client.close()
            raise RuntimeError(f"error during CSI NodeGetInfo() call: {exc}") from exc
        self.drivers.add(driver)
        if self.node_info is None:
            return
        try:
            await self.node_info.install(name, driver.info)
        except Exception as exc:
            self.drivers.remove(name)
            raise RuntimeError(
                f"error updating CSINode object with CSI driver node info: {exc}"
            ) from exc
        log.info("CSI driver %s registered (node ID %s)", name, driver.info.node_id)

    async def deregister(self, name: str) -> None:
        self.drivers.remove(name)
        if self.node_info is not None:
            await self.node_info.uninstall(name)
        log.info("CSI driver %s deregistered", name)


def unique_volume_name(driver: str, handle: str) -> str:
    """Upstream's unique name of a CSI volume (``volumesInUse``, ``volumesAttached``)."""
    return f"kubernetes.io/csi/{driver}^{handle}"
