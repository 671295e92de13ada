"""systemd-logind over D-Bus (jeepney, under Trio): inhibitor locks and shutdown signals.

What the kubelet needs from logind (upstream: pkg/kubelet/nodeshutdown/systemd):

* ``InhibitDelayMaxUSec`` (property of ``org.freedesktop.login1.Manager`` at
  ``/org/freedesktop/login1``): how long a delay lock may hold a shutdown back;
* ``Inhibit("shutdown", "kubelet", "Kubelet needs time to handle node shutdown",
  "delay")``: a file descriptor; the shutdown waits (up to that maximum) until it is
  closed;
* the ``PrepareForShutdown(b)`` signal: True when a shutdown starts, False when one was
  cancelled;
* when the configured delay is shorter than the kubelet needs, upstream writes
  ``/etc/systemd/logind.conf.d/99-kubelet.conf`` (``InhibitDelayMaxSec=<seconds>``) and
  asks systemd to send SIGHUP to ``systemd-logind.service`` (``KillUnit``) so logind reads
  it. This module does the same (``override_inhibit_delay``, ``reload``): a node whose
  logind would cut the kubelet's grace short is worse than one whose logind.conf.d
  gains a documented drop-in. The directory is a parameter, so tests use a temporary one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from jeepney import DBusAddress, HeaderFields, MatchRule, Properties, new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.trio import DBusConnection, DBusRouter, open_dbus_connection
from jeepney.wrappers import DBusErrorResponse, unwrap_msg

from .logindconf import LOGIND_DROPIN_DIR, LogindError, LogindUnavailable, override_inhibit_delay

__all__ = [
    "LOGIND_DROPIN_DIR",
    "LogindBus",
    "LogindError",
    "LogindUnavailable",
    "override_inhibit_delay",
]

log = logging.getLogger(__name__)

LOGIND_NAME = "org.freedesktop.login1"
LOGIND_PATH = "/org/freedesktop/login1"
LOGIND_MANAGER = "org.freedesktop.login1.Manager"
SYSTEMD_NAME = "org.freedesktop.systemd1"
SYSTEMD_PATH = "/org/freedesktop/systemd1"
SYSTEMD_MANAGER = "org.freedesktop.systemd1.Manager"
SYSTEM_BUS = "SYSTEM"

INHIBIT_WHAT, INHIBIT_WHO = "shutdown", "kubelet"
INHIBIT_WHY, INHIBIT_MODE = "Kubelet needs time to handle node shutdown", "delay"


_LOGIND = DBusAddress(LOGIND_PATH, bus_name=LOGIND_NAME, interface=LOGIND_MANAGER)
_SYSTEMD = DBusAddress(SYSTEMD_PATH, bus_name=SYSTEMD_NAME, interface=SYSTEMD_MANAGER)
_SHUTDOWN_SIGNAL = MatchRule(
    type="signal", interface=LOGIND_MANAGER, member="PrepareForShutdown", path=LOGIND_PATH
)


class LogindBus:
    """One system bus connection, for the shutdown manager's calls and signals."""

    def __init__(self, router: DBusRouter, address: str = SYSTEM_BUS) -> None:
        self._router = router
        self._address = address

    @classmethod
    @asynccontextmanager
    async def open(cls, address: str = SYSTEM_BUS) -> AsyncIterator[LogindBus]:
        """Connect (``address``: "SYSTEM" or a D-Bus address such as
        ``unix:path=/run/dbus/system_bus_socket``); LogindUnavailable when logind cannot
        be reached."""
        try:
            connection = await open_dbus_connection(address, enable_fds=True)
        except (OSError, RuntimeError, KeyError, ValueError) as exc:
            raise LogindUnavailable(f"cannot connect to the system bus: {exc}") from None
        try:
            async with connection, connection.router() as router:
                bus = cls(router, address)
                await bus._require_logind()
                yield bus
        except BaseExceptionGroup as group:
            # jeepney's router runs a nursery: give one error back as it was raised
            single = _collapse(group)
            if isinstance(single, BaseExceptionGroup):
                raise
            raise single from None

    async def _call(self, message: Any, what: str) -> tuple[Any, ...]:
        try:
            reply = await self._router.send_and_get_reply(message)
            body: tuple[Any, ...] = unwrap_msg(reply)
            return body
        except DBusErrorResponse as exc:
            raise LogindError(f"{what}: {exc.name}: {' '.join(map(str, exc.data))}") from None
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise LogindError(f"{what}: the bus connection broke: {exc}") from None

    async def _require_logind(self) -> None:
        owner = await self._call(message_bus.NameHasOwner(LOGIND_NAME), "NameHasOwner")
        if not owner or not owner[0]:
            raise LogindUnavailable(f"{LOGIND_NAME} is not on the system bus")

    async def inhibit_delay_max(self) -> float:
        """logind's InhibitDelayMaxUSec, in seconds."""
        body = await self._call(
            Properties(_LOGIND).get("InhibitDelayMaxUSec"),
            "failed reading InhibitDelayMaxUSec property from logind",
        )
        signature, value = body[0]
        if signature != "t":
            raise LogindError("InhibitDelayMaxUSec from logind is not a uint64 as expected")
        return int(value) / 1_000_000

    async def inhibit(self) -> int:
        """Take a delay lock on shutdown; the file descriptor that holds it."""
        body = await self._call(
            new_method_call(
                _LOGIND, "Inhibit", "ssss", (INHIBIT_WHAT, INHIBIT_WHO, INHIBIT_WHY, INHIBIT_MODE)
            ),
            "failed creating systemd inhibitor",
        )
        fd: int = body[0].to_raw_fd()
        return fd

    @staticmethod
    def release(lock: int) -> None:
        """Close the lock's descriptor: logind lets the shutdown go on."""
        try:
            os.close(lock)
        except OSError as exc:
            log.error("unable to close systemd inhibitor lock: %s", exc)

    async def reload_logind(self) -> None:
        """SIGHUP to systemd-logind.service through systemd, so it rereads logind.conf.d."""
        await self._call(
            new_method_call(_SYSTEMD, "KillUnit", "ssi", ("systemd-logind.service", "all", 1)),
            "unable to reload logind conf",
        )

    @asynccontextmanager
    async def shutdown_signals(self) -> AsyncIterator[trio.MemoryReceiveChannel[bool]]:
        """PrepareForShutdown values, in order, while the block runs; the channel ends
        when the bus connection does.

        The signals come on a second, plain connection read by our own task: jeepney's
        router tears its message filters down in a way that races with a filter being
        closed at the same moment (both on cancellation), so it is given none.
        """
        try:
            connection = await open_dbus_connection(self._address)
        except (OSError, RuntimeError, KeyError, ValueError) as exc:
            raise LogindError(f"cannot connect to the system bus: {exc}") from None
        send, receive = trio.open_memory_channel[bool](16)
        async with connection, trio.open_nursery() as nursery:
            serial = next(connection.outgoing_serial)
            await connection.send(message_bus.AddMatch(_SHUTDOWN_SIGNAL), serial=serial)
            while True:
                reply = await connection.receive()
                if reply.header.fields.get(HeaderFields.reply_serial) == serial:
                    unwrap_msg(reply)
                    break
            nursery.start_soon(self._pump, connection, send)
            try:
                yield receive
            finally:
                nursery.cancel_scope.cancel()

    @staticmethod
    async def _pump(connection: DBusConnection, send: trio.MemorySendChannel[bool]) -> None:
        async with send:
            while True:
                try:
                    message = await connection.receive()
                except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                    log.info("the system bus connection ended")
                    return
                if not _SHUTDOWN_SIGNAL.matches(message):
                    continue
                body = message.body
                if not body or not isinstance(body[0], bool):
                    log.error("Failed obtaining shutdown event, PrepareForShutdown event was "
                              "not bool type as expected")  # fmt: skip
                    continue
                await send.send(body[0])


def _collapse(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error
