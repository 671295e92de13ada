"""A pod's volumes: set up before its sandbox, mounted into every container, removed last.

``prepare`` runs at every pod sync, before anything is asked of the runtime (upstream
waits for every volume before it creates the sandbox). It sets up each volume some
container mounts, as upstream's volume manager does for the volumes in use:

* emptyDir (on disk, or tmpfs for medium Memory) and hostPath (with upstream's type
  checks) once; configMap, secret, downwardAPI and projected volumes at every sync, so
  updated objects and rotated tokens reach running pods (written atomically; secret
  and projected on tmpfs);
* persistentVolumeClaim and generic ephemeral volumes through their claim and its
  PersistentVolume (``claims``, ``persistent``), once: what was set up is noted in the
  pod directory and reused as it is, by this kubelet and the next; a PersistentVolume
  with ``spec.csi`` is published by its CSI driver;
* inline ``csi`` volumes through the registered CSI drivers (``csivolumes``), published
  once (at every sync for a driver with requiresRepublish);
* a volume of a type the kubelet does not provide (nfs, iscsi, image, ...) is
  never left out: the pod waits, with upstream's FailedMount message naming the volume
  and its type;
* a volume that cannot be set up the first time keeps the pod waiting; one that fails
  to refresh later is reported and stays as it was (running pods are not disturbed).

``mounts`` turns one container's volumeMounts into CRI mounts: API data volumes are
read-only whatever the volumeMount says, subPath/subPathExpr go through the safe
bind mounts of ``subpath``. ``cleanup`` unmounts everything below the pod directory
before it removes it, and removes nothing while a mount stays.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kubelet.api import Container, Pod, QuantityError, Volume, VolumeMount, to_bytes
from kubelet.cri import api
from kubelet.decisions import DeviceSpec
from kubelet.env import EnvLookup
from kubelet.stats import ClaimRecord, claim_record_path, read_claim_records

from .atomic import write_atomic
from .claims import (
    BoundClaim,
    ClaimError,
    ClaimLookup,
    claim_use,
    resolve_claim,
    volume_mode_problem,
)
from .csiblock import link_device
from .csivolumes import CsiVolumes
from .dirs import VOLUME_DIR_MODE, ensure_exact_dir, make_pod_data_dirs, mkdir_all
from .hostpath import VolumeError, check_host_path
from .mounts import is_separate_filesystem, mounts_under, unmount
from .ownership import fs_group, set_volume_ownership, wanted_mode
from .paths import EMPTY_DIR, pod_dir, pods_dir, volume_dir
from .persistent import (
    CSI,
    LOCAL,
    check_persistent_volume,
    csi_not_registered,
    is_block,
    local_block_device,
    mount_persistent_volume,
    no_block_plugin,
    plugin_of,
    unsupported_pv_message,
)
from .sources import (
    PROJECTED,
    SECRET,
    Payload,
    TokenSource,
    build_payload,
    plugin_name,
    source_kind,
    token_paths,
)
from .subpath import (
    MountConfigError,
    SubPathCreateError,
    UnsafeSubPath,
    bind_target,
    clean_sub_paths,
    effective_sub_path,
    prepare_sub_path,
    release,
)
from .tmpfs import memory_volume_size, mount_tmpfs, noswap_supported, tmpfs_options

log = logging.getLogger(__name__)

_PROPAGATION = {
    "": api.PROPAGATION_PRIVATE,
    "None": api.PROPAGATION_PRIVATE,
    "HostToContainer": api.PROPAGATION_HOST_TO_CONTAINER,
    "Bidirectional": api.PROPAGATION_BIDIRECTIONAL,
}
_IN_MEMORY = (SECRET, PROJECTED)
READY_FILE = "ready"


class _NoApi:
    """The lookup of a kubelet without an API server: every object is missing."""

    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return None

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        return None

    async def claim(self, namespace: str, name: str) -> Mapping[str, object] | None:
        return None

    async def volume(self, name: str) -> Mapping[str, object] | None:
        return None


_NO_API = _NoApi()
NORMAL_EVENT = "Normal"
WARNING_EVENT = "Warning"


@attrs.frozen
class VolumeNotice:
    """An event about a volume other than FailedMount (a claim's expansion on the node),
    on the pod and, with ``claim`` (namespace, name, uid), on the claim too."""

    type: str
    """Normal or Warning"""
    reason: str
    message: str
    claim: tuple[str, str, str] | None = None


@attrs.define
class _Found:
    """What ``prepare`` gathers while it walks the pod's volumes."""

    paths: dict[str, str] = attrs.field(factory=dict)
    devices: dict[str, str] = attrs.field(factory=dict)
    read_only: set[str] = attrs.field(factory=set)
    unmounted: list[str] = attrs.field(factory=list)
    events: list[str] = attrs.field(factory=list)
    notices: list[VolumeNotice] = attrs.field(factory=list)
    failed: list[tuple[str, str]] = attrs.field(factory=list)


def failure_reason(message: str) -> str:
    """The event reason of a volume failure: upstream's operations on a block volume
    report ``FailedMapVolume`` (their messages begin ``MapVolume.``), all others
    ``FailedMount``."""
    return "FailedMapVolume" if message.startswith("MapVolume.") else "FailedMount"


@attrs.frozen
class PodVolumes:
    """What ``prepare`` found: where each volume is, and what keeps the pod waiting."""

    paths: Mapping[str, str] = attrs.field(factory=dict)
    """volume name → host path, for every volume that can be mounted"""
    read_only: frozenset[str] = frozenset()
    """volumes every container mounts read-only (configMap, secret, downwardAPI,
    projected; a claim the pod uses readOnly or a ReadOnlyMany volume)"""
    unmounted: tuple[str, ...] = ()
    """volumes some container mounts that are not set up: the pod must not start"""
    events: tuple[str, ...] = ()
    """FailedMount event messages (``failure_reason`` tells FailedMapVolume ones apart)"""
    notices: tuple[VolumeNotice, ...] = ()
    """other events (claims expanded on the node, or not)"""
    devices: Mapping[str, str] = attrs.field(factory=dict)
    """Block volume name → the pod's device link (the host path of the CRI device)"""

    @property
    def ready(self) -> bool:
        return not self.unmounted

    @property
    def error(self) -> str:
        """Why the pod waits (the sync's error, in upstream's words)."""
        return "; ".join(self.events) or f"unmounted volumes={_go_list(self.unmounted)}"


def _go_list(names: Sequence[str]) -> str:
    """A Go ``%v`` of a string slice: ``[a b]``."""
    return "[" + " ".join(names) + "]"


def volumes_in_use(pod: Pod) -> set[str]:
    """The volumes some container (init, sidecar or regular) mounts or uses as a block
    device; the others are not set up, as upstream."""
    return mounted_volumes(pod) | device_volumes(pod)


def mounted_volumes(pod: Pod) -> set[str]:
    return {
        m.name for c in (*pod.spec.init_containers, *pod.spec.containers) for m in c.volume_mounts
    }


def device_volumes(pod: Pod) -> set[str]:
    return {
        str(d.get("name", ""))
        for c in (*pod.spec.init_containers, *pod.spec.containers)
        for d in c.volume_devices
        if isinstance(d, Mapping)
    }


def _not_processed(unmounted: list[str], failed: list[tuple[str, str]]) -> str:
    """Upstream's FailedMount of a pod with volumes that could not be processed."""
    reasons = "; ".join(reason for _, reason in failed)
    return (
        "Unable to attach or mount volumes: "
        f"unmounted volumes={_go_list(sorted(unmounted))}, unattached volumes=[], "
        f"failed to process volumes={_go_list(sorted(n for n, _ in failed))}: {reasons}"
    )


def unsupported_message(name: str, kind: str | None) -> str:
    """Upstream's error for a volume no plugin takes, with the type it has here."""
    what = f"{kind} volumes are" if kind else "volumes of this type are"
    return (
        f'failed to get Plugin from volumeSpec for volume "{name}" err=no volume plugin '
        f"matched: {what} not supported by this kubelet"
    )


def fs_user(pod: Pod) -> int | None:
    """Upstream FsUserFrom: the runAsUser every container runs as, if they all agree."""
    found: int | None = None
    pod_sc = pod.spec.security_context
    for container in (*pod.spec.init_containers, *pod.spec.containers):
        sc = container.security_context
        uid = sc.run_as_user if sc is not None and sc.run_as_user is not None else None
        if uid is None and pod_sc is not None:
            uid = pod_sc.run_as_user
        if uid is None or (found is not None and found != uid):
            return None
        found = uid
    return found


class VolumeManager:
    """Per-pod volume directories under ``root_dir``."""

    def __init__(
        self,
        root_dir: str,
        *,
        lookup: EnvLookup | None = None,
        tokens: TokenSource | None = None,
        node_allocatable: Mapping[str, str] | None = None,
        claims: ClaimLookup | None = None,
        node_labels: Mapping[str, str] | None = None,
        csi: CsiVolumes | None = None,
    ) -> None:
        self.root_dir = root_dir
        self.csi = csi
        """CSI volumes (inline, and PersistentVolumes with ``spec.csi`` through
        ``csi.publish_persistent``); None: CSI volumes are refused as unsupported"""
        self.lookup = lookup
        self.tokens = tokens
        self.node_allocatable = dict(node_allocatable or {})
        self.claims = claims
        self.node_labels = dict(node_labels or {})
        self._claim_index: dict[str, dict[str, ClaimRecord]] | None = None
        """pod uid → its claim volumes set up (read from the pod directories once)"""
        self._ready: dict[str, set[str]] = {}
        """pod uid → volumes set up by this process (emptyDir and hostPath: done)"""
        self._cleanup_warned: set[str] = set()

    # -- set up ---------------------------------------------------------------------------

    async def prepare(self, pod: Pod) -> PodVolumes:
        """Set up (or refresh) every volume a container of ``pod`` mounts."""
        uid = pod.uid
        in_use = volumes_in_use(pod)
        if uid not in self._ready:
            make_pod_data_dirs(self.root_dir, uid, with_volumes=bool(in_use))
            self._ready[uid] = set()
        ready = self._ready[uid]
        found = _Found()
        for volume in pod.spec.volumes:
            if volume.name not in in_use:
                continue
            if claim_use(pod, volume) is not None:
                await self._prepare_claim(pod, volume, found)
                continue
            plugin = plugin_name(volume)
            if plugin is not None:
                found.read_only.add(volume.name)
            try:
                path = await self._setup_one(pod, volume, plugin, volume.name in ready)
            except (VolumeError, OSError) as exc:
                found.events.append(f'MountVolume.SetUp failed for volume "{volume.name}" : {exc}')
                existing = self._set_up_before(pod, volume, plugin)
                if existing is not None:
                    found.paths[volume.name] = existing
                else:
                    found.unmounted.append(volume.name)
                continue
            if path is None:
                found.unmounted.append(volume.name)
                found.failed.append(
                    (volume.name, unsupported_message(volume.name, source_kind(volume)))
                )
                continue
            found.paths[volume.name] = path
            ready.add(volume.name)
        if found.failed:
            found.events.append(_not_processed(found.unmounted, found.failed))
        return PodVolumes(
            found.paths,
            frozenset(found.read_only),
            tuple(sorted(found.unmounted)),
            tuple(found.events),
            tuple(found.notices),
            found.devices,
        )

    async def _prepare_claim(self, pod: Pod, volume: Volume, found: _Found) -> None:
        """A claim volume set up (or found set up), and a CSI one expanded when it grew."""
        try:
            record = await self._setup_claim(pod, volume)
        except ClaimError as exc:
            found.failed.append((volume.name, str(exc)))
            found.unmounted.append(volume.name)
        except VolumeError as exc:
            found.events.append(str(exc))
            found.unmounted.append(volume.name)
        else:
            if volume.name in device_volumes(pod):
                found.devices[volume.name] = record.path
            else:
                found.paths[volume.name] = record.path
            if record.plugin == CSI:
                found.notices.extend(await self._expand_claim(pod, record))
            if record.read_only:
                found.read_only.add(volume.name)

    # -- claims ---------------------------------------------------------------------------

    async def _setup_claim(self, pod: Pod, volume: Volume) -> ClaimRecord:
        """A persistentVolumeClaim or ephemeral volume: the record of an earlier set up,
        else the claim and its volume checked and the volume mounted. Raises ClaimError
        (not processed) or VolumeError (a FailedMount of its own)."""
        claims = self._claims()
        record = claims.get(pod.uid, {}).get(volume.name)
        if record is not None:
            return record
        bound = await resolve_claim(pod, volume, self.claims or _NO_API)
        problem = volume_mode_problem(
            bound.pv,
            volume.name,
            volume.name in mounted_volumes(pod),
            volume.name in device_volumes(pod),
        )
        if problem is not None:
            raise ClaimError(f"error processing PVC {bound.namespace}/{bound.claim}: {problem}")
        plugin = plugin_of(bound)
        if plugin is None:
            raise ClaimError(unsupported_pv_message(bound.pv_name, bound.source_kind))
        elsewhere = any(
            r.pv == bound.pv_name
            for uid, records in list(claims.items())
            if uid != pod.uid
            for r in records.values()
        )
        if is_block(bound):
            path = await self._map_block(pod, volume, bound, elsewhere)
        elif bound.source_kind != "csi":
            path = mount_persistent_volume(bound, self.node_labels, elsewhere)
        elif self.csi is not None and self.csi.drivers.get(str(bound.source.get("driver"))):
            check_persistent_volume(bound, self.node_labels, elsewhere)
            path = await self.csi.publish_persistent(pod, volume.name, bound.pv, bound.read_only)
        else:
            raise csi_not_registered(bound)
        record = ClaimRecord(
            volume.name, bound.claim, bound.namespace, bound.pv_name, plugin, path, bound.read_only
        )
        _write_record(pod_dir(self.root_dir, pod.uid), record)
        claims.setdefault(pod.uid, {})[volume.name] = record
        return record

    async def _map_block(self, pod: Pod, volume: Volume, bound: BoundClaim, elsewhere: bool) -> str:
        """A volumeMode Block volume mapped for the pod: its device link under
        ``<pod>/volumeDevices/<plugin>/<pv>`` (a local volume's block device, a CSI
        volume's published device). Raises VolumeError."""
        kind = bound.source_kind
        if kind == "local":
            device = local_block_device(bound)
            check_persistent_volume(bound, self.node_labels, elsewhere)
            return link_device(self.root_dir, pod.uid, LOCAL, bound.pv_name, device)
        if kind != "csi":
            raise no_block_plugin(bound)
        if self.csi is None or not self.csi.drivers.get(str(bound.source.get("driver"))):
            raise csi_not_registered(bound)
        check_persistent_volume(bound, self.node_labels, elsewhere)
        return await self.csi.block.map(pod, volume.name, bound.pv, bound.read_only)

    async def _expand_claim(self, pod: Pod, record: ClaimRecord) -> list[VolumeNotice]:
        """A mounted CSI claim that grew: expanded on the node (``CsiVolumes.expand_claim``),
        FileSystemResizeSuccessful on the pod and the claim; a driver's failure is
        FileSystemResizeFailed on the pod, and every failure is tried again at the next
        sync while the pod runs on."""
        if self.csi is None or self.claims is None:
            return []
        if not await self.csi.can_expand(pod.uid, record.volume):
            return []
        pvc: Mapping[str, Any] | None = None
        try:
            pvc = await self.claims.claim(record.namespace, record.claim)
            pv = await self.claims.volume(record.pv)
            if pvc is None or pv is None:
                return []
            if not await self.csi.expand_claim(pod, record.volume, pvc, pv):
                return []
        except VolumeError as exc:
            return [VolumeNotice(WARNING_EVENT, "FileSystemResizeFailed", str(exc))]
        except Exception as exc:  # the API's and the driver's errors: the next sync retries
            log.warning(
                "pod %s: volume %s (claim %s/%s) not expanded: %s",
                pod.key,
                record.volume,
                record.namespace,
                record.claim,
                exc,
            )
            return []
        meta = pvc.get("metadata") or {}
        claim = (record.namespace, record.claim, str(meta.get("uid") or ""))
        message = (
            f'MountVolume.NodeExpandVolume succeeded for volume "{record.pv}" {self.csi.node_name}'
        )
        return [VolumeNotice(NORMAL_EVENT, "FileSystemResizeSuccessful", message, claim)]

    def _claims(self) -> dict[str, dict[str, ClaimRecord]]:
        """The claim volumes of every pod directory: read from disk the first time (an
        earlier kubelet's pods hold theirs), kept up to date after."""
        if self._claim_index is None:
            self._claim_index = {
                uid: found
                for uid in self.pod_uids_on_disk()
                if (found := read_claim_records(pod_dir(self.root_dir, uid)))
            }
        return self._claim_index

    async def _setup_one(
        self, pod: Pod, volume: Volume, plugin: str | None, done: bool
    ) -> str | None:
        """The volume's host path; None for a type this kubelet does not provide."""
        if plugin is not None:
            return await self._setup_api_backed(pod, volume, plugin)
        if volume.empty_dir is not None:
            path = volume_dir(self.root_dir, pod.uid, EMPTY_DIR, volume.name)
            if not done:
                self._setup_empty_dir(pod, volume, path)
            return path
        if volume.host_path is not None:
            return (
                str(volume.host_path.get("path", "")) if done else check_host_path(volume.host_path)
            )
        if volume.csi is not None and self.csi is not None:
            return await self.csi.publish_inline(pod, volume)
        return None

    def _set_up_before(self, pod: Pod, volume: Volume, plugin: str | None) -> str | None:
        """The path of an API-backed volume written by an earlier sync (or an earlier
        kubelet): a failed refresh leaves it as it was."""
        if volume.csi is not None and self.csi is not None:
            return self.csi.published_path(pod.uid, volume.name)
        if plugin is None:
            return None
        path = volume_dir(self.root_dir, pod.uid, plugin, volume.name)
        return path if os.path.islink(os.path.join(path, "..data")) else None

    def _setup_empty_dir(self, pod: Pod, volume: Volume, path: str) -> None:
        """Upstream's emptyDir SetUp: a 0777 directory (a tmpfs for medium Memory), the
        fsGroup applied once, then a ready marker so a restarted kubelet does not walk
        what the containers wrote since."""
        assert volume.empty_dir is not None
        marker = os.path.join(
            pod_dir(self.root_dir, pod.uid), "plugins", EMPTY_DIR, volume.name, READY_FILE
        )
        was_ready = os.path.exists(marker)
        medium = str(volume.empty_dir.get("medium") or "")
        if medium.startswith("HugePages"):
            raise VolumeError(f'emptyDir medium "{medium}" is not supported by this kubelet')
        if medium not in ("", "Memory"):
            raise VolumeError(f'unknown storage medium "{medium}"')
        if (
            was_ready
            and os.path.isdir(path)
            and (medium != "Memory" or is_separate_filesystem(path))
        ):
            return  # set up by an earlier kubelet: its mode and group stay as they are
        ensure_exact_dir(path, VOLUME_DIR_MODE)
        if medium == "Memory":
            self._mount_memory(pod, path, volume.empty_dir.get("sizeLimit"))
        group = fs_group(pod)
        if group is not None and not was_ready:
            set_volume_ownership(path, group, read_only=False)
        if not was_ready:
            mkdir_all(os.path.dirname(marker), 0o750)
            os.close(os.open(marker, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))

    def _mount_memory(self, pod: Pod, path: str, size_limit: object) -> None:
        if is_separate_filesystem(path):
            return
        try:  # a quantity, as the Node's status.allocatable has it ("7Gi")
            node_memory = to_bytes(self.node_allocatable.get("memory", "0"))
        except (QuantityError, ValueError):
            node_memory = 0
        size = memory_volume_size(pod, size_limit, node_memory)
        probe = os.path.join(self.root_dir, "plugins", "kubernetes.io~empty-dir")
        mount_tmpfs(path, tmpfs_options(size, noswap_supported(probe)))

    async def _setup_api_backed(self, pod: Pod, volume: Volume, plugin: str) -> str:
        lookup = self.lookup or _NO_API
        group = fs_group(pod)
        user = fs_user(pod)
        payload = await build_payload(
            pod,
            volume,
            lookup,
            node_allocatable=self.node_allocatable,
            tokens=self.tokens,
            private_tokens=group is not None or user is not None,
        )
        return self._write_api_volume(pod, volume, plugin, dict(payload or {}), group, user)

    def _write_api_volume(
        self,
        pod: Pod,
        volume: Volume,
        plugin: str,
        files: Payload,
        group: int | None,
        user: int | None,
    ) -> str:
        """The volume directory (0777 when made; a tmpfs for secret and projected) and
        its files, owned by the fsGroup and the token's user."""
        path = volume_dir(self.root_dir, pod.uid, plugin, volume.name)
        if not os.path.isdir(path):
            ensure_exact_dir(path, VOLUME_DIR_MODE)
        if plugin in _IN_MEMORY:
            self._mount_memory(pod, path, None)
        if group is not None:
            # the modes the ownership change gives them, so an unchanged payload is not
            # rewritten at every sync
            files = {
                p: (data, wanted_mode(mode, is_dir=False, read_only=True))
                for p, (data, mode) in files.items()
            }
        write_atomic(
            path,
            files,
            owners={p: user for p in token_paths(volume)} if user is not None else None,
            set_perms=(
                (lambda d: set_volume_ownership(d, group, read_only=True))
                if group is not None
                else None
            ),
        )
        return path

    # -- a container's mounts -------------------------------------------------------------

    def mounts(
        self,
        pod: Pod,
        container: Container,
        volumes: PodVolumes,
        env: Mapping[str, str],
    ) -> list[api.Mount]:
        """The CRI mounts of ``container``'s volumeMounts.

        Raises MountConfigError (the container waits in CreateContainerConfigError) with
        upstream's message; nothing of that container is mounted then.
        """
        planned: list[tuple[int, VolumeMount, str, str, api.MountPropagation]] = []
        for index, mount in enumerate(container.volume_mounts):
            host = volumes.paths.get(mount.name)
            if host is None:
                raise MountConfigError(
                    f'cannot find volume "{mount.name}" to mount into container "{container.name}"'
                )
            sub_path = effective_sub_path(mount.sub_path, mount.sub_path_expr, env)
            propagation = _PROPAGATION.get(mount.mount_propagation or "")
            if propagation is None:
                raise MountConfigError(
                    f'invalid MountPropagation mode: "{mount.mount_propagation}"'
                )
            _check_recursive_read_only(mount)
            planned.append((index, mount, host, sub_path, propagation))
        out = []
        bound: list[str] = []
        try:
            for index, mount, host, sub_path, propagation in planned:
                if sub_path:
                    host = self._sub_path(pod, container, index, mount, host, sub_path)
                    bound.append(host)
                out.append(
                    api.Mount(
                        container_path=mount.mount_path,
                        host_path=host,
                        readonly=bool(mount.read_only) or mount.name in volumes.read_only,
                        propagation=propagation,
                    )
                )
        except MountConfigError:
            for target in bound:  # nothing of a container that is not created stays
                with contextlib.suppress(OSError):
                    release(target)
            raise
        return out

    def devices(
        self, pod: Pod, container: Container, volumes: PodVolumes
    ) -> tuple[DeviceSpec, ...]:
        """The CRI devices of ``container``'s volumeDevices, as upstream's kubelet makes
        them: the pod's device link on the host, ``devicePath`` in the container,
        permissions "mrw" ("r" for a read-only claim). Raises MountConfigError (the
        container waits in CreateContainerConfigError)."""
        out = []
        for entry in container.volume_devices:
            name = str(entry.get("name", "")) if isinstance(entry, Mapping) else ""
            path = str(entry.get("devicePath", "")) if isinstance(entry, Mapping) else ""
            if not os.path.isabs(path):
                raise MountConfigError(f"error DevicePath `{path}` must be an absolute path")
            link = volumes.devices.get(name)
            if link is None:
                raise MountConfigError(
                    f'cannot find volume "{name}" to pass into container "{container.name}"'
                )
            if not os.path.islink(link):  # upstream passes only a link that exists
                log.warning("pod %s: device link %s of volume %s is gone", pod.key, link, name)
                continue
            permissions = "r" if name in volumes.read_only else "mrw"
            out.append(DeviceSpec(container_path=path, host_path=link, permissions=permissions))
        return tuple(out)

    def _sub_path(
        self,
        pod: Pod,
        container: Container,
        index: int,
        mount: VolumeMount,
        volume_path: str,
        sub_path: str,
    ) -> str:
        target = bind_target(pod_dir(self.root_dir, pod.uid), mount.name, container.name, index)
        try:
            return prepare_sub_path(volume_path, sub_path, target)
        except SubPathCreateError as exc:
            log.error(
                "pod %s: cannot create subPath %r of volume %s for container %s: %s",
                pod.key,
                sub_path,
                mount.name,
                container.name,
                exc,
            )
            raise MountConfigError(
                f'failed to create subPath directory for volumeMount "{mount.name}" of '
                f'container "{container.name}"'
            ) from exc
        except (UnsafeSubPath, OSError) as exc:
            # the details stay in the kubelet's log: they describe the host's files
            log.error(
                "pod %s: subPath %r of volume %s for container %s refused: %s",
                pod.key,
                sub_path,
                mount.name,
                container.name,
                exc,
            )
            raise MountConfigError(
                f'failed to prepare subPath for volumeMount "{mount.name}" of container '
                f'"{container.name}"'
            ) from exc

    # -- teardown -------------------------------------------------------------------------

    def pod_uids_on_disk(self) -> set[str]:
        """The pods that have a directory under ``<root>/pods``."""
        try:
            return {e.name for e in os.scandir(pods_dir(self.root_dir)) if e.is_dir()}
        except OSError:
            return set()

    def has_csi_volumes(self, uid: str) -> bool:
        """Whether CSI volumes of the pod are still published (``teardown_csi`` first)."""
        return self.csi is not None and self.csi.has_volumes(uid)

    async def teardown_csi(self, uid: str) -> bool:
        """Unpublish (and unstage) the pod's CSI volumes through their drivers, before
        ``cleanup``; False when one stays (tried again by housekeeping)."""
        return True if self.csi is None else await self.csi.teardown(uid)

    def cleanup(self, uid: str) -> bool:
        """Remove the pod directory: subPath bind mounts first, then every other mount
        below it (tmpfs volumes), then the files. False (and everything left in place)
        when a mount stays, or a CSI volume is still published (its driver unmounts it,
        never this); housekeeping tries again."""
        self._ready.pop(uid, None)
        if self._claim_index is not None:
            self._claim_index.pop(uid, None)
        root = pod_dir(self.root_dir, uid)
        if not os.path.isdir(root):
            return True
        if self.has_csi_volumes(uid):
            return False
        try:
            clean_sub_paths(root)
            for point in mounts_under(root):
                unmount(point)
            left = mounts_under(root)
            if left:
                raise OSError(f"still mounted: {', '.join(left)}")
        except OSError as exc:
            if uid not in self._cleanup_warned:
                self._cleanup_warned.add(uid)
                log.warning("pod directory %s kept: %s", root, exc)
            return False
        self._cleanup_warned.discard(uid)
        shutil.rmtree(root, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(root)
        return True


def _write_record(pod_root: str, record: ClaimRecord) -> None:
    """The claim volume's record, whole or not at all."""
    target = claim_record_path(pod_root, record.volume)
    mkdir_all(os.path.dirname(target), 0o750)
    with open(target + ".tmp", "wb") as fh:
        fh.write(record.to_json())
    os.replace(target + ".tmp", target)


def _check_recursive_read_only(mount: VolumeMount) -> None:
    """recursiveReadOnly: honoured as "not available" (the runtime is not asked whether
    it can), so Enabled is refused with upstream's message and IfPossible is a plain
    read-only mount."""
    mode = mount.recursive_read_only
    if mode in (None, "", "Disabled"):
        return
    if not mount.read_only:
        raise MountConfigError(
            "failed to resolve recursive read-only mode: "
            f'volume "{mount.name}" requested recursive read-only mode, but it is not read-only'
        )
    if mode == "IfPossible":
        return
    if mode == "Enabled":
        raise MountConfigError(
            "failed to resolve recursive read-only mode: "
            f'volume "{mount.name}" requested recursive read-only mode, but it is not '
            "supported by the runtime"
        )
    raise MountConfigError(
        f'failed to resolve recursive read-only mode: unknown recursive read-only mode "{mode}"'
    )
