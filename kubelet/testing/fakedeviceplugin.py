"""A device plugin speaking the real v1beta1 API over a unix socket, with faults.

``FakeDevicePlugin`` serves ``v1beta1.DevicePlugin`` on ``<dir>/<endpoint>`` and
registers with the kubelet's ``kubelet.sock`` in the same directory. Its devices are
``{id: health}``; ``set_health`` pushes a new list on every ListAndWatch stream. Faults:
``crash`` (streams cut, socket gone), ``allocate_delay`` (a slow Allocate),
``allocate_error``, ``garbage`` (ListAndWatch answers bytes that are not a message), and
``register`` may be called in a storm. Needs a running trio-asyncio loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

import trio
import trio_asyncio
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from kubelet.cm.devices import HEALTHY, SOCKET_NAME, VERSION, api, api_grpc

from .fakeruntime import _FakeServer


class _Service(api_grpc.DevicePluginBase):
    def __init__(self, plugin: FakeDevicePlugin) -> None:
        self.plugin = plugin

    async def GetDevicePluginOptions(self, stream: Any) -> None:
        await stream.recv_message()
        if self.plugin.options_delay:
            await asyncio.sleep(self.plugin.options_delay)
        await stream.send_message(self.plugin.options())

    async def ListAndWatch(self, stream: Any) -> None:
        await stream.recv_message()
        plugin = self.plugin
        plugin.watchers += 1
        try:
            while True:
                changed = plugin._changed
                if plugin.crashed:
                    raise GRPCError(Status.UNAVAILABLE, "plugin crashed")
                await stream.send_message(plugin.device_list())
                await changed.wait()
        finally:
            plugin.watchers -= 1

    async def GetPreferredAllocation(self, stream: Any) -> None:
        request = await stream.recv_message()
        plugin = self.plugin
        plugin.preferred_requests.append(request)
        responses = []
        for cr in request.container_requests:
            ids = [*cr.must_include_deviceIDs]
            for dev in reversed(sorted(cr.available_deviceIDs)):  # prefers the last ones
                if len(ids) >= cr.allocation_size:
                    break
                if dev not in ids:
                    ids.append(dev)
            responses.append(api.ContainerPreferredAllocationResponse(deviceIDs=ids))
        await stream.send_message(api.PreferredAllocationResponse(container_responses=responses))

    async def Allocate(self, stream: Any) -> None:
        request = await stream.recv_message()
        plugin = self.plugin
        plugin.allocations.append([list(cr.devices_ids) for cr in request.container_requests])
        if plugin.allocate_delay:
            await asyncio.sleep(plugin.allocate_delay)
        if plugin.allocate_error:
            raise GRPCError(Status.INTERNAL, plugin.allocate_error)
        responses = [plugin.response_for(list(cr.devices_ids)) for cr in request.container_requests]
        await stream.send_message(api.AllocateResponse(container_responses=responses))

    async def PreStartContainer(self, stream: Any) -> None:
        request = await stream.recv_message()
        self.plugin.pre_starts.append(list(request.devices_ids))
        await stream.send_message(api.PreStartContainerResponse())


class FakeDevicePlugin:
    def __init__(
        self,
        directory: str,
        resource: str = "example.com/resource",
        devices: Mapping[str, str] | None = None,
        *,
        endpoint: str = "example.sock",
        pre_start_required: bool = False,
        preferred: bool = False,
        topology: Mapping[str, int] | None = None,
        host_device: str = "/dev/null",
        cdi: bool = True,
        mounts: tuple[tuple[str, str, bool], ...] = (),
    ) -> None:
        self.directory = directory
        self.resource = resource
        self.devices = dict(devices if devices is not None else {"dev0": HEALTHY, "dev1": HEALTHY})
        self.endpoint = endpoint
        self.pre_start_required = pre_start_required
        self.preferred = preferred
        self.topology = dict(topology or {})
        self.host_device = host_device
        self.cdi = cdi
        self.mounts = mounts
        """(container path, host path, read-only) given with every Allocate"""
        """answer Allocate with CDI device names (a runtime without their specs refuses)"""
        self.allocate_delay = 0.0
        self.options_delay = 0.0
        """a plugin that hangs at registration (GetDevicePluginOptions)"""
        self.allocate_error = ""
        self.allocations: list[list[list[str]]] = []
        self.pre_starts: list[list[str]] = []
        self.preferred_requests: list[Any] = []
        self.watchers = 0
        self.crashed = False
        self._server: _FakeServer | None = None
        self._transports: set[asyncio.BaseTransport] = set()
        self._changed = asyncio.Event()

    @property
    def path(self) -> str:
        return os.path.join(self.directory, self.endpoint)

    def options(self) -> Any:
        return api.DevicePluginOptions(
            pre_start_required=self.pre_start_required,
            get_preferred_allocation_available=self.preferred,
        )

    def device_list(self) -> Any:
        devices = []
        for dev, health in sorted(self.devices.items()):
            topo = None
            if dev in self.topology:
                topo = api.TopologyInfo(nodes=[api.NUMANode(ID=self.topology[dev])])
            devices.append(api.Device(ID=dev, health=health, topology=topo))
        return api.ListAndWatchResponse(devices=devices)

    def response_for(self, ids: list[str]) -> Any:
        """Each device as ``/dev/example<n>`` backed by ``host_device``, and variables."""
        return api.ContainerAllocateResponse(
            envs={"EXAMPLE_DEVICES": ",".join(ids)},
            devices=[
                api.DeviceSpec(
                    container_path=f"/dev/example{n}", host_path=self.host_device, permissions="rw"
                )
                for n, _ in enumerate(ids)
            ],
            annotations={"example.com/devices": ",".join(ids)},
            mounts=[
                api.Mount(container_path=c, host_path=h, read_only=ro) for c, h, ro in self.mounts
            ],
            cdi_devices=[api.CDIDevice(name=f"example.com/device={d}") for d in ids if self.cdi],
        )

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def set_health(self, device: str, health: str) -> None:
        self.devices[device] = health
        self._notify()

    async def start(self) -> None:
        """Serve the plugin socket (the plugin's side; no registration)."""
        self.crashed = False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        server = _FakeServer([_Service(self)], self._transports)
        await trio_asyncio.aio_as_trio(server.start)(path=self.path)
        self._server = server

    async def register(self, *, version: str = VERSION, resource: str | None = None) -> None:
        """Register with the kubelet; raises ``GRPCError`` when refused."""
        request = api.RegisterRequest(
            version=version,
            endpoint=self.endpoint,
            resource_name=self.resource if resource is None else resource,
            options=self.options(),
        )
        await trio_asyncio.aio_as_trio(_register)(
            os.path.join(self.directory, SOCKET_NAME), request
        )

    async def crash(self) -> None:
        """Die: ListAndWatch streams cut, the socket gone."""
        self.crashed = True
        self._notify()
        server, self._server = self._server, None
        for transport in list(self._transports):
            transport.abort()  # type: ignore[attr-defined]
        self._transports.clear()
        if server is not None:
            server.close()
            with trio.move_on_after(5):
                await trio_asyncio.aio_as_trio(server.wait_closed)()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[FakeDevicePlugin]:
        """Serve and register; crash on the way out."""
        await self.start()
        try:
            await self.register()
            yield self
        finally:
            with trio.CancelScope(shield=True):
                await self.crash()


async def _register(socket: str, request: Any) -> None:
    channel = Channel(path=socket)
    try:
        await api_grpc.RegistrationStub(channel).Register(request)
    finally:
        channel.close()
