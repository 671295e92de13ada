"""A fake systemd manager on a private bus (``fakelogind.private_bus``), for the systemd
cgroup driver's tests.

``FakeSystemd(address, tree)`` owns ``org.freedesktop.systemd1`` and answers what the
kubelet asks of ``org.freedesktop.systemd1.Manager``: ``Subscribe``,
``StartTransientUnit`` (a slice's directories made in the cgroup ``tree`` in systemd's
layout -- ``kubepods.slice/kubepods-burstable.slice/...`` -- under the hierarchies systemd
manages itself, its properties written into the files the kernel would show, then
``JobRemoved(id, job, unit, "done")``), ``SetUnitProperties``, ``StopUnit`` (the slice's
directories removed where empty), ``GetUnit`` and ``ListUnits``. ``fail(member, error)``
answers the next calls of ``member`` with a D-Bus error, ``results[unit]`` makes its
jobs end otherwise ("failed"; "" never); cancelling ``serve`` is systemd
going away (the bus then answers ``ServiceUnknown``) and serving again is it coming back.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import attrs
import trio
from jeepney import DBusAddress, HeaderFields, MessageType, new_error, new_method_return, new_signal
from jeepney.bus_messages import message_bus
from jeepney.io.trio import DBusConnection, open_dbus_connection

from kubelet.cgroups import CgroupFs
from kubelet.cgroups.fs import UNIFIED
from kubelet.cgroups.layout import from_tree
from kubelet.cgroups.names import expand_slice
from kubelet.cgroups.slices import INFINITY

from .cgroupfs import TreeCgroupFs

__all__ = ["FakeSystemd", "FakeUnit"]

SYSTEMD_MANAGER = "org.freedesktop.systemd1.Manager"
FAILED = "org.freedesktop.DBus.Error.Failed"
UNKNOWN_METHOD = "org.freedesktop.DBus.Error.UnknownMethod"
_EMITTER = DBusAddress(
    "/org/freedesktop/systemd1", bus_name="org.freedesktop.systemd1", interface=SYSTEMD_MANAGER
)
_MANAGED_V1 = ("cpu", "cpuacct", "memory", "pids", "blkio", "devices", "systemd", UNIFIED)
"""v1 hierarchies systemd makes a slice's directory in (not cpuset, hugetlb, freezer...)"""


@attrs.define
class FakeUnit:
    name: str
    properties: dict[str, Any] = attrs.field(factory=dict)
    active: bool = True
    starts: int = 0


