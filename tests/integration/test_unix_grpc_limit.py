"""The kubelet's unix gRPC servers (device plugin registration, pod-resources) serve a bounded
number of connections: the next client waits in the listen backlog until one closes."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import trio
import trio_asyncio

from kubelet.cm.devices import SOCKET_NAME
from kubelet.cm.devices.registration import Registration
from kubelet.cri import listen_unix, serve_unix_grpc
from kubelet.testing.fakedeviceplugin import FakeDevicePlugin

pytestmark = pytest.mark.trio

CAP = 2


def _hold(path: Path) -> socket.socket:
    """A client that connects and says nothing: it holds one of the server's slots."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    return sock


async def test_the_connection_past_the_bound_waits_until_one_closes(tmp_path: Path) -> None:
    registered: list[str] = []

    async def register(request: Any) -> None:
        registered.append(request.resource_name)

    path = tmp_path / SOCKET_NAME
    plugin = FakeDevicePlugin(str(tmp_path), "example.com/late")
    async with trio_asyncio.open_loop(), trio.open_nursery() as nursery:
        listener = listen_unix(str(path))
        service = Registration(register, lambda _: None)
        nursery.start_soon(
            lambda: serve_unix_grpc(listener, [service], 1 << 16, name="t", max_connections=CAP)
        )
        await plugin.register(resource="example.com/first")  # served, and gone again
        held = [_hold(path) for _ in range(CAP)]
        done = trio.Event()

        async def late() -> None:
            await plugin.register()
            done.set()

        nursery.start_soon(late)
        with trio.move_on_after(0.5):
            await done.wait()
        assert registered == ["example.com/first"]  # the third client is not served
        held.pop().close()
        with trio.fail_after(10):
            await done.wait()
        assert registered == ["example.com/first", "example.com/late"]
        for sock in held:
            sock.close()
        nursery.cancel_scope.cancel()
