"""Raw block volumes (volumeMode Block, a container's ``volumeDevices``) of CSI drivers.

Upstream's CSI block mapper, with its layout on disk (per PersistentVolume, not per
handle, so node tooling and a restarted kubelet find them):

* staged (a driver with STAGE_UNSTAGE_VOLUME) at
  ``<root>/plugins/kubernetes.io/csi/volumeDevices/staging/<pv>``, a directory the
  kubelet makes;
* published per pod at ``<root>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<uid>``,
  a path the driver makes its device node (or file) at;
* ``vol_data.json`` (driver, handle, node, attachment) at
  ``<root>/plugins/kubernetes.io/csi/volumeDevices/<pv>/data/vol_data.json``;
* the pod's device link ``<root>/pods/<uid>/volumeDevices/kubernetes.io~csi/<pv>``, a
  symlink to the published path: the host path of the container's CRI device.

Teardown finds the pod's links (so it works for pods a restarted kubelet finds on
disk): NodeUnpublishVolume, then the link goes, and when no other pod has the volume
published, NodeUnstageVolume and the volume's directories go.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kubelet.boundedio import InputRefused
from kubelet.cri import CriError
from kubelet.csi import block_capability, unique_volume_name

from .csi import (
    CSI_PLUGIN_DIR,
    STAGE_UNSTAGE,
    VOL_DATA,
    CsiSource,
    DriverPolicy,
    attachment_name,
    persistent_source,
    read_vol_data,
    rpc_error,
    write_vol_data,
)
from .dirs import mkdir_all
from .hostpath import VolumeError
from .paths import pod_dir

if TYPE_CHECKING:
    from kubelet.api import Pod
    from kubelet.csi import CsiClient, CsiDrivers

log = logging.getLogger(__name__)

VOLUME_DEVICES = "volumeDevices"


def devices_dir(root_dir: str) -> str:
    """``<root>/plugins/kubernetes.io/csi/volumeDevices``"""
    return os.path.join(root_dir, "plugins", "kubernetes.io", "csi", VOLUME_DEVICES)


def staging_path(root_dir: str, pv: str) -> str:
    return os.path.join(devices_dir(root_dir), "staging", pv)


def publish_dir(root_dir: str, pv: str) -> str:
    return os.path.join(devices_dir(root_dir), "publish", pv)


def publish_path(root_dir: str, pv: str, uid: str) -> str:
    return os.path.join(publish_dir(root_dir, pv), uid)


def data_path(root_dir: str, pv: str) -> str:
    return os.path.join(devices_dir(root_dir), pv, "data", VOL_DATA)


def pod_devices_dir(root_dir: str, uid: str, plugin: str) -> str:
    """``<root>/pods/<uid>/volumeDevices/<plugin>``: the pod's device links."""
    return os.path.join(pod_dir(root_dir, uid), VOLUME_DEVICES, plugin)


def link_device(root_dir: str, uid: str, plugin: str, pv: str, device: str) -> str:
    """The pod's link ``<pod>/volumeDevices/<plugin>/<pv>`` → ``device`` (made again
    when it points elsewhere); its path."""
    base = pod_devices_dir(root_dir, uid, plugin)
    mkdir_all(base, 0o750)
    link = os.path.join(base, pv)
    with contextlib.suppress(OSError):
        if os.readlink(link) == device:
            return link
    tmp = link + ".tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    os.symlink(device, tmp)
    os.replace(tmp, link)
    return link


class CsiContext(Protocol):
    """What block volumes share with the CSI volume plugin (``CsiVolumes``): the
    drivers, the CSIDriver policy, attachments and secrets."""

    root_dir: str
    drivers: CsiDrivers
    node_name: str

    async def policy(self, driver: str) -> DriverPolicy: ...

    async def attached(self, source: CsiSource) -> Mapping[str, str]: ...

    async def secret(self, ref: tuple[str, str] | None, pod: Pod | None) -> dict[str, str]: ...


