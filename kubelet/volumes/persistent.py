"""Mounting a bound PersistentVolume: its source decides (the one dispatch point).

``hostPath`` and ``local`` volumes are bound into the containers from the volume's path,
as a pod's hostPath volume is: a hostPath volume after its ``type`` check, a local one
when its path is a directory. Before that, as upstream's mount operation: the volume's
required node affinity must match this node's labels, and a volume whose only access
mode is ReadWriteOncePod must not be in use by another pod on this node. A ``csi``
volume waits for its driver; any other in-tree type is refused by name. A volumeMode
Block volume is mapped as a device: a ``local`` one's block device, a ``csi`` one through
its driver (``csiblock``); other sources have no block mapper, as upstream's hostPath.

Each failure is upstream's event text, ``<operation> failed for volume "<pv>" : <why>``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from .claims import RWOP_IN_USE, BoundClaim, node_affinity_problem, only_read_write_once_pod
from .hostpath import VolumeError, check_host_path

HOST_PATH = "kubernetes.io~host-path"
LOCAL = "kubernetes.io~local-volume"
CSI = "kubernetes.io~csi"


class MountFailure(VolumeError):
    """A bound volume that cannot be mounted; ``str`` is the whole event message."""

    def __init__(self, operation: str, pv_name: str, why: str) -> None:
        super().__init__(f'{operation} failed for volume "{pv_name}" : {why}')


def unsupported_pv_message(pv_name: str, kind: str | None) -> str:
    """Upstream's populator error when no plugin takes the volume's source."""
    what = f"{kind} volumes are" if kind else "volumes of this type are"
    return (
        f'failed to get Plugin from volumeSpec for volume "{pv_name}" err=no volume plugin '
        f"matched: {what} not supported by this kubelet"
    )


def plugin_of(bound: BoundClaim) -> str | None:
    """The plugin that mounts the volume here (None: no plugin takes its source)."""
    return {"hostPath": HOST_PATH, "local": LOCAL, "csi": CSI}.get(bound.source_kind or "")


def csi_not_registered(bound: BoundClaim) -> MountFailure:
    """A CSI volume whose driver has not registered on this node (upstream's text)."""
    driver = str(bound.source.get("driver") or "")
    return MountFailure(
        "MountVolume.MountDevice",
        bound.pv_name,
        "kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: "
        f"driver name {driver} not found in the list of registered CSI drivers",
    )


def is_block(bound: BoundClaim) -> bool:
    """A volumeMode Block volume: mapped into containers as a device (volumeDevices)."""
    return str(_spec(bound).get("volumeMode") or "Filesystem") == "Block"


def no_block_plugin(bound: BoundClaim) -> VolumeError:
    """A Block volume of a source without a block mapper (hostPath, ...): upstream's
    operation generator's words."""
    return VolumeError(
        "MapVolume.FindMapperPluginBySpec failed to find BlockVolumeMapper plugin. "
        f'Volume plugin is nil. for volume "{bound.pv_name}"'
    )


def local_block_device(bound: BoundClaim) -> str:
    """The block device a local Block PersistentVolume names (``local.path``)."""
    path, mode = _local_stat(bound, "MapVolume.NewBlockVolumeMapper initialization",
                             "MapVolume.MapPodDevice")  # fmt: skip
    if not stat.S_ISBLK(mode):
        raise MountFailure(
            "MapVolume.MapPodDevice", bound.pv_name, f'path "{path}" is not a block device'
        )
    return path


def _local_stat(bound: BoundClaim, unset: str, absent: str) -> tuple[str, int]:
    """A local PV's ``local.path`` and its mode; ``unset`` and ``absent`` name the step
    that fails (upstream's) when the path is not set or does not exist."""
    path = str(bound.source.get("path") or "")
    if not path:
        raise MountFailure(
            unset, bound.pv_name, "local volume source is nil or local path is not set"
        )
    try:
        return path, os.stat(path).st_mode
    except FileNotFoundError:
        raise MountFailure(absent, bound.pv_name, f'path "{path}" does not exist') from None


def _spec(bound: BoundClaim) -> Mapping[str, object]:
    spec = bound.pv.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _local_path(bound: BoundClaim) -> str:
    """Upstream's local plugin: the path must exist and be a directory (a block device
    in volumeMode Filesystem would be formatted and mounted: not done by this kubelet;
    volumeMode Block maps it, ``local_block_device``)."""
    step = "MountVolume.NewMounter initialization"
    path, mode = _local_stat(bound, step, step)
    if stat.S_ISBLK(mode):
        why = "local volumes on a block device are not supported by this kubelet"
        raise MountFailure(step, bound.pv_name, why)
    if not stat.S_ISDIR(mode):
        raise MountFailure(step, bound.pv_name, "only directory and block device are supported")
    return path


def check_persistent_volume(
    bound: BoundClaim, node_labels: Mapping[str, str], used_elsewhere: bool
) -> None:
    """What every PersistentVolume must pass on this node before it is mounted, whatever
    its source: its node affinity, and ReadWriteOncePod's one pod. Raises MountFailure."""
    problem = node_affinity_problem(bound.pv, node_labels)
    if problem is not None:
        raise MountFailure("MountVolume.NodeAffinity check", bound.pv_name, problem)
    if used_elsewhere and only_read_write_once_pod(bound.pv):
        raise MountFailure("MountVolume.SetUp", bound.pv_name, RWOP_IN_USE)


def mount_persistent_volume(
    bound: BoundClaim, node_labels: Mapping[str, str], used_elsewhere: bool
) -> str:
    """The host path of a hostPath or local PersistentVolume to bind into the containers;
    raises MountFailure (the pod waits, FailedMount, retried). A CSI one is published by
    its driver instead, after ``check_persistent_volume`` (``CsiVolumes.publish_persistent``;
    ``csi_not_registered`` without CSI)."""
    kind = bound.source_kind
    path = _local_path(bound) if kind == "local" else ""
    check_persistent_volume(bound, node_labels, used_elsewhere)
    if kind == "hostPath":
        try:
            return check_host_path(bound.source)
        except (VolumeError, OSError) as exc:
            raise MountFailure("MountVolume.SetUp", bound.pv_name, str(exc)) from exc
    assert kind == "local", kind
    return path
