"""DRA device health: each driver's optional ``v1alpha1.DRAResourceHealth`` stream and
the cache of what it said, per (driver, pool, device).

A driver that offers the service streams full lists of its devices with their health,
each with its own health-check timeout and an optional message; the kubelet keeps one
stream per registered driver (a driver without the service answers UNIMPLEMENTED:
nothing more is asked of it). An entry not renewed within its device's timeout
(upstream's 30 s when the driver gives none) reads Unknown without a message, and a
device left out of a list goes Unknown once its entry is that old. Every change (of
health, message or timeout) is handed on as the set of devices it touched, so the pods
using them get a new status (``allocatedResourcesStatus``). A driver that goes away
takes its entries with it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING

import attrs
import trio
import trio_asyncio
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from kubelet.cri import LimitedProtoCodec

if TYPE_CHECKING:
    from . import dra_health_v1alpha1_api_pb2 as pb


log = logging.getLogger(__name__)

HEALTH_TIMEOUT = 30.0
"""seconds an entry holds without a new report (upstream's DefaultHealthTimeout)"""
RETRY = 5.0
"""seconds before a broken stream is opened again"""
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_HEALTH_MESSAGE = 1024
"""characters of a driver's message kept (a longer one ends in "...", as upstream)"""
HEALTHY, UNHEALTHY, UNKNOWN = "Healthy", "Unhealthy", "Unknown"
_NAMES = {1: HEALTHY, 2: UNHEALTHY}
"""HealthStatus values of the health API (0 is UNKNOWN)"""

DeviceKey = tuple[str, str, str]
"""(driver, pool, device)"""


@attrs.frozen
class DeviceHealth:
    """One device's reported health, its message and how long the report holds."""

    health: str = UNKNOWN
    message: str = ""
    timeout: float = 0.0
    """seconds the report holds; 0: the cache's default"""


NO_REPORT = DeviceHealth()


@attrs.frozen
class _Entry:
    report: DeviceHealth
    updated: float


class HealthCache:
    """What the drivers last said of their devices, and when (on the Trio clock).

    ``messages`` off (gate ResourceHealthStatusMessage) drops the drivers' messages, so
    neither the statuses nor the change detection see them."""

    def __init__(self, timeout: float = HEALTH_TIMEOUT, *, messages: bool = True) -> None:
        self.timeout = timeout
        self.messages = messages
        self._entries: dict[DeviceKey, _Entry] = {}

    def _stale(self, entry: _Entry, now: float) -> bool:
        return now - entry.updated > (entry.report.timeout or self.timeout)

    def get(self, driver: str, pool: str, device: str) -> DeviceHealth:
        """The device's health; Unknown without a message once its report is stale."""
        entry = self._entries.get((driver, pool, device))
        if entry is None or self._stale(entry, trio.current_time()):
            return NO_REPORT
        return entry.report

    def update(self, driver: str, reported: dict[tuple[str, str], DeviceHealth]) -> set[DeviceKey]:
        """A driver's full list (pool, device) → report; the devices whose health,
        message or timeout changed, and those left out that went stale (now Unknown)."""
        now = trio.current_time()
        changed: set[DeviceKey] = set()
        for (pool, device), report in reported.items():
            key = (driver, pool, device)
            if not self.messages and report.message:
                report = attrs.evolve(report, message="")
            old = self._entries.get(key)
            if old is None or old.report != report:
                changed.add(key)
            self._entries[key] = _Entry(report, now)
        for key, entry in self._entries.items():
            unreported = key[0] == driver and (key[1], key[2]) not in reported
            if unreported and entry.report.health != UNKNOWN and self._stale(entry, now):
                gone = DeviceHealth(timeout=entry.report.timeout)
                self._entries[key] = _Entry(gone, now)
                changed.add(key)
        return changed

    def clear(self, driver: str) -> set[DeviceKey]:
        gone = {k for k in self._entries if k[0] == driver}
        for key in gone:
            del self._entries[key]
        return gone


async def _stream(endpoint: str) -> AsyncGenerator[pb.NodeWatchResourcesResponse, None]:
    """The driver's health lists until the stream ends (grpclib on the trio-asyncio loop,
    each step awaited from Trio so cancelling the reader resets the stream). The health
    API's modules load with the first driver that offers it."""
    from grpclib.client import Channel

    from . import dra_health_v1alpha1_api_pb2 as pb
    from .dra_health_v1alpha1_api_grpc import DRAResourceHealthStub

    path = endpoint.removeprefix("unix://")
    channel = Channel(path=path, codec=LimitedProtoCodec(MAX_MESSAGE_BYTES))
    aio = trio_asyncio.aio_as_trio
    stream = DRAResourceHealthStub(channel).NodeWatchResources.open()
    try:
        await aio(stream.__aenter__)()
        try:
            await aio(stream.send_message)(pb.NodeWatchResourcesRequest(), end=True)
            while (message := await aio(stream.recv_message)()) is not None:
                yield message
        finally:
            shield, deadline = trio.CancelScope(shield=True), trio.move_on_after(RETRY)
            with shield, deadline, contextlib.suppress(Exception):  # gone either way
                await aio(stream.__aexit__)(None, None, None)
    finally:
        channel.close()


def _message(text: str) -> str:
    if len(text) <= MAX_HEALTH_MESSAGE:
        return text
    return text[: MAX_HEALTH_MESSAGE - 3] + "..."


def _reported(
    driver: str, reply: pb.NodeWatchResourcesResponse
) -> dict[tuple[str, str], DeviceHealth]:
    """A reply as reports; a negative timeout is logged and taken as none given."""
    out: dict[tuple[str, str], DeviceHealth] = {}
    for d in reply.devices:
        timeout = d.health_check_timeout_seconds
        if timeout < 0:
            log.debug(
                "DRA driver %s: ignoring negative health check timeout %d of %s/%s",
                driver, timeout, d.device.pool_name, d.device.device_name,
            )  # fmt: skip
        out[(d.device.pool_name, d.device.device_name)] = DeviceHealth(
            health=_NAMES.get(d.health, UNKNOWN),
            message=_message(d.message),
            timeout=float(max(timeout, 0)),
        )
    return out


async def watch_health(
    driver: str,
    endpoint: str,
    cache: HealthCache,
    on_change: Callable[[set[DeviceKey]], None],
    *,
    retry: float = RETRY,
) -> None:
    """One driver's health stream into ``cache`` until cancelled; a driver without the
    service is left alone, a broken stream is opened again after ``retry`` seconds."""
    while True:
        try:
            async for reply in _stream(endpoint):
                changed = cache.update(driver, _reported(driver, reply))
                if changed:
                    log.info("DRA driver %s: health of %d devices changed", driver, len(changed))
                    on_change(changed)
            log.info("DRA driver %s ended its health stream", driver)
        except GRPCError as exc:
            if exc.status is Status.UNIMPLEMENTED:
                log.info("DRA driver %s offers no health stream", driver)
                return
            log.info("DRA driver %s health stream failed: %s", driver, exc.message)
        except Exception as exc:  # connection refused or cut, an undecodable answer
            log.info("DRA driver %s health stream failed: %s", driver, exc)
        await trio.sleep(retry)
