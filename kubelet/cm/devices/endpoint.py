"""One device plugin's socket, seen from the kubelet: the v1beta1 ``DevicePlugin`` calls.

grpclib is asyncio-only: every call runs on the trio-asyncio loop (``aio_as_trio``) under
a Trio deadline, so a plugin that hangs costs its caller the deadline and nothing else.
Answers are read through the bounded codec; a garbage answer is a failed call.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

import trio
import trio_asyncio
from grpclib.client import Channel

from kubelet.cri import LimitedProtoCodec

from . import deviceplugin_api_pb2 as pb
from .deviceplugin_api_grpc import DevicePluginStub

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""a plugin's answer at most (gRPC's default is 4 MiB; a large node's device list fits)"""
CONNECT_TIMEOUT = 10.0
"""GetDevicePluginOptions at registration (upstream's dial timeout)"""
CALL_TIMEOUT = 30.0
"""Allocate, GetPreferredAllocation, PreStartContainer (upstream's pre-start timeout)"""


class PluginError(Exception):
    """A call to the plugin failed, timed out or was answered with garbage."""


class Endpoint:
    """A client for one plugin socket; ``close`` drops the connection."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._channel = Channel(path=path, codec=LimitedProtoCodec(MAX_MESSAGE_BYTES))
        self._stub = DevicePluginStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    async def _call(self, rpc: str, request: Any, timeout: float) -> Any:
        method = getattr(self._stub, rpc)
        try:
            with trio.fail_after(timeout):
                return await trio_asyncio.aio_as_trio(method)(request)
        except trio.TooSlowError as exc:
            raise PluginError(f"{rpc}: no answer in {timeout:g}s") from exc
        except trio.Cancelled:
            raise
        except Exception as exc:  # gRPC status, connection refused, undecodable answer
            raise PluginError(f"{rpc}: {exc}") from exc

    async def options(self) -> Any:
        return await self._call("GetDevicePluginOptions", pb.Empty(), CONNECT_TIMEOUT)

    async def list_and_watch(self) -> AsyncGenerator[Any, None]:
        """The plugin's device lists until the stream ends; ``PluginError`` when it fails.

        Each step of the stream is one asyncio call awaited from Trio, so cancelling the
        reader (a new registration, the kubelet stopping) resets the stream at once."""
        stream = self._stub.ListAndWatch.open()
        aio = trio_asyncio.aio_as_trio
        try:
            await aio(stream.__aenter__)()
        except Exception as exc:
            raise PluginError(f"ListAndWatch: {exc}") from exc
        failure: BaseException | None = None
        try:
            await aio(stream.send_message)(pb.Empty(), end=True)
            while True:
                message = await aio(stream.recv_message)()
                if message is None:
                    return
                yield message
        except trio.Cancelled as exc:
            failure = exc
            raise
        except Exception as exc:
            failure = exc
            raise PluginError(f"ListAndWatch: {exc}") from exc
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(CONNECT_TIMEOUT):
                try:
                    if failure is None:
                        await aio(stream.__aexit__)(None, None, None)
                    else:
                        await aio(stream.__aexit__)(type(failure), failure, None)
                except Exception:  # the stream is gone either way
                    pass

    async def allocate(self, device_ids: Sequence[str]) -> Any:
        """The plugin's ``ContainerAllocateResponse`` for one container's devices."""
        request = pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=list(device_ids))]
        )
        reply = await self._call("Allocate", request, CALL_TIMEOUT)
        if len(reply.container_responses) != 1:
            raise PluginError(
                f"Allocate: {len(reply.container_responses)} container responses for 1 request"
            )
        return reply.container_responses[0]

    async def preferred(
        self, available: Sequence[str], must: Sequence[str], size: int
    ) -> list[str]:
        request = pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=list(available),
                    must_include_deviceIDs=list(must),
                    allocation_size=size,
                )
            ]
        )
        reply = await self._call("GetPreferredAllocation", request, CALL_TIMEOUT)
        if len(reply.container_responses) != 1:
            raise PluginError("GetPreferredAllocation: not one container response")
        return list(reply.container_responses[0].deviceIDs)

    async def pre_start(self, device_ids: Sequence[str]) -> None:
        request = pb.PreStartContainerRequest(devices_ids=list(device_ids))
        await self._call("PreStartContainer", request, CALL_TIMEOUT)
