"""CSI volumes: inline ``csi:`` volumes and PersistentVolumes whose spec has ``csi``.

Upstream's CSI volume plugin, with its layout on disk:

* a pod's volume is published at ``<root>/pods/<uid>/volumes/kubernetes.io~csi/<vol>/mount``
  with ``vol_data.json`` beside it (the driver, the volume handle, the lifecycle mode:
  what a restarted kubelet needs to unpublish it);
* a persistent volume of a driver with STAGE_UNSTAGE_VOLUME is first staged at
  ``<root>/plugins/kubernetes.io/csi/<driver>/<sha256 of the handle>/globalmount``
  (its own ``vol_data.json`` one level up), unstaged when no pod publishes it any more.

The CSIDriver object is honoured: ``volumeLifecycleModes`` (an inline volume needs
Ephemeral), ``attachRequired`` (a persistent volume waits for the VolumeAttachment of
its PV and this node to report ``attached``, and its ``attachmentMetadata`` is the
publish context), ``podInfoOnMount`` (the ``csi.storage.k8s.io/pod.*`` volume context),
``fsGroupPolicy``, ``requiresRepublish`` (published again at every pod sync) and
``tokenRequests`` (service-account tokens in the volume context). No CSIDriver object
means upstream's defaults: attach required, Persistent only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

import attrs

from kubelet.api import Pod, Resource, Volume
from kubelet.boundedio import InputRefused, loads_json, read_regular_file
from kubelet.cri import CriError

from .dirs import mkdir_all
from .hostpath import VolumeError

log = logging.getLogger(__name__)

CSI_PLUGIN_DIR = "kubernetes.io~csi"
VOL_DATA = "vol_data.json"
MAX_VOL_DATA = 64 * 1024
CSIDRIVERS = Resource("storage.k8s.io/v1", "csidrivers", namespaced=False)
VOLUME_ATTACHMENTS = Resource("storage.k8s.io/v1", "volumeattachments", namespaced=False)
EPHEMERAL = "Ephemeral"
PERSISTENT = "Persistent"
STAGE_UNSTAGE = 1
"""NodeServiceCapability.RPC.STAGE_UNSTAGE_VOLUME"""


@attrs.frozen
class DriverPolicy:
    """What a CSIDriver object says (upstream's defaults when there is none)."""

    exists: bool = False
    attach_required: bool = True
    pod_info_on_mount: bool = False
    fs_group_policy: str = "ReadWriteOnceWithFSType"
    requires_republish: bool = False
    lifecycle_modes: tuple[str, ...] = (PERSISTENT,)
    token_requests: tuple[tuple[str, int], ...] = ()
    """(audience, expirationSeconds) pairs"""


def driver_policy(obj: Mapping[str, Any] | None) -> DriverPolicy:
    if obj is None:
        return DriverPolicy()
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    spec = spec or {}
    tokens = tuple(
        (str(t.get("audience", "")), int(t.get("expirationSeconds") or 3600))
        for t in spec.get("tokenRequests") or []
        if isinstance(t, Mapping)
    )
    return DriverPolicy(
        exists=True,
        attach_required=spec.get("attachRequired") is not False,
        pod_info_on_mount=spec.get("podInfoOnMount") is True,
        fs_group_policy=str(spec.get("fsGroupPolicy") or "ReadWriteOnceWithFSType"),
        requires_republish=spec.get("requiresRepublish") is True,
        lifecycle_modes=tuple(spec.get("volumeLifecycleModes") or (PERSISTENT,)),
        token_requests=tokens,
    )


@attrs.frozen
class CsiSource:
    """One CSI volume to publish, from an inline volume or a PV's ``spec.csi``."""

    name: str
    """the pod's volume name"""
    driver: str
    handle: str
    mode: str
    read_only: bool = False
    fs_type: str = ""
    attributes: Mapping[str, str] = attrs.field(factory=dict)
    publish_secret: tuple[str, str] | None = None
    stage_secret: tuple[str, str] | None = None
    pv_name: str = ""
    mount_options: tuple[str, ...] = ()
    single_writer: bool = True
    """the PV's access modes are ReadWriteOnce only (fsGroupPolicy ReadWriteOnceWithFSType)"""


def ephemeral_handle(uid: str, volume_name: str) -> str:
    """Upstream's volume handle of an inline volume: ``csi-`` and sha256(uid + name)."""
    return "csi-" + hashlib.sha256(f"{uid}{volume_name}".encode()).hexdigest()


def attachment_name(handle: str, driver: str, node: str) -> str:
    """The VolumeAttachment the attach/detach controller makes for a volume on a node."""
    return "csi-" + hashlib.sha256(f"{handle}{driver}{node}".encode()).hexdigest()


def global_dir(root_dir: str, driver: str, handle: str) -> str:
    digest = hashlib.sha256(handle.encode()).hexdigest()
    return os.path.join(root_dir, "plugins", "kubernetes.io", "csi", driver, digest)


def inline_source(pod: Pod, volume: Volume) -> CsiSource:
    spec = volume.csi or {}
    secret = spec.get("nodePublishSecretRef") or {}
    return CsiSource(
        name=volume.name,
        driver=str(spec.get("driver", "")),
        handle=ephemeral_handle(pod.uid, volume.name),
        mode=EPHEMERAL,
        read_only=spec.get("readOnly") is True,
        fs_type=str(spec.get("fsType") or ""),
        attributes={str(k): str(v) for k, v in (spec.get("volumeAttributes") or {}).items()},
        publish_secret=(pod.metadata.namespace, str(secret["name"]))
        if isinstance(secret, Mapping) and secret.get("name")
        else None,
    )


def _ref(ref: object) -> tuple[str, str] | None:
    if isinstance(ref, Mapping) and ref.get("name"):
        return str(ref.get("namespace") or ""), str(ref["name"])
    return None


def persistent_source(volume_name: str, pv: Mapping[str, Any], read_only: bool) -> CsiSource:
    """A PV's ``spec.csi`` (a PV without it is a VolumeError)."""
    spec = pv.get("spec") or {}
    csi = spec.get("csi")
    if not isinstance(csi, Mapping):
        raise VolumeError("the PersistentVolume has no csi source")
    modes = spec.get("accessModes") or []
    return CsiSource(
        name=volume_name,
        driver=str(csi.get("driver", "")),
        handle=str(csi.get("volumeHandle", "")),
        mode=PERSISTENT,
        read_only=read_only or csi.get("readOnly") is True,
        fs_type=str(csi.get("fsType") or ""),
        attributes={str(k): str(v) for k, v in (csi.get("volumeAttributes") or {}).items()},
        publish_secret=_ref(csi.get("nodePublishSecretRef")),
        stage_secret=_ref(csi.get("nodeStageSecretRef")),
        pv_name=str((pv.get("metadata") or {}).get("name", "")),
        mount_options=tuple(str(o) for o in spec.get("mountOptions") or []),
        single_writer=list(modes) == ["ReadWriteOnce"],
    )


def read_vol_data(path: str) -> dict[str, str]:
    data = loads_json(read_regular_file(path, MAX_VOL_DATA), max_bytes=MAX_VOL_DATA)
    if not isinstance(data, dict):
        raise InputRefused(f"{path}: not a JSON object")
    return {str(k): str(v) for k, v in data.items()}


def write_vol_data(path: str, data: Mapping[str, str]) -> None:
    mkdir_all(os.path.dirname(path), 0o750)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(data), f)
    os.replace(tmp, path)


def rpc_error(exc: CriError) -> str:
    """A failed CSI call in gRPC's words, as upstream's events show it."""
    code = exc.code.name if exc.code is not None else "Unavailable"
    return f"rpc error: code = {_go_code(code)} desc = {exc.message}"


def _go_code(name: str) -> str:
    """grpclib's ``DEADLINE_EXCEEDED`` → Go's ``DeadlineExceeded``."""
    return "".join(part.capitalize() for part in name.split("_"))
