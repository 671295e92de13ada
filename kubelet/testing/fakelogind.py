"""A private D-Bus bus with a small fake systemd-logind, for graceful-shutdown tests.

``private_bus(directory)`` starts Debian's ``/usr/bin/dbus-daemon`` on a unix socket in
``directory`` (a config that lets the test's own user own any name) and stops it (by
its PID) afterwards. ``FakeLogind`` connects to that bus as ``org.freedesktop.login1``
and ``org.freedesktop.systemd1`` and answers what a kubelet asks:

* ``org.freedesktop.DBus.Properties.Get(org.freedesktop.login1.Manager,
  InhibitDelayMaxUSec)`` → ``t`` (microseconds);
* ``org.freedesktop.login1.Manager.Inhibit(what, who, why, mode)`` → a file descriptor
  (one end of a socket pair; the lock is held until every copy of it is closed, which
  the fake sees as end-of-file on its own end);
* ``org.freedesktop.systemd1.Manager.KillUnit("systemd-logind.service", who, 1)`` →
  reread ``InhibitDelayMaxSec`` from the drop-in directory, as logind does on SIGHUP;
* ``prepare_for_shutdown(active)`` emits ``PrepareForShutdown(b)``.
"""

from __future__ import annotations

import configparser
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from jeepney import DBusAddress, HeaderFields, MessageType, new_error, new_method_return, new_signal
from jeepney.bus_messages import message_bus
from jeepney.io.trio import DBusConnection, open_dbus_connection

__all__ = ["DBUS_DAEMON", "FakeLogind", "InhibitLock", "private_bus"]

DBUS_DAEMON = "/usr/bin/dbus-daemon"

_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


@asynccontextmanager
async def private_bus(directory: Path) -> AsyncIterator[str]:
    """A dbus-daemon of our own; yields its address (``unix:path=...``)."""
    sock = directory / "bus.sock"
    config = directory / "bus.conf"
    _write_config(directory, config, sock)
    process = await trio.lowlevel.open_process(
        [DBUS_DAEMON, f"--config-file={config}", "--nofork", "--nopidfile", "--print-address=1"],
        stdin=None,
        stdout=subprocess.PIPE,
    )
    try:
        # the daemon prints its address once it listens
        assert process.stdout is not None
        # 10 s of real time: a test's fake clock may jump while a loaded machine starts it
        printed, deadline = b"", time.monotonic() + 10
        while not printed.endswith(b"\n"):
            if time.monotonic() > deadline:
                raise RuntimeError("dbus-daemon printed no address in 10 s")
            with trio.move_on_after(0.05):
                chunk = await process.stdout.receive_some()
                if not chunk:
                    raise RuntimeError(f"dbus-daemon exited with {await process.wait()}")
                printed += chunk
        yield f"unix:path={sock}"
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
        with trio.move_on_after(5) as cleanup:
            cleanup.shield = True
            await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()
        shutil.rmtree(directory, ignore_errors=True)


def _write_config(directory: Path, config: Path, sock: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    config.write_text(_CONFIG.format(socket=sock))


@attrs.define(eq=False)
class InhibitLock:
    """One lock the fake handed out: who asked, and its end of the socket pair."""

    what: str
    who: str
    why: str
    mode: str
    ours: socket.socket
    released: trio.Event = attrs.field(factory=trio.Event)


class FakeLogind:
    """logind (and systemd's KillUnit) on a private bus; run ``serve`` in a nursery."""

    def __init__(self, address: str, dropin_dir: Path, *, inhibit_delay_max: float = 5.0) -> None:
        self.address = address
        self.dropin_dir = dropin_dir
        self.inhibit_delay_max = inhibit_delay_max
        self.locks: list[InhibitLock] = []
        self.calls: list[str] = []
        self.reloads = 0
        self._conn: DBusConnection | None = None

    def held(self) -> list[InhibitLock]:
        return [lock for lock in self.locks if not lock.released.is_set()]

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        conn = await open_dbus_connection(self.address, enable_fds=True)
        self._conn = conn
        try:
            async with trio.open_nursery() as nursery:
                for name in ("org.freedesktop.login1", "org.freedesktop.systemd1"):
                    await conn.send(message_bus.RequestName(name))
                names_acquired = 0
                while names_acquired < 2:
                    message = await conn.receive()
                    if message.header.message_type == MessageType.method_return:
                        names_acquired += 1
                task_status.started()
                while True:
                    message = await conn.receive()
                    if message.header.message_type == MessageType.method_call:
                        await self._answer(conn, message, nursery)
        finally:
            self._conn = None
            await conn.aclose()
            for lock in self.locks:
                lock.ours.close()

    async def _answer(self, conn: DBusConnection, message: Any, nursery: trio.Nursery) -> None:
        fields = message.header.fields
        member = fields.get(HeaderFields.member)
        interface = fields.get(HeaderFields.interface)
        self.calls.append(f"{interface}.{member}")
        if interface == "org.freedesktop.DBus.Properties" and member == "Get":
            iface, prop = message.body
            if iface == "org.freedesktop.login1.Manager" and prop == "InhibitDelayMaxUSec":
                usec = int(self.inhibit_delay_max * 1_000_000)
                await conn.send(new_method_return(message, "v", (("t", usec),)))
                return
        elif interface == "org.freedesktop.login1.Manager" and member == "Inhibit":
            what, who, why, mode = message.body
            ours, theirs = socket.socketpair()
            lock = InhibitLock(what, who, why, mode, ours)
            self.locks.append(lock)
            nursery.start_soon(self._watch_lock, lock)
            try:
                await conn.send(new_method_return(message, "h", (theirs.fileno(),)))
            finally:
                theirs.close()  # the caller holds the only copy now
            return
        elif interface == "org.freedesktop.systemd1.Manager" and member == "KillUnit":
            unit, _, sig = message.body
            if unit == "systemd-logind.service" and sig == signal.SIGHUP:
                self._reload()
            await conn.send(new_method_return(message))
            return
        await conn.send(
            new_error(message, "org.freedesktop.DBus.Error.UnknownMethod", "s", (f"no {member}",))
        )

    def _reload(self) -> None:
        self.reloads += 1
        for path in sorted(self.dropin_dir.glob("*.conf")):
            parser = configparser.ConfigParser()
            parser.read_string(path.read_text())
            value = parser.get("Login", "InhibitDelayMaxSec", fallback=None)
            if value is not None:
                self.inhibit_delay_max = float(value)

    async def _watch_lock(self, lock: InhibitLock) -> None:
        sock = trio.socket.from_stdlib_socket(lock.ours)
        while await sock.recv(1):
            pass
        lock.released.set()

    async def prepare_for_shutdown(self, active: bool) -> None:
        assert self._conn is not None
        emitter = DBusAddress(
            "/org/freedesktop/login1",
            bus_name="org.freedesktop.login1",
            interface="org.freedesktop.login1.Manager",
        )
        await self._conn.send(new_signal(emitter, "PrepareForShutdown", "b", (active,)))
