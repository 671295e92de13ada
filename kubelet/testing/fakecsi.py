"""A CSI node plugin and a node-driver-registrar stand-in, over real gRPC unix sockets.

``FakeCsiDriver`` serves the CSI v1 Identity and Node services: NodeGetInfo answers its
node ID, topology and volume limit; NodePublishVolume bind-mounts a host directory
(``volume_context["hostDir"]``, else ``<data_dir>/<volume id>``) onto the target with
``mode="bind"`` (needs root: the e2e tests), or just makes the target directory and
writes ``published`` in it with ``mode="dir"`` (the unit and integration tests). A
block volume (a ``block`` capability) is published as a file at the target holding the
volume id. Stage and unstage make and remove the staging directory when ``stage=True``.

``FakeRegistrar`` serves the pluginregistration v1 ``Registration`` service on
``<registry>/<name>-reg.sock``, as the node-driver-registrar sidecar does, and keeps the
statuses the kubelet sends.

Faults, each settable while serving: ``delay`` (seconds before answering), ``hang``
(never answer), ``fail`` (rpc → (grpc Status, message)), ``garbage`` (the registrar
answers GetInfo with bytes that are no PluginInfo), ``crash()`` (connections cut,
socket gone). Both run on the test's trio-asyncio loop, so ``autojump_clock`` holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio
import trio_asyncio
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server

from kubelet.cri import LimitedProtoCodec
from kubelet.csi import csi_pb2 as csi
from kubelet.pluginmanager import pluginregistration_api_pb2 as reg
from kubelet.volumes.mounts import is_mount_point


@attrs.define
class Faults:
    delay: float = 0.0
    hang: bool = False
    fail: dict[str, tuple[Status, str]] = attrs.field(factory=dict)

    async def apply(self, rpc: str) -> None:
        if self.hang:
            await asyncio.Event().wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        if rpc in self.fail:
            status, message = self.fail[rpc]
            raise GRPCError(status, message)


class _Garbage:
    """A "message" whose bytes are no protobuf: field 1 announces more bytes than follow."""

    def SerializeToString(self) -> bytes:
        return b"\x0a\xff\xff\xff\xff\x0f"


class _Served:
    """One grpclib server on a unix socket, on the running trio-asyncio loop."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._server: Server | None = None
        self.calls: list[tuple[str, Any]] = []
        self.faults = Faults()

    def __mapping__(self) -> dict[str, Handler]:
        raise NotImplementedError

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        server = Server([self], codec=LimitedProtoCodec())
        await trio_asyncio.aio_as_trio(server.start)(path=str(self.path))
        self._server = server

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with trio.move_on_after(5):
                await trio_asyncio.aio_as_trio(server.wait_closed)()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    crash = stop

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[Any]:
        await self.start()
        try:
            yield self
        finally:
            with trio.CancelScope(shield=True):
                await self.stop()

    def _unary(self, prefix: str, rpc: str, req: Any, resp: Any, answer: Any) -> Handler:
        async def handle(stream: Any) -> None:
            request = await stream.recv_message()
            self.calls.append((rpc, request))
            await self.faults.apply(rpc)
            await stream.send_message(answer(request))

        return Handler(handle, Cardinality.UNARY_UNARY, req, resp)


class FakeRegistrar(_Served):
    """The node-driver-registrar: tells the kubelet a plugin's type, name and endpoint."""

    def __init__(
        self,
        registry: Path,
        name: str,
        endpoint: str,
        *,
        type: str = "CSIPlugin",
        versions: tuple[str, ...] = ("1.0.0",),
    ) -> None:
        super().__init__(registry / f"{name}-reg.sock")
        self.info = reg.PluginInfo(
            type=type, name=name, endpoint=endpoint, supported_versions=list(versions)
        )
        self.garbage = False
        self.statuses: list[tuple[bool, str]] = []

    def __mapping__(self) -> dict[str, Handler]:
        base = "/pluginregistration.Registration/"
        get_info = self._unary(
            base, "GetInfo", reg.InfoRequest, reg.PluginInfo, lambda _: self._info()
        )
        if self.garbage:
            get_info = self._unary(base, "GetInfo", reg.InfoRequest, _Garbage, lambda _: _Garbage())
        return {
            base + "GetInfo": get_info,
            base + "NotifyRegistrationStatus": self._unary(
                base,
                "NotifyRegistrationStatus",
                reg.RegistrationStatus,
                reg.RegistrationStatusResponse,
                self._notified,
            ),
        }

    def _info(self) -> reg.PluginInfo:
        return self.info

    def _notified(self, status: reg.RegistrationStatus) -> reg.RegistrationStatusResponse:
        self.statuses.append((status.plugin_registered, status.error))
        return reg.RegistrationStatusResponse()

    @property
    def registered(self) -> bool | None:
        """The last status the kubelet sent (None: none yet)."""
        return self.statuses[-1][0] if self.statuses else None


