"""What the node keeps of a CSI driver's answers, as plain values: NodeGetInfo's facts,
a volume's usage, the Node service capability numbers, and the VolumeCapability the
kubelet asks for.

Plain so that a kubelet with no CSI driver and no CSI volume never loads the CSI
protobuf or its gRPC client: ``capability``/``block_capability`` import the protobuf
when called, which is only when a volume is staged, published or expanded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from .csi_pb2 import VolumeCapability

# NodeServiceCapability.RPC.Type, the CSI spec's numbers (the generated enum's values are
# these ints; a test holds them equal)
STAGE_UNSTAGE_VOLUME = 1
GET_VOLUME_STATS = 2
EXPAND_VOLUME = 3
VOLUME_CONDITION = 4
VOLUME_MOUNT_GROUP = 6


@attrs.frozen
class NodeInfo:
    """NodeGetInfo's answer."""

    node_id: str
    max_volumes: int = 0
    topology: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class VolumeUsage:
    """NodeGetVolumeStats' answer, in upstream's terms (None: not reported)."""

    capacity_bytes: int | None = None
    available_bytes: int | None = None
    used_bytes: int | None = None
    inodes: int | None = None
    inodes_free: int | None = None
    inodes_used: int | None = None
    abnormal: bool | None = None
    """the volume_condition's verdict (None: the driver gave none)"""
    message: str = ""


def capability(
    read_only: bool, fs_type: str = "", mount_flags: tuple[str, ...] = ()
) -> VolumeCapability:
    """A filesystem volume's capability: single-node writer, or reader-only."""
    from . import csi_pb2 as pb

    return pb.VolumeCapability(
        mount=pb.VolumeCapability.MountVolume(fs_type=fs_type, mount_flags=list(mount_flags)),
        access_mode=_access_mode(read_only),
    )


def block_capability(read_only: bool) -> VolumeCapability:
    """A raw block volume's capability (volumeMode Block), with the access mode
    ``capability`` gives a filesystem volume."""
    from . import csi_pb2 as pb

    return pb.VolumeCapability(
        block=pb.VolumeCapability.BlockVolume(), access_mode=_access_mode(read_only)
    )


def _access_mode(read_only: bool) -> VolumeCapability.AccessMode:
    from . import csi_pb2 as pb

    mode = (
        pb.VolumeCapability.AccessMode.SINGLE_NODE_READER_ONLY
        if read_only
        else pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
    )
    return pb.VolumeCapability.AccessMode(mode=mode)