class CsiBlockMapper:
    """Maps and unmaps the CSI block volumes of one kubelet."""

    def __init__(self, volumes: CsiContext) -> None:
        self.volumes = volumes
        self.root_dir = volumes.root_dir
        self._staged: set[str] = set()
        """PersistentVolumes this process staged (a restarted kubelet stages again:
        NodeStageVolume is idempotent)"""

    async def map(self, pod: Pod, volume_name: str, pv: Mapping[str, Any], read_only: bool) -> str:
        """Stage (once) and publish ``pv`` for ``pod``; the pod's device link (the host
        path of the container's device). Raises VolumeError (the pod waits)."""
        source = persistent_source(volume_name, pv, read_only)
        driver = self.volumes.drivers.get(source.driver)
        if driver is None:
            raise VolumeError(
                f'MapVolume.SetUpDevice failed for volume "{source.pv_name}" : '
                f"kubernetes.io/csi: blockMapper.SetUpDevice failed to get CSI client: "
                f"driver name {source.driver} not found in the list of registered CSI drivers"
            )
        policy = await self.volumes.policy(source.driver)
        publish_context: Mapping[str, str] = {}
        if policy.attach_required:
            self.volumes.drivers.in_use.add(unique_volume_name(source.driver, source.handle))
            publish_context = await self.volumes.attached(source)
        write_vol_data(data_path(self.root_dir, source.pv_name), self._vol_data(source))
        client = driver.client
        staging = await self._stage(client, source, publish_context)
        target = publish_path(self.root_dir, source.pv_name, pod.uid)
        mkdir_all(os.path.dirname(target), 0o750)
        try:
            await client.publish(
                source.handle,
                target,
                block_capability(source.read_only),
                read_only=source.read_only,
                staging_path=staging,
                publish_context=publish_context,
                volume_context=source.attributes,
                secrets=await self.volumes.secret(source.publish_secret, pod),
            )
        except CriError as exc:
            raise VolumeError(
                f'MapVolume.MapPodDevice failed for volume "{source.pv_name}" : {rpc_error(exc)}'
            ) from exc
        return link_device(self.root_dir, pod.uid, CSI_PLUGIN_DIR, source.pv_name, target)

    def _vol_data(self, source: CsiSource) -> dict[str, str]:
        return {
            "specVolID": source.pv_name,
            "volumeHandle": source.handle,
            "driverName": source.driver,
            "nodeName": self.volumes.node_name,
            "attachmentID": attachment_name(source.handle, source.driver, self.volumes.node_name),
        }

    async def _stage(
        self, client: CsiClient, source: CsiSource, publish_context: Mapping[str, str]
    ) -> str:
        if STAGE_UNSTAGE not in await client.node_get_capabilities():
            return ""
        staging = staging_path(self.root_dir, source.pv_name)
        if source.pv_name in self._staged:
            return staging
        mkdir_all(staging, 0o750)
        try:
            await client.stage(
                source.handle,
                staging,
                block_capability(source.read_only),
                publish_context=publish_context,
                volume_context=source.attributes,
                secrets=await self.volumes.secret(source.stage_secret, None),
            )
        except CriError as exc:
            raise VolumeError(
                f'MapVolume.SetUpDevice failed for volume "{source.pv_name}" : {rpc_error(exc)}'
            ) from exc
        self._staged.add(source.pv_name)
        return staging

    # -- teardown -------------------------------------------------------------------------

    def has_volumes(self, uid: str) -> bool:
        """Whether the pod still has a CSI device link (a volume maybe published)."""
        try:
            base = pod_devices_dir(self.root_dir, uid, CSI_PLUGIN_DIR)
            return any(True for _ in os.scandir(base))
        except OSError:
            return False

    async def teardown(self, uid: str) -> bool:
        """Unpublish each block volume of the pod, unstage those no other pod has; False
        when one stays (its driver is gone or failed; tried again)."""
        base = pod_devices_dir(self.root_dir, uid, CSI_PLUGIN_DIR)
        try:
            names = sorted(e.name for e in os.scandir(base))
        except OSError:
            return True
        done = True
        for pv in names:
            try:
                await self._unmap(uid, pv, os.path.join(base, pv))
            except (CriError, VolumeError, OSError, InputRefused) as exc:
                log.warning("pod %s: CSI block volume %s not unmapped: %s", uid, pv, exc)
                done = False
        with contextlib.suppress(OSError):
            os.rmdir(base)
        return done

    async def _unmap(self, uid: str, pv: str, link: str) -> None:
        data_file = data_path(self.root_dir, pv)
        if not _local(os.path.exists, data_file):
            os.unlink(link)  # never published (or torn down already)
            return
        data = read_vol_data(data_file)
        driver_name, handle = data.get("driverName", ""), data.get("volumeHandle", "")
        driver = self.volumes.drivers.get(driver_name)
        if driver is None:
            raise VolumeError(
                f"driver name {driver_name} not found in the list of registered CSI drivers"
            )
        target = publish_path(self.root_dir, pv, uid)
        await driver.client.unpublish(handle, target)
        with contextlib.suppress(OSError):  # the driver's node, if it left it
            os.unlink(target)
        os.unlink(link)
        try:
            others = any(True for _ in os.scandir(publish_dir(self.root_dir, pv)))
        except FileNotFoundError:
            others = False
        if others:
            return
        staging = staging_path(self.root_dir, pv)
        if _local(os.path.isdir, staging):
            await driver.client.unstage(handle, staging)
        self._staged.discard(pv)
        for path in (staging, publish_dir(self.root_dir, pv)):
            with contextlib.suppress(OSError):
                os.rmdir(path)
        shutil.rmtree(os.path.dirname(os.path.dirname(data_file)), ignore_errors=True)
        self.volumes.drivers.in_use.discard(unique_volume_name(driver_name, handle))


def _local(check: Callable[[str], bool], path: str) -> bool:
    """A stat of the kubelet's own directory (no reason to leave the loop)."""
    return check(path)