class FakeCsiDriver(_Served):
    """A CSI node plugin; see the module docstring."""

    def __init__(
        self,
        path: Path,
        name: str = "csi.example.com",
        *,
        node_id: str = "node-1",
        topology: Mapping[str, str] | None = None,
        max_volumes: int = 0,
        stage: bool = False,
        mode: str = "dir",
        data_dir: Path | None = None,
        stats: tuple[int, int, int] | None = (1 << 30, 1 << 29, 1 << 29),
        condition: tuple[bool, str] | None = None,
        expand: bool = False,
    ) -> None:
        super().__init__(path)
        self.name = name
        self.node_id = node_id
        self.topology = dict(topology or {})
        self.max_volumes = max_volumes
        self.stage = stage
        self.mode = mode
        self.data_dir = data_dir
        self.stats = stats
        """(total, available, used) bytes NodeGetVolumeStats answers; None: no stats"""
        self.condition = condition
        """(abnormal, message) NodeGetVolumeStats answers, with VOLUME_CONDITION"""
        self.expand = expand
        """EXPAND_VOLUME: NodeExpandVolume grows the volume's total to the required bytes"""
        self.published: dict[str, str] = {}
        """target path → volume id"""
        self.staged: dict[str, str] = {}

    def __mapping__(self) -> dict[str, Handler]:
        rpcs: dict[str, tuple[Any, Any, Any]] = {
            "NodeGetInfo": (csi.NodeGetInfoRequest, csi.NodeGetInfoResponse, self._info),
            "NodeGetCapabilities": (
                csi.NodeGetCapabilitiesRequest,
                csi.NodeGetCapabilitiesResponse,
                self._capabilities,
            ),
            "NodeStageVolume": (
                csi.NodeStageVolumeRequest,
                csi.NodeStageVolumeResponse,
                self._stage,
            ),
            "NodeUnstageVolume": (
                csi.NodeUnstageVolumeRequest,
                csi.NodeUnstageVolumeResponse,
                self._unstage,
            ),
            "NodePublishVolume": (
                csi.NodePublishVolumeRequest,
                csi.NodePublishVolumeResponse,
                self._publish,
            ),
            "NodeUnpublishVolume": (
                csi.NodeUnpublishVolumeRequest,
                csi.NodeUnpublishVolumeResponse,
                self._unpublish,
            ),
            "NodeExpandVolume": (
                csi.NodeExpandVolumeRequest,
                csi.NodeExpandVolumeResponse,
                self._expand,
            ),
            "NodeGetVolumeStats": (
                csi.NodeGetVolumeStatsRequest,
                csi.NodeGetVolumeStatsResponse,
                self._volume_stats,
            ),
        }
        out = {
            f"/csi.v1.Node/{rpc}": self._unary("/csi.v1.Node/", rpc, *spec)
            for rpc, spec in rpcs.items()
        }
        out["/csi.v1.Identity/GetPluginInfo"] = self._unary(
            "/csi.v1.Identity/",
            "GetPluginInfo",
            csi.GetPluginInfoRequest,
            csi.GetPluginInfoResponse,
            lambda _: csi.GetPluginInfoResponse(name=self.name, vendor_version="1.0.0"),
        )
        return out

    def requests(self, rpc: str) -> list[Any]:
        return [r for name, r in self.calls if name == rpc]

    def _info(self, _: Any) -> csi.NodeGetInfoResponse:
        return csi.NodeGetInfoResponse(
            node_id=self.node_id,
            max_volumes_per_node=self.max_volumes,
            accessible_topology=csi.Topology(segments=self.topology) if self.topology else None,
        )

    def _capabilities(self, _: Any) -> csi.NodeGetCapabilitiesResponse:
        rpc = csi.NodeServiceCapability.RPC
        kinds = [rpc.GET_VOLUME_STATS] + ([rpc.STAGE_UNSTAGE_VOLUME] if self.stage else [])
        kinds += [rpc.VOLUME_CONDITION] if self.condition is not None else []
        kinds += [rpc.EXPAND_VOLUME] if self.expand else []
        return csi.NodeGetCapabilitiesResponse(
            capabilities=[csi.NodeServiceCapability(rpc=rpc(type=k)) for k in kinds]
        )

    def _stage(self, request: csi.NodeStageVolumeRequest) -> csi.NodeStageVolumeResponse:
        os.makedirs(request.staging_target_path, exist_ok=True)
        self.staged[request.staging_target_path] = request.volume_id
        return csi.NodeStageVolumeResponse()

    def _unstage(self, request: csi.NodeUnstageVolumeRequest) -> csi.NodeUnstageVolumeResponse:
        self.staged.pop(request.staging_target_path, None)
        return csi.NodeUnstageVolumeResponse()

    def _source(self, request: csi.NodePublishVolumeRequest) -> str:
        host = request.volume_context.get("hostDir", "")
        if host:
            return host
        base = self.data_dir or self.path.parent
        return str(base / request.volume_id.replace("/", "_"))

    def _publish(self, request: csi.NodePublishVolumeRequest) -> csi.NodePublishVolumeResponse:
        target = request.target_path
        if request.volume_capability.HasField("block"):
            return self._publish_block(request)
        os.makedirs(target, exist_ok=True)
        if self.mode == "bind":
            source = self._source(request)
            os.makedirs(source, exist_ok=True)
            if not is_mount_point(target):
                flags = ["-o", "bind,ro"] if request.readonly else ["--bind"]
                subprocess.run(["mount", *flags, source, target], check=True)
        else:
            Path(target, "published").write_text(request.volume_id)
        self.published[target] = request.volume_id
        return csi.NodePublishVolumeResponse()

    def _publish_block(
        self, request: csi.NodePublishVolumeRequest
    ) -> csi.NodePublishVolumeResponse:
        """A block volume: the target is a file the plugin makes (its parent is the
        kubelet's), holding the volume id, as a device node would stand there."""
        target = request.target_path
        if not os.path.isdir(os.path.dirname(target)):
            raise GRPCError(Status.FAILED_PRECONDITION, f"no parent directory of {target}")
        Path(target).write_text(request.volume_id)
        self.published[target] = request.volume_id
        return csi.NodePublishVolumeResponse()

    def _unpublish(
        self, request: csi.NodeUnpublishVolumeRequest
    ) -> csi.NodeUnpublishVolumeResponse:
        target = request.target_path
        if os.path.isfile(target):  # a block volume's file
            os.unlink(target)
        if self.mode == "bind" and is_mount_point(target):
            subprocess.run(["umount", target], check=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(target, "published"))
        with contextlib.suppress(FileNotFoundError, OSError):
            os.rmdir(target)
        self.published.pop(target, None)
        return csi.NodeUnpublishVolumeResponse()

    def _expand(self, request: csi.NodeExpandVolumeRequest) -> csi.NodeExpandVolumeResponse:
        required = request.capacity_range.required_bytes
        if self.stats is not None:
            self.stats = (required, *self.stats[1:])
        return csi.NodeExpandVolumeResponse(capacity_bytes=required)

    def _volume_stats(self, request: Any) -> csi.NodeGetVolumeStatsResponse:
        if self.stats is None:
            raise GRPCError(Status.UNIMPLEMENTED, "no stats")
        total, available, used = self.stats
        condition = None
        if self.condition is not None:
            condition = csi.VolumeCondition(abnormal=self.condition[0], message=self.condition[1])
        return csi.NodeGetVolumeStatsResponse(
            volume_condition=condition,
            usage=[
                csi.VolumeUsage(
                    total=total, available=available, used=used, unit=csi.VolumeUsage.BYTES
                ),
                csi.VolumeUsage(total=1000, available=900, used=100, unit=csi.VolumeUsage.INODES),
            ],
        )
