"""A CSI driver's Node service over its unix socket (grpclib, through the CRI channel).

Every call has a deadline (upstream's csiTimeout, two minutes, for volume operations;
shorter for the driver's facts) and goes through the bounded codec: a driver that hangs
or answers garbage fails the one call, as a ``CriError``.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubelet.cri import CriChannel

from . import csi_grpc as grpc
from . import csi_pb2 as pb
from .facts import NodeInfo, VolumeUsage

OPERATION_TIMEOUT = 120.0
INFO_TIMEOUT = 30.0
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


class CsiClient:
    """The Node service of one driver. Needs a running trio-asyncio loop."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        target = endpoint if "://" in endpoint else f"unix://{endpoint}"
        self._channel = CriChannel(target, max_message_bytes=MAX_MESSAGE_BYTES)
        self._node: grpc.NodeStub | None = None

    def _stub(self) -> grpc.NodeStub:
        if self._node is None:
            self._node = grpc.NodeStub(self._channel.channel())
        return self._node

    def close(self) -> None:
        self._channel.close()

    async def node_get_info(self) -> NodeInfo:
        node = self._stub()
        reply = await self._channel.call(
            "NodeGetInfo", node.NodeGetInfo, pb.NodeGetInfoRequest(), INFO_TIMEOUT
        )
        segments = (
            dict(reply.accessible_topology.segments)
            if reply.HasField("accessible_topology")
            else {}
        )
        return NodeInfo(reply.node_id, int(reply.max_volumes_per_node), segments)

    async def node_get_capabilities(self) -> frozenset[int]:
        node = self._stub()
        reply = await self._channel.call(
            "NodeGetCapabilities",
            node.NodeGetCapabilities,
            pb.NodeGetCapabilitiesRequest(),
            INFO_TIMEOUT,
        )
        return frozenset(c.rpc.type for c in reply.capabilities if c.HasField("rpc"))

    async def stage(
        self,
        volume_id: str,
        staging_path: str,
        cap: pb.VolumeCapability,
        *,
        publish_context: Mapping[str, str],
        volume_context: Mapping[str, str],
        secrets: Mapping[str, str],
    ) -> None:
        request = pb.NodeStageVolumeRequest(
            volume_id=volume_id,
            publish_context=dict(publish_context),
            staging_target_path=staging_path,
            volume_capability=cap,
            secrets=dict(secrets),
            volume_context=dict(volume_context),
        )
        node = self._stub()
        await self._channel.call(
            "NodeStageVolume", node.NodeStageVolume, request, OPERATION_TIMEOUT
        )

    async def unstage(self, volume_id: str, staging_path: str) -> None:
        request = pb.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=staging_path)
        node = self._stub()
        await self._channel.call(
            "NodeUnstageVolume", node.NodeUnstageVolume, request, OPERATION_TIMEOUT
        )

    async def publish(
        self,
        volume_id: str,
        target_path: str,
        cap: pb.VolumeCapability,
        *,
        read_only: bool,
        staging_path: str = "",
        publish_context: Mapping[str, str],
        volume_context: Mapping[str, str],
        secrets: Mapping[str, str],
    ) -> None:
        request = pb.NodePublishVolumeRequest(
            volume_id=volume_id,
            publish_context=dict(publish_context),
            staging_target_path=staging_path,
            target_path=target_path,
            volume_capability=cap,
            readonly=read_only,
            secrets=dict(secrets),
            volume_context=dict(volume_context),
        )
        node = self._stub()
        await self._channel.call(
            "NodePublishVolume", node.NodePublishVolume, request, OPERATION_TIMEOUT
        )

    async def unpublish(self, volume_id: str, target_path: str) -> None:
        request = pb.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target_path)
        node = self._stub()
        await self._channel.call(
            "NodeUnpublishVolume", node.NodeUnpublishVolume, request, OPERATION_TIMEOUT
        )

    async def expand(
        self,
        volume_id: str,
        volume_path: str,
        required_bytes: int,
        cap: pb.VolumeCapability,
        *,
        staging_path: str = "",
        secrets: Mapping[str, str] | None = None,
    ) -> int:
        """NodeExpandVolume: the volume's filesystem grown to ``required_bytes``; the
        capacity the driver reports (0: not said)."""
        request = pb.NodeExpandVolumeRequest(
            volume_id=volume_id,
            volume_path=volume_path,
            capacity_range=pb.CapacityRange(required_bytes=required_bytes),
            staging_target_path=staging_path,
            volume_capability=cap,
            secrets=dict(secrets or {}),
        )
        node = self._stub()
        reply = await self._channel.call(
            "NodeExpandVolume", node.NodeExpandVolume, request, OPERATION_TIMEOUT
        )
        return int(reply.capacity_bytes)

    async def volume_stats(self, volume_id: str, volume_path: str) -> VolumeUsage:
        request = pb.NodeGetVolumeStatsRequest(volume_id=volume_id, volume_path=volume_path)
        node = self._stub()
        reply = await self._channel.call(
            "NodeGetVolumeStats", node.NodeGetVolumeStats, request, INFO_TIMEOUT
        )
        out: dict[str, object] = {}
        for usage in reply.usage:
            if usage.unit == pb.VolumeUsage.BYTES:
                out |= {
                    "capacity_bytes": usage.total,
                    "available_bytes": usage.available,
                    "used_bytes": usage.used,
                }
            elif usage.unit == pb.VolumeUsage.INODES:
                out |= {
                    "inodes": usage.total,
                    "inodes_free": usage.available,
                    "inodes_used": usage.used,
                }
        condition = reply.volume_condition if reply.HasField("volume_condition") else None
        return VolumeUsage(
            **out,  # type: ignore[arg-type]
            abnormal=condition.abnormal if condition is not None else None,
            message=condition.message if condition else "",
        )
