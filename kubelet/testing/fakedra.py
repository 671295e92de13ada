"""FakeDraPlugin: a DRA driver's kubelet plugin speaking the real gRPC API (v1 and
v1beta1 ``DRAPlugin``) on a unix socket, for tests.

It answers NodePrepareResources with the devices a test gave it (each claim gets the
driver's ``devices``: pool, name, CDI IDs) and records every call. Faults: ``fail``
(claim name → the per-claim error it answers), ``delay`` (seconds before each answer,
on the loop's clock, so ``autojump_clock`` tests are exact) and ``crash()`` (the socket
gone and connections cut mid-call, as a killed driver pod). With ``health`` (pool,
device) → "Healthy"/"Unhealthy"/"Unknown" it serves ``v1alpha1.DRAResourceHealth`` too:
each stream gets the full list at once and again on every ``set_health`` (which may
give a device a message and its own health-check timeout);
``health_silent`` stops sending (entries go stale), ``break_health()`` ends the streams
with an error. Needs a running
trio-asyncio loop (the kubelet under test opens one).

    plugin = FakeDraPlugin("gpu.example.com", tmp / "dra.sock")
    await plugin.start()
    await kubelet_cm.plugin_handlers()["DRAPlugin"].register(
        plugin.driver, plugin.endpoint, plugin.services)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import attrs
import trio_asyncio
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError

from kubelet.cm.dra import dra_health_v1alpha1_api_pb2, dra_v1_api_pb2, dra_v1beta1_api_pb2

from .fakeruntime import _FakeServer

__all__ = ["DraCall", "FakeDevice", "FakeDraPlugin"]


@attrs.frozen
class FakeDevice:
    pool: str
    name: str
    cdi_ids: tuple[str, ...] = ()
    requests: tuple[str, ...] = ()


@attrs.frozen
class DraCall:
    method: str
    """NodePrepareResources or NodeUnprepareResources"""
    service: str
    """v1 or v1beta1"""
    claims: tuple[tuple[str, str, str], ...]
    """(namespace, uid, name) of each claim"""


class _Service:
    def __init__(self, fake: FakeDraPlugin, pb: Any) -> None:
        self.fake = fake
        self.pb = pb
        self.version = pb.DESCRIPTOR.package.rsplit(".", 1)[-1]

    def __mapping__(self) -> dict[str, Handler]:
        prefix = f"/{self.pb.DESCRIPTOR.package}.DRAPlugin"
        return {
            f"{prefix}/NodePrepareResources": Handler(
                self._prepare,
                Cardinality.UNARY_UNARY,
                self.pb.NodePrepareResourcesRequest,
                self.pb.NodePrepareResourcesResponse,
            ),
            f"{prefix}/NodeUnprepareResources": Handler(
                self._unprepare,
                Cardinality.UNARY_UNARY,
                self.pb.NodeUnprepareResourcesRequest,
                self.pb.NodeUnprepareResourcesResponse,
            ),
        }

    def _record(self, method: str, request: Any) -> None:
        claims = tuple((c.namespace, c.uid, c.name) for c in request.claims)
        self.fake.calls.append(DraCall(method, self.version, claims))

    async def _prepare(self, stream: Any) -> None:
        request = await stream.recv_message()
        self._record("NodePrepareResources", request)
        if self.fake.delay:
            await asyncio.sleep(self.fake.delay)
        pb = self.pb
        reply = pb.NodePrepareResourcesResponse()
        for claim in request.claims:
            error = self.fake.fail.get(claim.name, "")
            devices = [
                pb.Device(
                    request_names=list(d.requests),
                    pool_name=d.pool,
                    device_name=d.name,
                    cdi_device_ids=list(d.cdi_ids),
                )
                for d in self.fake.devices
            ]
            result = pb.NodePrepareResourceResponse(error=error, devices=[] if error else devices)
            reply.claims[claim.uid].CopyFrom(result)
            if not error:
                self.fake.prepared.add(claim.uid)
        await stream.send_message(reply)

    async def _unprepare(self, stream: Any) -> None:
        request = await stream.recv_message()
        self._record("NodeUnprepareResources", request)
        if self.fake.delay:
            await asyncio.sleep(self.fake.delay)
        reply = self.pb.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            error = self.fake.fail_unprepare.get(claim.name, "")
            reply.claims[claim.uid].CopyFrom(self.pb.NodeUnprepareResourceResponse(error=error))
            if not error:
                self.fake.prepared.discard(claim.uid)
        await stream.send_message(reply)


class _HealthService:
    def __init__(self, fake: FakeDraPlugin) -> None:
        self.fake = fake

    def __mapping__(self) -> dict[str, Handler]:
        pb = dra_health_v1alpha1_api_pb2
        return {
            "/v1alpha1.DRAResourceHealth/NodeWatchResources": Handler(
                self._watch,
                Cardinality.UNARY_STREAM,
                pb.NodeWatchResourcesRequest,
                pb.NodeWatchResourcesResponse,
            )
        }

    async def _watch(self, stream: Any) -> None:
        await stream.recv_message()
        self.fake.health_streams += 1
        wake = asyncio.Event()
        self.fake._wakers.add(wake)
        try:
            while True:
                if self.fake._broken:
                    raise GRPCError(Status.UNAVAILABLE, "health monitor failed")
                if not self.fake.health_silent:
                    await stream.send_message(self.fake._health_reply())
                await wake.wait()
                wake.clear()
        finally:
            self.fake._wakers.discard(wake)


class FakeDraPlugin:
    """One DRA driver's kubelet plugin on ``path``."""

    def __init__(
        self,
        driver: str,
        path: str | os.PathLike[str],
        devices: tuple[FakeDevice, ...] = (),
        *,
        versions: tuple[str, ...] = ("v1", "v1beta1"),
    ) -> None:
        self.driver = driver
        self.path = Path(path)
        self.devices = devices or (FakeDevice("pool", "dev-0", (f"{driver}/dev=dev-0",)),)
        self.versions = versions
        self.calls: list[DraCall] = []
        self.prepared: set[str] = set()
        """claim UIDs prepared and not unprepared since"""
        self.fail: dict[str, str] = {}
        """claim name → the error NodePrepareResources answers for it"""
        self.fail_unprepare: dict[str, str] = {}
        self.delay = 0.0
        self.health: dict[tuple[str, str], str] | None = None
        """(pool, device) → its health; None: no health service"""
        self.health_detail: dict[tuple[str, str], tuple[str, int]] = {}
        """(pool, device) → the message and health-check timeout (s) sent with it"""
        self.health_silent = False
        self.health_streams = 0
        """NodeWatchResources streams opened so far"""
        self._wakers: set[asyncio.Event] = set()
        self._broken = False
        self._server: _FakeServer | None = None
        self._transports: set[asyncio.BaseTransport] = set()

    @property
    def endpoint(self) -> str:
        return str(self.path)

    @property
    def services(self) -> list[str]:
        """What the driver lists as its versions at registration."""
        return [f"{v}.DRAPlugin" for v in self.versions]

    def count(self, method: str) -> int:
        return sum(1 for c in self.calls if c.method == method)

    async def start(self) -> None:
        if self._server is not None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        modules = {"v1": dra_v1_api_pb2, "v1beta1": dra_v1beta1_api_pb2}
        services: list[Any] = [_Service(self, modules[v]) for v in self.versions]
        if self.health is not None:
            services.append(_HealthService(self))
        server = _FakeServer(list(services), self._transports)
        await trio_asyncio.aio_as_trio(server.start)(path=str(self.path))
        self._server = server

    def _health_reply(self) -> Any:
        pb = dra_health_v1alpha1_api_pb2
        names = {"Healthy": pb.HEALTHY, "Unhealthy": pb.UNHEALTHY}
        return pb.NodeWatchResourcesResponse(
            devices=[
                pb.DeviceHealth(
                    device=pb.DeviceIdentifier(pool_name=pool, device_name=name),
                    health=names.get(health, pb.UNKNOWN),
                    message=self.health_detail.get((pool, name), ("", 0))[0],
                    health_check_timeout_seconds=self.health_detail.get((pool, name), ("", 0))[1],
                )
                for (pool, name), health in sorted((self.health or {}).items())
            ]
        )

    def _wake(self) -> None:
        for wake in list(self._wakers):
            wake.set()

    def set_health(
        self, pool: str, device: str, health: str, message: str = "", timeout: int = 0
    ) -> None:
        """A device's health changes (with a message and its own health-check timeout in
        seconds, 0: none): every open stream is sent the full list."""
        self.health = {**(self.health or {}), (pool, device): health}
        self.health_detail[(pool, device)] = (message, timeout)
        self._wake()

    def break_health(self) -> None:
        """The open health streams fail (UNAVAILABLE); new ones fail too until
        ``mend_health``."""
        self._broken = True
        self._wake()

    def mend_health(self) -> None:
        self._broken = False

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        await trio_asyncio.aio_as_trio(server.wait_closed)()
        self.crash()

    def crash(self) -> None:
        """Die at once: connections cut, socket gone (state kept for a restart)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for transport in list(self._transports):
            transport.abort()  # type: ignore[attr-defined]
        self._transports.clear()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
