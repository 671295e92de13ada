"""The registration socket under a flood of refused plugins: each refused connection is
freed when its call ends, not left in reference cycles for the cyclic collector (whose
full collection of a thousand such connections held the event loop for 200-300 ms)."""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import types
from collections.abc import Iterator
from pathlib import Path

import grpclib.server
import pytest
import trio
from grpclib.exceptions import GRPCError

from kubelet.boundedio import inline
from kubelet.cm.devices.manager import DeviceManager
from kubelet.cm.devices.registration import RegistrationRefused, serve_registration
from kubelet.testing import FakeDevicePlugin

REFUSED = 12


@contextlib.contextmanager
def cyclic_garbage() -> Iterator[list[object]]:
    """What the cyclic collector would free of what the block left behind."""
    gc.collect()
    gc.disable()
    found: list[object] = []
    try:
        yield found
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found += gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def kept_by_the_server(garbage: list[object]) -> list[str]:
    """The server side of a registration among ``garbage``: its stream, the refusal, the
    handler's and the manager's frames."""
    kept = []
    for obj in garbage:
        if isinstance(obj, RegistrationRefused | grpclib.server.Stream):
            kept.append(type(obj).__name__)
        elif isinstance(obj, types.FrameType) and "/kubelet/cm/devices/" in obj.f_code.co_filename:
            kept.append(f"frame of {obj.f_code.co_name}")
    return kept


async def test_refused_registrations_leave_nothing_to_the_cyclic_collector(
    aio_loop: None, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    directory = str(short_tmp)
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # takes connections, never answers
    hung.bind(os.path.join(directory, "hung.sock"))
    hung.listen(REFUSED)
    endpoints = ("none.sock", "../outside.sock", "hung.sock")
    plugins = [
        FakeDevicePlugin(directory, f"example.com/r{i}", endpoint=endpoints[i % len(endpoints)])
        for i in range(REFUSED)
    ]
    async with trio.open_nursery() as nursery:
        manager = DeviceManager(directory, nursery, file_io=inline)
        await nursery.start(serve_registration, directory, manager.register)
        with cyclic_garbage() as garbage:
            for plugin in plugins:
                with pytest.raises(GRPCError):
                    await plugin.register()
            await trio.sleep(1)  # the server's side of the last call ends
        nursery.cancel_scope.cancel()
    hung.close()
    assert kept_by_the_server(garbage) == []
