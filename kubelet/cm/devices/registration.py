"""``v1beta1.Registration`` on ``<root-dir>/device-plugins/kubelet.sock``.

The socket is removed and made anew at every start, so plugins watching the directory
see it come back and register again (upstream's contract). A request with a version
other than v1beta1 or a resource name that is not an extended resource name is refused
with upstream's message (gRPC status Unknown, as a Go error returns); otherwise the
manager connects to the plugin before answering.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio_asyncio
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from kubelet.cri import start_unix_server, stop_unix_server

from . import deviceplugin_api_pb2 as pb
from .deviceplugin_api_grpc import RegistrationBase
from .names import (
    SUPPORTED_VERSIONS,
    invalid_resource_name,
    is_extended_resource_name,
    unsupported_version,
)

log = logging.getLogger(__name__)

SOCKET_NAME = "kubelet.sock"
MAX_REQUEST_BYTES = 64 * 1024

Register = Callable[[Any], Awaitable[None]]
"""connects to the plugin a valid request names; raises ``RegistrationRefused``"""


class RegistrationRefused(Exception):
    """The plugin's registration is refused; the message goes back to the plugin."""


def check_request(request: Any) -> str | None:
    """Why upstream refuses ``request`` (None: it does not)."""
    if request.version not in SUPPORTED_VERSIONS:
        return unsupported_version(request.version)
    if not is_extended_resource_name(request.resource_name):
        return invalid_resource_name(request.resource_name)
    return None


class Registration(RegistrationBase):
    def __init__(self, register: Register, count: Callable[[str], None]) -> None:
        self._register = register
        self._count = count

    async def Register(self, stream: Any) -> None:
        request = await stream.recv_message()
        name = request.resource_name
        log.info("Got registration request from device plugin with resource %s", name)
        self._count(name)  # every request, before its checks (upstream's metric)
        why = check_request(request)
        if why is None:
            why = await trio_asyncio.trio_as_aio(self._refusal)(request)
        if why is not None:
            log.info("Bad registration request from device plugin: %s", why)
            raise GRPCError(Status.UNKNOWN, why)
        await stream.send_message(pb.Empty())

    async def _refusal(self, request: Any) -> str | None:
        """Register ``request`` (on Trio); why it is refused, or None.

        The refusal comes back as a value: an exception raised across trio-asyncio is kept
        by the call's future, whose frame its traceback holds, so each refused plugin's
        connection (its HTTP/2 state, frames and buffers) would wait for the cyclic
        collector instead of being freed when the call ends."""
        try:
            await self._register(request)
        except RegistrationRefused as exc:
            return str(exc)
        return None


async def serve_registration(
    directory: str,
    register: Register,
    *,
    count: Callable[[str], None] = lambda _: None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; reports the socket path ("" when it cannot listen: the
    kubelet runs on without device plugins, and says so)."""
    path = os.path.join(directory, SOCKET_NAME)
    try:
        server = await start_unix_server([Registration(register, count)], path, MAX_REQUEST_BYTES)
    except (OSError, RuntimeError) as exc:
        log.error("Failed to serve the device plugin registration socket %s: %s", path, exc)
        task_status.started("")
        return
    log.info("Serving device plugin registration server on %s", path)
    task_status.started(path)
    try:
        await trio.sleep_forever()
    finally:
        await stop_unix_server(server, path, remove=False)
