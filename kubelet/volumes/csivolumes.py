"""Publishing and unpublishing CSI volumes through the registered drivers (see ``csi``)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet.api import NotFound, PatchType, Pod, Volume
from kubelet.boundedio import InputRefused
from kubelet.cri import CriError
from kubelet.csi import (
    EXPAND_VOLUME,
    VOLUME_CONDITION,
    CsiDrivers,
    VolumeUsage,
    capability,
    unique_volume_name,
)
from kubelet.env import EnvLookup
from kubelet.goformat import rfc3339
from kubelet.stats import ReportedUsage

from .csi import (
    CSI_PLUGIN_DIR,
    CSIDRIVERS,
    EPHEMERAL,
    STAGE_UNSTAGE,
    VOL_DATA,
    VOLUME_ATTACHMENTS,
    CsiSource,
    DriverPolicy,
    attachment_name,
    driver_policy,
    global_dir,
    inline_source,
    persistent_source,
    read_vol_data,
    rpc_error,
    write_vol_data,
)
from .csiblock import CsiBlockMapper
from .dirs import mkdir_all
from .expansion import expansion, finished_patch, in_progress_patch, storage_bytes
from .hostpath import VolumeError
from .ownership import fs_group, set_volume_ownership
from .paths import pod_dir, pods_dir, volume_dir
from .sources import TokenSource

if TYPE_CHECKING:
    from kubelet.api import ApiClient
    from kubelet.csi import CsiClient

log = logging.getLogger(__name__)

MAX_VOLUMES_SCANNED = 10000
STATS_TIMEOUT = 10.0
"""seconds the drivers of one pod's volumes have to report their figures, together"""
_STANDALONE = {
    "spec": {"attachRequired": False, "volumeLifecycleModes": ["Persistent", "Ephemeral"]}
}


def _volume_root(root_dir: str, uid: str, name: str) -> str:
    return volume_dir(root_dir, uid, CSI_PLUGIN_DIR, name)