def _v1_files(name: str, value: Any, props: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(hierarchy, file, text) the kernel shows for property ``name`` on cgroup v1."""
    if name == "CPUShares":
        return [("cpu", "cpu.shares", str(value))]
    if name == "CPUQuotaPeriodUSec":
        return [("cpu", "cpu.cfs_period_us", str(value))]
    if name == "CPUQuotaPerSecUSec":
        period = int(props.get("CPUQuotaPeriodUSec", 100_000))
        quota = -1 if value == INFINITY else value * period // 1_000_000
        return [("cpu", "cpu.cfs_quota_us", str(quota))]
    if name == "MemoryLimit":
        return [("memory", "memory.limit_in_bytes", "9223372036854771712" if value == INFINITY
                 else str(value))]  # fmt: skip
    if name == "TasksMax":
        return [("pids", "pids.max", "max" if value == INFINITY else str(value))]
    return []


def _v2_files(name: str, value: Any, props: dict[str, Any]) -> list[tuple[str, str, str]]:
    if name == "CPUWeight":
        return [(UNIFIED, "cpu.weight", str(value))]
    if name in ("CPUQuotaPerSecUSec", "CPUQuotaPeriodUSec"):
        period = int(props.get("CPUQuotaPeriodUSec", 100_000))
        per_sec = props.get("CPUQuotaPerSecUSec", INFINITY)
        quota = "max" if per_sec == INFINITY else str(per_sec * period // 1_000_000)
        return [(UNIFIED, "cpu.max", f"{quota} {period}")]
    if name == "MemoryMax":
        return [(UNIFIED, "memory.max", "max" if value == INFINITY else str(value))]
    if name == "TasksMax":
        return [(UNIFIED, "pids.max", "max" if value == INFINITY else str(value))]
    return []


class FakeSystemd:
    """systemd's manager on a private bus, over a cgroup tree; run ``serve`` in a nursery."""

    def __init__(self, address: str, tree: Path) -> None:
        self.address = address
        self.tree = tree
        self.units: dict[str, FakeUnit] = {}
        self.calls: list[str] = []
        self.subscribed = 0
        self._faults: dict[str, list[str]] = {}
        self.results: dict[str, str] = {}
        """unit → the result its jobs end with ("done" when absent; "" for never)"""
        self._jobs = 0
        self._fs: CgroupFs | None = None

    @property
    def fs(self) -> CgroupFs:
        if self._fs is None:
            self._fs = TreeCgroupFs(from_tree(self.tree))
        return self._fs

    def fail(
        self, member: str, error: str = "org.freedesktop.DBus.Error.Failed", times: int = 1
    ) -> None:
        self._faults.setdefault(member, []).extend([error] * times)

    def active(self) -> list[str]:
        return sorted(name for name, unit in self.units.items() if unit.active)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        conn = await open_dbus_connection(self.address)
        try:
            serial = next(conn.outgoing_serial)
            await conn.send(message_bus.RequestName("org.freedesktop.systemd1"), serial=serial)
            while True:
                reply = await conn.receive()
                if reply.header.fields.get(HeaderFields.reply_serial) == serial:
                    break
            task_status.started()
            while True:
                message = await conn.receive()
                if message.header.message_type == MessageType.method_call:
                    await self._answer(conn, message)
        finally:
            with trio.CancelScope(shield=True):
                await conn.aclose()

    async def _answer(self, conn: DBusConnection, message: Any) -> None:
        fields = message.header.fields
        member = fields.get(HeaderFields.member)
        self.calls.append(str(member))
        faults = self._faults.get(member)
        if faults:
            error = faults.pop(0)
            await conn.send(new_error(message, error, "s", (f"{member} failed (fake)",)))
            return
        handler = getattr(self, f"_do_{member}", None)
        if fields.get(HeaderFields.interface) != SYSTEMD_MANAGER or handler is None:
            await conn.send(
                new_error(
                    message, "org.freedesktop.DBus.Error.UnknownMethod", "s", (f"no {member}",)
                )
            )
            return
        await handler(conn, message)

    @staticmethod
    async def _no_such_unit(conn: DBusConnection, message: Any, name: str) -> None:
        error = "org.freedesktop.systemd1.NoSuchUnit"
        await conn.send(new_error(message, error, "s", (f"Unit {name} not loaded.",)))

    async def _job_done(self, conn: DBusConnection, message: Any, unit: str) -> None:
        self._jobs += 1
        job = f"/org/freedesktop/systemd1/job/{self._jobs}"
        await conn.send(new_method_return(message, "o", (job,)))
        result = self.results.get(unit, "done")
        if result:
            await conn.send(
                new_signal(_EMITTER, "JobRemoved", "uoss", (self._jobs, job, unit, result))
            )

    async def _do_Subscribe(self, conn: DBusConnection, message: Any) -> None:
        self.subscribed += 1
        await conn.send(new_method_return(message))

    async def _do_StartTransientUnit(self, conn: DBusConnection, message: Any) -> None:
        name, _mode, props, _aux = message.body
        unit = self.units.get(name)
        if unit is not None and unit.active:
            why = f"Unit {name} was already loaded or has a fragment file."
            await conn.send(new_error(message, "org.freedesktop.systemd1.UnitExists", "s", (why,)))
            return
        unit = self.units[name] = FakeUnit(name, starts=(unit.starts if unit else 0) + 1)
        self._make(name)
        self._apply(unit, props)
        await self._job_done(conn, message, name)

    async def _do_SetUnitProperties(self, conn: DBusConnection, message: Any) -> None:
        name, _runtime, props = message.body
        unit = self.units.get(name)
        if unit is None or not unit.active:
            await self._no_such_unit(conn, message, name)
            return
        self._apply(unit, props)
        await conn.send(new_method_return(message))

    async def _do_StopUnit(self, conn: DBusConnection, message: Any) -> None:
        name, _mode = message.body
        unit = self.units.get(name)
        if unit is None or not unit.active:
            await self._no_such_unit(conn, message, name)
            return
        unit.active = False
        self._unmake(name)
        await self._job_done(conn, message, name)

    async def _do_GetUnit(self, conn: DBusConnection, message: Any) -> None:
        (name,) = message.body
        if name not in self.active():
            await self._no_such_unit(conn, message, name)
            return
        path = "/org/freedesktop/systemd1/unit/" + name.replace("-", "_2d").replace(".", "_2e")
        await conn.send(new_method_return(message, "o", (path,)))

    async def _do_ListUnits(self, conn: DBusConnection, message: Any) -> None:
        rows = [
            (name, "", "loaded", "active", "active", "", "/", 0, "", "/") for name in self.active()
        ]
        await conn.send(new_method_return(message, "a(ssssssouso)", (rows,)))

    # -- the cgroup tree --------------------------------------------------------------------

    def _managed(self, literal: str) -> list[str]:
        paths = self.fs.paths(literal)
        if self.fs.layout.version == 2:
            return [paths[UNIFIED]]
        return list(dict.fromkeys(p for key, p in paths.items() if key in _MANAGED_V1))

    def _make(self, unit: str) -> None:
        for path in self._managed(expand_slice(unit)):
            parent = os.path.dirname(path)
            if not os.path.isdir(parent):
                raise AssertionError(f"the parent slice of {unit} was never started: {parent}")
            if not os.path.isdir(path):
                self.fs._mkdir(path)

    def _unmake(self, unit: str) -> None:
        for path in self._managed(expand_slice(unit)):
            with contextlib.suppress(OSError):
                self.fs._rmdir(path)

    def _apply(self, unit: FakeUnit, props: list[tuple[str, tuple[str, Any]]]) -> None:
        for name, (_sig, value) in props:
            unit.properties[name] = value
        files = _v2_files if self.fs.layout.version == 2 else _v1_files
        paths = self.fs.paths(expand_slice(unit.name))
        for name, (_sig, value) in props:
            for hierarchy, file, text in files(name, value, unit.properties):
                if hierarchy in paths and os.path.isdir(paths[hierarchy]):
                    Path(paths[hierarchy], file).write_text(text)
