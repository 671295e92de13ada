"""The DRA kubelet plugin API client: one registered driver's gRPC endpoint.

A driver lists the gRPC services it offers when it registers ("v1.DRAPlugin",
"v1beta1.DRAPlugin"); the kubelet speaks the newest of those it knows. Both carry the
same messages (NodePrepareResources, NodeUnprepareResources), so the answers are
turned into one neutral form here. Calls go through the CRI's channel (grpclib under
trio-asyncio, the bounded codec, a Trio deadline), 45 s each as upstream (half its
retry period).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import attrs
import trio

from kubelet.cri import CriChannel, CriError
from kubelet.lazyinit import imported

from .state import Device

V1 = "v1.DRAPlugin"
V1BETA1 = "v1beta1.DRAPlugin"
SERVICES: tuple[str, ...] = (V1, V1BETA1)
"""the gRPC services this kubelet speaks, newest first"""

CALL_TIMEOUT = 45.0
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

_GENERATED = {V1: "dra_v1_api", V1BETA1: "dra_v1beta1_api"}
"""service -> the stem of its generated modules (``<stem>_pb2``, ``<stem>_grpc``)"""


def service_modules(service: str) -> tuple[ModuleType, Any]:
    """The messages module and the stub class of ``service``, imported with the first
    driver that speaks it: a node without DRA drivers never loads them."""
    stem = f"{__package__}.{_GENERATED[service]}"
    grpc = importlib.import_module(f"{stem}_grpc")
    return importlib.import_module(f"{stem}_pb2"), grpc.DRAPluginStub


async def load_service(service: str) -> None:
    """Import ``service``'s generated modules in a worker thread, before the first driver
    that speaks it is built (``service_modules`` then finds them loaded)."""
    stem = f"{__package__}.{_GENERATED[service]}"
    await imported(f"{stem}_pb2")
    await imported(f"{stem}_grpc")


GrpcObserver = Callable[[str, str, str, float], None]
"""(driver, full gRPC method name, status code name, seconds):
dra_grpc_operations_duration_seconds."""


class DraCallError(Exception):
    """A call to a driver failed as a whole (no per-claim answer)."""


@attrs.frozen
class ClaimRequest:
    """A claim as the driver is told of it."""

    namespace: str
    uid: str
    name: str


@attrs.frozen
class PrepareResult:
    devices: tuple[Device, ...] = ()
    error: str = ""


def choose_service(versions: Sequence[str]) -> str:
    """The newest service both sides speak; ValueError when there is none."""
    if not versions:
        raise ValueError("empty list of supported gRPC services (aka supported versions)")
    for service in SERVICES:
        if service in versions:
            return service
    raise ValueError(
        f"none of the supported gRPC services ({', '.join(versions)}) is one this kubelet "
        f"speaks ({', '.join(SERVICES)})"
    )


def _endpoint(endpoint: str) -> str:
    return endpoint if "://" in endpoint else f"unix://{endpoint}"


def _status_name(error: BaseException | None) -> str:
    if error is None:
        return "OK"
    code = getattr(error, "code", None)
    return code.name if code is not None else "Unknown"


class DraPlugin:
    """One driver instance: its name, endpoint and the service chosen at registration."""

    def __init__(
        self,
        name: str,
        endpoint: str,
        service: str,
        *,
        timeout: float = CALL_TIMEOUT,
        observe: GrpcObserver | None = None,
    ) -> None:
        self.name = name
        self.endpoint = endpoint
        self.service = service
        self.timeout = timeout
        self.observe = observe
        self._pb, stub = service_modules(service)
        self._channel = CriChannel(_endpoint(endpoint), max_message_bytes=MAX_MESSAGE_BYTES)
        self._stub_class = stub
        self._stub: Any = None

    def _methods(self) -> Any:
        if self._stub is None:
            self._stub = self._stub_class(self._channel.channel())
        return self._stub

    async def _call(self, rpc: str, request: Any) -> Any:
        method = getattr(self._methods(), rpc)
        path = f"/{self._pb.DESCRIPTOR.package}.DRAPlugin/{rpc}"
        error: BaseException | None = None
        started = trio.current_time()
        try:
            return await self._channel.call(rpc, method, request, self.timeout)
        except CriError as exc:
            error = exc
            raise DraCallError(exc.message) from exc
        finally:
            if self.observe is not None:
                self.observe(self.name, path, _status_name(error), trio.current_time() - started)

    def _claims(self, claims: Sequence[ClaimRequest]) -> list[Any]:
        return [self._pb.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]

    async def prepare(self, claims: Sequence[ClaimRequest]) -> Mapping[str, PrepareResult]:
        """NodePrepareResources: claim UID → its devices or error."""
        request = self._pb.NodePrepareResourcesRequest(claims=self._claims(claims))
        reply = await self._call("NodePrepareResources", request)
        return {
            uid: PrepareResult(
                devices=tuple(
                    Device(
                        pool_name=d.pool_name,
                        device_name=d.device_name,
                        request_names=tuple(d.request_names),
                        cdi_device_ids=tuple(d.cdi_device_ids),
                    )
                    for d in result.devices
                ),
                error=result.error,
            )
            for uid, result in reply.claims.items()
        }

    async def unprepare(self, claims: Sequence[ClaimRequest]) -> Mapping[str, str]:
        """NodeUnprepareResources: claim UID → its error ("" when done)."""
        request = self._pb.NodeUnprepareResourcesRequest(claims=self._claims(claims))
        reply = await self._call("NodeUnprepareResources", request)
        return {uid: result.error for uid, result in reply.claims.items()}

    def close(self) -> None:
        self._channel.close()