class CsiVolumes:
    """The CSI volume plugin of one kubelet."""

    def __init__(
        self,
        root_dir: str,
        drivers: CsiDrivers,
        *,
        api: ApiClient | None,
        node_name: str,
        lookup: EnvLookup | None = None,
        tokens: TokenSource | None = None,
    ) -> None:
        self.root_dir = root_dir
        self.drivers = drivers
        self.api = api
        self.node_name = node_name
        self.lookup = lookup
        self.tokens = tokens
        self._sizes: dict[tuple[str, str], int] = {}
        """(uid, volume) → the PersistentVolume's capacity when it was published"""
        self._published: dict[tuple[str, str], bool] = {}
        """(uid, volume) → published by this process (False: publish again, requiresRepublish)"""
        self.block = CsiBlockMapper(self)
        """raw block volumes (volumeMode Block)"""

    # -- set up ---------------------------------------------------------------------------

    async def publish_inline(self, pod: Pod, volume: Volume) -> str:
        """An inline ``csi:`` volume published (or already): its host path."""
        return await self._publish(pod, inline_source(pod, volume))

    async def publish_persistent(
        self, pod: Pod, volume_name: str, pv: Mapping[str, Any], read_only: bool
    ) -> str:
        """The PersistentVolume ``pv`` (a dict as the API serves it, with ``spec.csi``)
        published as ``pod``'s volume ``volume_name``: staged first when the driver wants
        it, after its VolumeAttachment reports attached when the CSIDriver requires
        attachment. Returns the host path to mount into containers; raises VolumeError
        (the pod waits, the message is its FailedMount event) until it can."""
        path = await self._publish(pod, persistent_source(volume_name, pv, read_only))
        size = storage_bytes((pv.get("spec") or {}).get("capacity"))
        if size is not None:
            self._sizes.setdefault((pod.uid, volume_name), size)
        return path

    async def can_expand(self, uid: str, volume_name: str) -> bool:
        """The pod's published CSI volume has a registered driver with EXPAND_VOLUME (so a
        driver that cannot expand costs no API reads at each sync)."""
        data_path = os.path.join(_volume_root(self.root_dir, uid, volume_name), VOL_DATA)
        if not _exists(data_path):
            return False
        try:
            driver = self.drivers.get(read_vol_data(data_path).get("driverName", ""))
            return (
                driver is not None and EXPAND_VOLUME in await driver.client.node_get_capabilities()
            )
        except (OSError, InputRefused, CriError):
            return False

    async def expand_claim(
        self, pod: Pod, volume_name: str, pvc: Mapping[str, Any], pv: Mapping[str, Any]
    ) -> bool:
        """A published claim volume grown on the node when its claim and volume say so
        (see ``expansion``), through NodeExpandVolume when the driver has EXPAND_VOLUME;
        the claim's status patched as upstream's kubelet does. True when expanded;
        raises VolumeError (tried again at the next sync) or the API's errors."""
        key = (pod.uid, volume_name)
        wanted = expansion(pvc, pv, self._sizes.get(key))
        published = os.path.join(_volume_root(self.root_dir, pod.uid, volume_name), VOL_DATA)
        if wanted is None or self.api is None or not _exists(published):
            return False  # not published (by this kubelet or an earlier one): nothing to grow
        source = persistent_source(volume_name, pv, False)
        driver = self.drivers.get(source.driver)
        if driver is None or EXPAND_VOLUME not in await driver.client.node_get_capabilities():
            return False
        meta = pvc.get("metadata") or {}
        status_path = (
            f"/api/v1/namespaces/{meta.get('namespace', '')}/persistentvolumeclaims/"
            f"{meta.get('name', '')}/status"
        )
        if wanted.update_claim:
            await self.api.patch(status_path, in_progress_patch(), PatchType.MERGE)
        staging = os.path.join(
            global_dir(self.root_dir, source.driver, source.handle), "globalmount"
        )
        try:
            await driver.client.expand(
                source.handle,
                self.target(pod.uid, volume_name),
                wanted.size,
                capability(source.read_only, source.fs_type, source.mount_options),
                staging_path=staging
                if _exists(os.path.join(os.path.dirname(staging), VOL_DATA))
                else "",
            )
        except CriError as exc:
            raise VolumeError(
                f'MountVolume.NodeExpandVolume failed for volume "{source.pv_name}" : '
                f"{rpc_error(exc)}"
            ) from exc
        self._sizes[key] = wanted.size
        if wanted.update_claim:
            await self.api.patch(status_path, finished_patch(pvc, wanted.quantity), PatchType.MERGE)
        return True

    def published_path(self, uid: str, name: str) -> str | None:
        """The volume's path when this process published it (a failed republish leaves
        a running pod's volume as it is)."""
        return self.target(uid, name) if (uid, name) in self._published else None

    def target(self, uid: str, name: str) -> str:
        return os.path.join(_volume_root(self.root_dir, uid, name), "mount")

    async def _publish(self, pod: Pod, source: CsiSource) -> str:
        target = self.target(pod.uid, source.name)
        key = (pod.uid, source.name)
        if self._published.get(key):
            return target
        driver = self.drivers.get(source.driver)
        if driver is None:
            raise VolumeError(
                f"kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name "
                f"{source.driver} not found in the list of registered CSI drivers"
            )
        policy = await self.policy(source.driver)
        if source.mode == EPHEMERAL and EPHEMERAL not in policy.lifecycle_modes:
            why = "" if policy.exists else " (no CSIDriver object)"
            raise VolumeError(
                f'volume mode "Ephemeral" not supported by driver {source.driver}{why}'
            )
        publish_context: Mapping[str, str] = {}
        if source.mode != EPHEMERAL and policy.attach_required:
            self.drivers.in_use.add(unique_volume_name(source.driver, source.handle))
            publish_context = await self.attached(source)
        client = driver.client
        staging = ""
        if source.mode != EPHEMERAL:
            staging = await self._stage(client, source, publish_context)
        context = dict(source.attributes) | await self._pod_context(pod, source, policy)
        vol_root = _volume_root(self.root_dir, pod.uid, source.name)
        write_vol_data(os.path.join(vol_root, VOL_DATA), self._vol_data(source, pod))
        mkdir_all(os.path.dirname(target), 0o750)
        try:
            await client.publish(
                source.handle,
                target,
                capability(source.read_only, source.fs_type, source.mount_options),
                read_only=source.read_only,
                staging_path=staging,
                publish_context=publish_context,
                volume_context=context,
                secrets=await self.secret(source.publish_secret, pod),
            )
        except CriError as exc:
            raise VolumeError(rpc_error(exc)) from exc
        self._apply_fs_group(pod, source, policy, target)
        self._published[key] = not policy.requires_republish
        return target

    def _vol_data(self, source: CsiSource, pod: Pod) -> dict[str, str]:
        return {
            "specVolID": source.pv_name or source.name,
            "volumeHandle": source.handle,
            "driverName": source.driver,
            "nodeName": self.node_name,
            "attachmentID": attachment_name(source.handle, source.driver, self.node_name),
            "volumeLifecycleMode": source.mode,
        }

    async def policy(self, driver: str) -> DriverPolicy:
        if self.api is None:  # standalone: no CSIDriver to read, nothing attaches
            return driver_policy(_STANDALONE)
        try:
            return driver_policy(await self.api.get(CSIDRIVERS.path(name=driver)))
        except NotFound:
            return driver_policy(None)

    async def attached(self, source: CsiSource) -> Mapping[str, str]:
        assert self.api is not None
        name = attachment_name(source.handle, source.driver, self.node_name)
        try:
            obj = await self.api.get(VOLUME_ATTACHMENTS.path(name=name))
        except NotFound:
            obj = {}
        status = obj.get("status") or {}
        if status.get("attached") is not True:
            raise VolumeError(
                f"volume attachment {name} of PersistentVolume {source.pv_name} is not "
                "attached to the node yet"
            )
        meta = status.get("attachmentMetadata") or {}
        return {str(k): str(v) for k, v in meta.items()}

    async def _stage(
        self, client: CsiClient, source: CsiSource, publish_context: Mapping[str, str]
    ) -> str:
        if STAGE_UNSTAGE not in await client.node_get_capabilities():
            return ""
        base = global_dir(self.root_dir, source.driver, source.handle)
        staging = os.path.join(base, "globalmount")
        data = os.path.join(base, VOL_DATA)
        if _exists(data):
            return staging  # staged by this or an earlier kubelet
        mkdir_all(staging, 0o750)
        try:
            await client.stage(
                source.handle,
                staging,
                capability(source.read_only, source.fs_type, source.mount_options),
                publish_context=publish_context,
                volume_context=source.attributes,
                secrets=await self.secret(source.stage_secret, None),
            )
        except CriError as exc:
            raise VolumeError(f"MountVolume.MountDevice failed: {rpc_error(exc)}") from exc
        write_vol_data(
            data,
            {
                "driverName": source.driver,
                "volumeHandle": source.handle,
                "specVolID": source.pv_name,
            },
        )
        return staging

    async def _pod_context(
        self, pod: Pod, source: CsiSource, policy: DriverPolicy
    ) -> dict[str, str]:
        out: dict[str, str] = {}
        if policy.pod_info_on_mount:
            out |= {
                "csi.storage.k8s.io/pod.name": pod.metadata.name,
                "csi.storage.k8s.io/pod.namespace": pod.metadata.namespace,
                "csi.storage.k8s.io/pod.uid": pod.uid,
                "csi.storage.k8s.io/serviceAccount.name": pod.spec.service_account_name
                or "default",
                "csi.storage.k8s.io/ephemeral": "true" if source.mode == EPHEMERAL else "false",
            }
        if policy.token_requests and self.tokens is not None:
            tokens: dict[str, dict[str, str]] = {}
            for audience, seconds in policy.token_requests:
                token, expiry = await self.tokens.token(
                    pod.metadata.namespace,
                    pod.spec.service_account_name or "default",
                    audience,
                    seconds,
                    pod.metadata.name,
                    pod.uid,
                )
                tokens[audience] = {"token": token, "expirationTimestamp": rfc3339(expiry)}
            out["csi.storage.k8s.io/serviceAccount.tokens"] = json.dumps(tokens)
        return out

    async def secret(self, ref: tuple[str, str] | None, pod: Pod | None) -> dict[str, str]:
        if ref is None or self.lookup is None:
            return {}
        namespace = ref[0] or (pod.metadata.namespace if pod is not None else "")
        data = await self.lookup.secret(namespace, ref[1])
        if data is None:
            raise VolumeError(f'secrets "{ref[1]}" not found')
        return {k: v.decode(errors="replace") for k, v in data.items()}

    def _apply_fs_group(self, pod: Pod, source: CsiSource, policy: DriverPolicy, path: str) -> None:
        group = fs_group(pod)
        if group is None or source.read_only or policy.fs_group_policy == "None":
            return
        if policy.fs_group_policy == "ReadWriteOnceWithFSType" and not (
            source.fs_type and (source.mode == EPHEMERAL or source.single_writer)
        ):
            return
        set_volume_ownership(path, group, read_only=False)

    # -- teardown -------------------------------------------------------------------------

    def has_volumes(self, uid: str) -> bool:
        """Whether a CSI volume of the pod is (or may be) published: its vol_data.json."""
        if self.block.has_volumes(uid):
            return True
        base = os.path.join(pod_dir(self.root_dir, uid), "volumes", CSI_PLUGIN_DIR)
        try:
            return any(os.path.exists(os.path.join(e.path, VOL_DATA)) for e in os.scandir(base))
        except OSError:
            return False

    async def teardown(self, uid: str) -> bool:
        """Unpublish every CSI volume of the pod (found from vol_data.json, so a restarted
        kubelet finds them too) and unstage those no other pod publishes. False when one
        stays (its driver is gone or failed): the caller keeps the pod directory and
        tries again. Block volumes (``CsiBlockMapper``) first."""
        done = await self.block.teardown(uid)
        base = os.path.join(pod_dir(self.root_dir, uid), "volumes", CSI_PLUGIN_DIR)
        try:
            names = sorted(e.name for e in os.scandir(base) if e.is_dir(follow_symlinks=False))
        except OSError:
            return done
        for name in names:
            try:
                await self._unpublish(uid, name)
            except (CriError, VolumeError, OSError, InputRefused) as exc:
                log.warning("pod %s: CSI volume %s not unpublished: %s", uid, name, exc)
                done = False
        return done

    async def _unpublish(self, uid: str, name: str) -> None:
        vol_root = _volume_root(self.root_dir, uid, name)
        data_path = os.path.join(vol_root, VOL_DATA)
        if not _exists(data_path):
            shutil.rmtree(vol_root, ignore_errors=True)
            return
        data = read_vol_data(data_path)
        driver_name, handle = data.get("driverName", ""), data.get("volumeHandle", "")
        driver = self.drivers.get(driver_name)
        if driver is None:
            raise VolumeError(
                f"driver name {driver_name} not found in the list of registered CSI drivers"
            )
        target = os.path.join(vol_root, "mount")
        await driver.client.unpublish(handle, target)
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(target)
        os.unlink(data_path)
        with contextlib.suppress(OSError):
            os.rmdir(vol_root)
        self._published.pop((uid, name), None)
        self._sizes.pop((uid, name), None)
        if data.get("volumeLifecycleMode") != EPHEMERAL and not self._published_anywhere(
            driver_name, handle
        ):
            await self._unstage(driver.client, driver_name, handle)
            self.drivers.in_use.discard(unique_volume_name(driver_name, handle))

    async def _unstage(self, client: CsiClient, driver: str, handle: str) -> None:
        base = global_dir(self.root_dir, driver, handle)
        if not _exists(os.path.join(base, VOL_DATA)):
            return  # never staged (the driver does not stage)
        staging = os.path.join(base, "globalmount")
        await client.unstage(handle, staging)
        shutil.rmtree(base, ignore_errors=True)

    def _published_anywhere(self, driver: str, handle: str) -> bool:
        """Some pod directory still has this volume's vol_data.json."""
        seen = 0
        try:
            pods = list(os.scandir(pods_dir(self.root_dir)))
        except OSError:
            return False
        for pod in pods:
            base = os.path.join(pod.path, "volumes", CSI_PLUGIN_DIR)
            with contextlib.suppress(OSError):
                for entry in os.scandir(base):
                    seen += 1
                    if seen > MAX_VOLUMES_SCANNED:
                        return True  # too many to tell: keep it staged
                    with contextlib.suppress(OSError, InputRefused):
                        data = read_vol_data(os.path.join(entry.path, VOL_DATA))
                        if data.get("driverName") == driver and data.get("volumeHandle") == handle:
                            return True
        return False

    # -- stats ----------------------------------------------------------------------------

    async def stats(self, uid: str, health: bool = False) -> dict[str, VolumeUsage]:
        """NodeGetVolumeStats of each published CSI volume of the pod whose driver has
        GET_VOLUME_STATS, all at once under one deadline; a volume whose driver fails or
        does not answer in time is left out (the volume figures wait for no driver). Its
        volume condition counts only with ``health`` (gate CSIVolumeHealth) and a driver
        that announces VOLUME_CONDITION, as upstream's."""
        base = os.path.join(pod_dir(self.root_dir, uid), "volumes", CSI_PLUGIN_DIR)
        out: dict[str, VolumeUsage] = {}
        try:
            names = sorted(e.name for e in os.scandir(base))
        except OSError:
            return out

        async def ask(name: str, client: CsiClient, handle: str) -> None:
            with contextlib.suppress(CriError):
                usage = await client.volume_stats(handle, os.path.join(base, name, "mount"))
                caps = await client.node_get_capabilities() if health else frozenset()
                if VOLUME_CONDITION not in caps:
                    usage = attrs.evolve(usage, abnormal=None, message="")
                out[name] = usage

        with trio.move_on_after(STATS_TIMEOUT):
            async with trio.open_nursery() as nursery:
                for name in names:
                    with contextlib.suppress(OSError, InputRefused):
                        data = read_vol_data(os.path.join(base, name, VOL_DATA))
                        driver = self.drivers.get(data.get("driverName", ""))
                        if driver is not None:
                            nursery.start_soon(
                                ask, name, driver.client, data.get("volumeHandle", "")
                            )
        return dict(out)


def _exists(path: str) -> bool:
    """A vol_data.json on the local disk (a stat; no reason to leave the loop)."""
    return os.path.exists(path)


async def csi_volume_stats(
    root_dir: str, drivers: CsiDrivers, uid: str, *, health: bool = False
) -> dict[str, ReportedUsage]:
    """The pod's CSI volumes' figures from their drivers, for the stats summary (and
    their condition with ``health``: gate CSIVolumeHealth)."""
    volumes = CsiVolumes(root_dir, drivers, api=None, node_name="")
    return {
        name: ReportedUsage(
            capacity=u.capacity_bytes or 0,
            available=u.available_bytes or 0,
            used=u.used_bytes or 0,
            inodes=u.inodes or 0,
            inodes_free=u.inodes_free or 0,
            inodes_used=u.inodes_used or 0,
            abnormal=u.abnormal,
        )
        for name, u in (await volumes.stats(uid, health)).items()
    }
