"""Hostile inputs of the bench (scripts/bench_hostile.py) at the node's plugin sockets: the
device plugin registration socket and plugin streams, and the plugin registry.

Each is ``async def name(target, scale) -> str``, as in ``hostile_inputs``. A plugin is
more trusted than a pod author, but a buggy or compromised one must cost the kubelet a
bounded amount of memory and no event-loop time, and keep no other plugin out.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator

import trio
from grpclib.exceptions import GRPCError
from hostile_target import Target, unmet

from kubelet.cm.devices import HEALTHY
from kubelet.testing import FakeDevicePlugin, make_fifo

MAX_NAME = "a" * 63
"""the longest name part of a resource name"""
PREFIX = ".".join(["b" * 48] * 5)
"""a 244-character domain prefix (with "requests." the longest a resource name takes)"""


def plugins_dir(target: Target) -> str:
    return str(target.root / "root" / "device-plugins")


def capacity(target: Target, resource: str) -> str | None:
    node = target.api.get("Node", None, "hostile") or {}
    return ((node.get("status") or {}).get("capacity") or {}).get(resource)


async def node_capacity(target: Target, resource: str, want: str, timeout: float) -> float | None:
    t0 = time.monotonic()
    with trio.move_on_after(timeout):
        while capacity(target, resource) != want:
            await trio.sleep(0.1)
        return time.monotonic() - t0
    return None


@contextlib.contextmanager
def hung_socket(path: str) -> Iterator[socket.socket]:
    """A unix socket that takes connections into its backlog and never answers."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(4096)
    try:
        yield sock
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


async def good_plugin(target: Target, name: str) -> str:
    """An ordinary plugin registers after the input: its devices reach the Node."""
    plugin = FakeDevicePlugin(plugins_dir(target), f"example.com/{name}", endpoint=f"{name}.sock")
    async with plugin.running():
        took = await node_capacity(target, f"example.com/{name}", "2", 30)
    if took is None:
        return unmet("a good plugin's devices never reached the Node")
    return f"a good plugin's devices reached the Node after {took:.1f} s"


async def device_registration_flood(target: Target, scale: float) -> str:
    """Thousands of Register calls (names of maximal length, endpoints outside the
    directory, a symbolic link to a plugin outside, a hung plugin), then a good plugin."""
    count = max(200, int(4000 * scale * 10))
    directory = plugins_dir(target)
    outside = target.root / "outside-plugin"
    outside.mkdir(exist_ok=True)
    escaped = FakeDevicePlugin(str(outside), "example.com/escaped")
    await escaped.start()
    link = os.path.join(directory, "link.sock")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(link)
    os.symlink(escaped.path, link)
    refused: dict[str, int] = {}
    limiter = trio.CapacityLimiter(200)

    async def one(i: int) -> None:
        endpoint = ("../escape.sock", "link.sock", "hung.sock", "none.sock")[i % 4]
        plugin = FakeDevicePlugin(directory, f"{PREFIX}/{MAX_NAME[:-6]}{i:06d}", endpoint=endpoint)
        async with limiter:
            try:
                await plugin.register()
                refused["accepted"] = refused.get("accepted", 0) + 1
            except GRPCError as exc:
                key = str(exc.message).split(":")[0][-40:]
                refused[key] = refused.get(key, 0) + 1
            except Exception:  # the client's own connection failed (the kubelet closed it)
                refused["connect failed"] = refused.get("connect failed", 0) + 1

    with hung_socket(os.path.join(directory, "hung.sock")):
        t0 = time.monotonic()
        async with trio.open_nursery() as nursery:
            for i in range(count):
                nursery.start_soon(one, i)
        took = time.monotonic() - t0
    os.unlink(link)
    await escaped.crash()
    top = ", ".join(f"{v}× {k!r}" for k, v in sorted(refused.items(), key=lambda kv: -kv[1])[:4])
    after = await good_plugin(target, "after-flood")
    bad = escaped.watchers or refused.get("accepted")
    text = f"{count} registrations in {took:.1f} s ({top}); {after}"
    return unmet(text) if bad else text


async def device_huge_list(target: Target, scale: float) -> str:
    """A plugin whose ListAndWatch lists 100,000 devices (its stream is failed)."""
    devices = {f"device-{i:08d}": HEALTHY for i in range(100_000)}
    big = FakeDevicePlugin(plugins_dir(target), "example.com/huge", devices, endpoint="huge.sock")
    async with big.running():
        with trio.move_on_after(20):
            while big.watchers == 0:
                await trio.sleep(0.1)
        await trio.sleep(3)
        seen = capacity(target, "example.com/huge")
    text = f"100,000 devices listed: the Node's capacity shows {seen}"
    return (
        unmet(text) if seen == "100000" else text + "; " + await good_plugin(target, "after-huge")
    )


async def registry_flood(target: Target, scale: float) -> str:
    """The plugin registry filled with files, a FIFO, deep symlinks and sockets that never
    answer GetInfo; an ordinary device plugin still registers meanwhile."""
    registry = target.root / "root" / "plugins_registry"
    registry.mkdir(exist_ok=True)
    files = max(200, int(3000 * scale * 10))
    for i in range(files):
        (registry / f"file-{i}.sock").write_bytes(b"")
    make_fifo(registry / "fifo.sock")
    previous = registry / "loop-0"
    previous.symlink_to(registry / "loop-40")
    for i in range(1, 41):
        (registry / f"loop-{i}").symlink_to(previous)
        previous = registry / f"loop-{i}"
    with contextlib.ExitStack() as stack:
        for i in range(200):
            stack.enter_context(hung_socket(str(registry / f"hung-{i}.sock")))
        await trio.sleep(12)  # past GetInfo's deadline
        after = await good_plugin(target, "during-registry")
    for entry in list(registry.iterdir()):
        entry.unlink()
    return f"{files} files, a FIFO, 41 looping symlinks, 200 hung sockets; {after}"


PLUGIN_INPUTS = {
    "device_registration_flood": device_registration_flood,
    "device_huge_list": device_huge_list,
    "registry_flood": registry_flood,
}
"""In their order, after ``hostile_inputs.INPUTS``."""
