"""systemd's manager over D-Bus (jeepney, under Trio): the slices of the systemd driver.

What the systemd driver needs from ``org.freedesktop.systemd1`` (libcontainer's
systemd manager does the same through go-systemd):

* ``Subscribe()``, so that systemd sends ``JobRemoved(u id, o job, s unit, s result)``;
* ``StartTransientUnit(name, "replace", properties, [])`` → a job, finished when its
  ``JobRemoved`` comes with result "done" (30 s at most); a unit that exists already
  (``org.freedesktop.systemd1.UnitExists``) gets its properties set instead;
* ``SetUnitProperties(name, true, properties)`` for an update (runtime only);
* ``StopUnit(name, "replace")`` → a job, as above; an unknown unit
  (``org.freedesktop.systemd1.NoSuchUnit``) is already stopped.

``SystemdBus.serve`` owns the connection: one task reads every message and hands replies
and job results to the callers waiting for them (no jeepney router, whose filters do not
survive cancellation well). When the connection breaks (the bus daemon restarted), the
calls in flight fail with ``SystemdError`` -- the caller's retry is the pod worker's
backoff, as with a cgroupfs error -- and the task connects again, 1 s then doubling up
to 30 s apart. systemd itself restarting keeps the connection; calls made meanwhile get a
D-Bus error and fail the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import trio
from jeepney import DBusAddress, HeaderFields, MatchRule, MessageType, new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.trio import DBusConnection, open_dbus_connection

from .slices import NOT_RUNNING, Property
from .systemdaccess import HOST_SYSTEMD, SystemdAccess, SystemdError, SystemdUnavailable

__all__ = [
    "HOST_SYSTEMD",
    "JOB_TIMEOUT",
    "NOT_RUNNING",
    "SystemdAccess",
    "SystemdBus",
    "SystemdError",
    "SystemdUnavailable",
]

log = logging.getLogger(__name__)

SYSTEMD_NAME = "org.freedesktop.systemd1"
SYSTEMD_PATH = "/org/freedesktop/systemd1"
SYSTEMD_MANAGER = "org.freedesktop.systemd1.Manager"
UNIT_EXISTS = "org.freedesktop.systemd1.UnitExists"
NO_SUCH_UNIT = "org.freedesktop.systemd1.NoSuchUnit"
JOB_TIMEOUT = 30.0
RECONNECT_FIRST, RECONNECT_MAX = 1.0, 30.0

_MANAGER = DBusAddress(SYSTEMD_PATH, bus_name=SYSTEMD_NAME, interface=SYSTEMD_MANAGER)
_JOB_REMOVED = MatchRule(
    type="signal", interface=SYSTEMD_MANAGER, member="JobRemoved", path=SYSTEMD_PATH
)


class _Waiter:
    """A reply or a job result on its way; ``value`` once ``done`` is set."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.value: Any = None
        self.error: str | None = None


def _failure(member: str, unit: str, reply: _Waiter) -> SystemdError:
    """A D-Bus error reply (its name and text), or a broken connection (text only)."""
    why = f"{reply.error}: {reply.value}" if reply.error else str(reply.value)
    return SystemdError(f"{member} {unit}: {why}")


