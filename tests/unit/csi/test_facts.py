"""The CSI facts the kubelet keeps without loading the CSI protobuf."""

import kubelet.csi
from kubelet.csi import csi_pb2 as pb
from kubelet.csi import facts
from kubelet.csi.client import CsiClient

RPC = pb.NodeServiceCapability.RPC
Mode = pb.VolumeCapability.AccessMode


def test_the_capability_numbers_are_the_protobufs() -> None:
    assert facts.STAGE_UNSTAGE_VOLUME == RPC.STAGE_UNSTAGE_VOLUME
    assert facts.GET_VOLUME_STATS == RPC.GET_VOLUME_STATS
    assert facts.EXPAND_VOLUME == RPC.EXPAND_VOLUME
    assert facts.VOLUME_CONDITION == RPC.VOLUME_CONDITION
    assert facts.VOLUME_MOUNT_GROUP == RPC.VOLUME_MOUNT_GROUP


def test_a_filesystem_capability() -> None:
    cap = facts.capability(False, "ext4", ("noatime",))
    assert cap.WhichOneof("access_type") == "mount"
    assert cap.mount.fs_type == "ext4"
    assert list(cap.mount.mount_flags) == ["noatime"]
    assert cap.access_mode.mode == Mode.SINGLE_NODE_WRITER
    assert facts.capability(True).access_mode.mode == Mode.SINGLE_NODE_READER_ONLY


def test_a_block_capability() -> None:
    cap = facts.block_capability(True)
    assert cap.WhichOneof("access_type") == "block"
    assert cap.access_mode.mode == Mode.SINGLE_NODE_READER_ONLY
    assert facts.block_capability(False).access_mode.mode == Mode.SINGLE_NODE_WRITER


def test_the_face_offers_the_client_on_first_use() -> None:
    assert kubelet.csi.CsiClient is CsiClient
    assert "CsiClient" in vars(kubelet.csi)