class SystemdBus:
    """One system bus connection to systemd's manager; ``serve`` keeps it up."""

    def __init__(self, access: SystemdAccess = HOST_SYSTEMD) -> None:
        self.access = access
        self._conn: DBusConnection | None = None
        self._replies: dict[int, _Waiter] = {}
        self._jobs: dict[str, _Waiter] = {}
        self._finished: dict[str, tuple[str, str]] = {}
        """job → (unit, result), for a JobRemoved read before the call's reply"""
        self._units: dict[str, int] = {}
        """units with a job in flight (only their JobRemoved are kept)"""
        self.calls = 0

    # -- connection -------------------------------------------------------------------------

    async def _connect(self) -> DBusConnection:
        try:
            conn = await open_dbus_connection(self.access.bus)
        except (OSError, RuntimeError, KeyError, ValueError) as exc:
            raise SystemdUnavailable(f"cannot connect to the system bus: {exc}") from None
        try:
            for message in (
                message_bus.NameHasOwner(SYSTEMD_NAME),
                message_bus.AddMatch(_JOB_REMOVED),
                new_method_call(_MANAGER, "Subscribe"),
            ):
                body = await self._direct_call(conn, message)
                if message.header.fields.get(HeaderFields.member) == "NameHasOwner" and not body[0]:
                    raise SystemdUnavailable(f"{SYSTEMD_NAME} is not on the system bus")
        except BaseException:
            await conn.aclose()
            raise
        return conn

    @staticmethod
    async def _direct_call(conn: DBusConnection, message: Any) -> tuple[Any, ...]:
        """A call before the reader runs (at connect): read until its reply."""
        serial = next(conn.outgoing_serial)
        try:
            await conn.send(message, serial=serial)
            while True:
                reply = await conn.receive()
                if reply.header.fields.get(HeaderFields.reply_serial) != serial:
                    continue
                if reply.header.message_type == MessageType.error:
                    name = reply.header.fields.get(HeaderFields.error_name, "")
                    raise SystemdUnavailable(f"{name}: {' '.join(map(str, reply.body))}")
                body: tuple[Any, ...] = reply.body
                return body
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise SystemdUnavailable(f"the system bus connection broke: {exc}") from None

    async def serve(
        self, *, task_status: trio.TaskStatus[SystemdBus] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Connect (``SystemdUnavailable`` when systemd cannot be used), then read every
        message; reconnect after a break."""
        if not self.access.running():
            raise SystemdUnavailable(NOT_RUNNING)
        try:
            conn = await self._connect()
        except SystemdUnavailable as err:
            raise SystemdUnavailable(f"cannot use the systemd cgroups manager: {err}") from None
        task_status.started(self)
        delay = RECONNECT_FIRST
        while True:
            self._conn = conn
            try:
                await self._read(conn)
            finally:
                self._conn = None
                self._fail_all("the system bus connection broke")
                with trio.CancelScope(shield=True):
                    await conn.aclose()
            log.warning("the connection to systemd ended; connecting again")
            while True:
                await trio.sleep(delay)
                try:
                    conn = await self._connect()
                except SystemdError as err:
                    log.warning("systemd: %s; retrying in %.0fs", err, delay)
                    delay = min(delay * 2, RECONNECT_MAX)
                    continue
                delay = RECONNECT_FIRST
                break

    async def _read(self, conn: DBusConnection) -> None:
        while True:
            try:
                message = await conn.receive()
            except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return
            fields = message.header.fields
            kind = message.header.message_type
            if kind in (MessageType.method_return, MessageType.error):
                waiter = self._replies.pop(fields.get(HeaderFields.reply_serial, -1), None)
                if waiter is None:
                    continue
                if kind == MessageType.error:
                    name = fields.get(HeaderFields.error_name, "")
                    waiter.error = name
                    waiter.value = " ".join(map(str, message.body))
                else:
                    waiter.value = message.body
                waiter.done.set()
            elif _JOB_REMOVED.matches(message) and len(message.body) == 4:
                _id, job, unit, result = message.body
                if unit not in self._units:
                    continue
                found = self._jobs.pop(job, None)
                if found is None:
                    self._finished[job] = (unit, result)
                else:
                    found.value = result
                    found.done.set()

    def _fail_all(self, why: str) -> None:
        for waiter in [*self._replies.values(), *self._jobs.values()]:
            waiter.error, waiter.value = "", why
            waiter.done.set()
        self._replies.clear()
        self._jobs.clear()
        self._finished.clear()

    # -- calls ------------------------------------------------------------------------------

    async def _call(self, member: str, signature: str, body: tuple[Any, ...]) -> _Waiter:
        conn = self._conn
        if conn is None:
            raise SystemdError(f"{member}: systemd is not reachable on the system bus")
        self.calls += 1
        serial = next(conn.outgoing_serial)
        waiter = _Waiter()
        self._replies[serial] = waiter
        try:
            await conn.send(new_method_call(_MANAGER, member, signature, body), serial=serial)
            with trio.fail_after(JOB_TIMEOUT):
                await waiter.done.wait()
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise SystemdError(f"{member}: the system bus connection broke: {exc}") from None
        except trio.TooSlowError:
            raise SystemdError(f"{member}: no answer from systemd in {JOB_TIMEOUT:.0f}s") from None
        finally:
            self._replies.pop(serial, None)
        return waiter

    async def _job(self, member: str, unit: str, signature: str, body: tuple[Any, ...]) -> str:
        """Call ``member`` and wait for its job's result; "" when systemd said ``UnitExists``
        or ``NoSuchUnit`` (the caller decides what that means)."""
        self._units[unit] = self._units.get(unit, 0) + 1
        try:
            reply = await self._call(member, signature, body)
            if reply.error in (UNIT_EXISTS, NO_SUCH_UNIT):
                return reply.error
            if reply.error is not None:
                raise _failure(member, unit, reply)
            job = reply.value[0]
            early = self._finished.pop(job, None)
            if early is not None:
                return str(early[1])
            waiter = self._jobs.setdefault(job, _Waiter())
            with trio.move_on_after(JOB_TIMEOUT):
                await waiter.done.wait()
            self._jobs.pop(job, None)
            if not waiter.done.is_set():
                verb = "stop" if member == "StopUnit" else "create"
                raise SystemdError(f"Timeout waiting for systemd to {verb} {unit}")
            if waiter.error is not None:
                raise SystemdError(f"{member} {unit}: {waiter.value}")
            return str(waiter.value)
        finally:
            left = self._units[unit] - 1
            if left:
                self._units[unit] = left
            else:  # nobody waits for this unit's jobs: forget those seen early
                del self._units[unit]
                for job in [j for j, (u, _) in self._finished.items() if u == unit]:
                    del self._finished[job]

    async def start_slice(self, unit: str, properties: Sequence[Property]) -> bool:
        """Start the transient slice ``unit`` with ``properties``; False when it existed
        (its properties are set then)."""
        result = await self._job(
            "StartTransientUnit", unit, "ssa(sv)a(sa(sv))", (unit, "replace", list(properties), [])
        )
        if result == UNIT_EXISTS:
            await self.set_properties(unit, properties)
            return False
        if result != "done":
            raise SystemdError(f"error creating systemd unit `{unit}`: got `{result}`")
        return True

    async def set_properties(self, unit: str, properties: Sequence[Property]) -> None:
        reply = await self._call("SetUnitProperties", "sba(sv)", (unit, True, list(properties)))
        if reply.error is not None:
            raise _failure("SetUnitProperties", unit, reply)

    async def stop_unit(self, unit: str) -> None:
        """Stop ``unit``; an unknown unit is already stopped."""
        result = await self._job("StopUnit", unit, "ss", (unit, "replace"))
        if result not in ("done", NO_SUCH_UNIT, UNIT_EXISTS):
            raise SystemdError(f"error removing systemd unit `{unit}`: got `{result}`")
