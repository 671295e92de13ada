"""systemd's notification protocol: READY=1 once the kubelet serves, WATCHDOG=1 pings.

Under a ``Type=notify`` unit systemd passes ``NOTIFY_SOCKET`` (a unix datagram socket;
a leading ``@`` names one in the abstract namespace); with ``WatchdogSec=`` it also passes
``WATCHDOG_USEC`` (and ``WATCHDOG_PID``, the process the watchdog is for). As upstream's
kubelet (gate SystemdWatchdog, GA and locked on), the watchdog pings at half that period,
each time only after the ``/healthz`` checks pass, so that systemd restarts a kubelet
whose sync loop or logging is stuck. A malformed or too short ``WATCHDOG_USEC`` stops
start-up, as upstream's does. No systemd library: one datagram per message.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping, Sequence

import attrs
import trio

from kubelet.errors import ConfigError
from kubelet.goformat import format_duration

from .healthz import NamedCheck

log = logging.getLogger(__name__)

MINIMAL_NOTIFY_INTERVAL = 1.0
"""A watchdog period at or under this refuses start-up (upstream's minimum)."""

RETRY_DELAYS = (1.0,)
"""A failed ping is sent once more after this pause (upstream: two tries, 1 s apart)."""

READY = "READY=1"
WATCHDOG = "WATCHDOG=1"


@attrs.frozen
class SystemdUnit:
    """What systemd told this process through its environment (empty: not under systemd)."""

    notify_socket: str = ""
    watchdog_period: float = 0.0
    """``WatchdogSec`` in seconds; 0: no watchdog for this process"""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], pid: int | None = None) -> SystemdUnit:
        """Read ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID``; raise ConfigError
        when the watchdog is set but unusable."""
        period = watchdog_period(environ, os.getpid() if pid is None else pid)
        if 0 < period <= MINIMAL_NOTIFY_INTERVAL:
            raise ConfigError.single(
                "WATCHDOG_USEC",
                "",
                f"configure watchdog timeout too small: {format_duration(period)}",
            )
        return cls(environ.get("NOTIFY_SOCKET", ""), period)

    @property
    def watchdog_interval(self) -> float:
        """How often the watchdog is pinged: half its period (0: never)."""
        return self.watchdog_period / 2

    async def notify(self, state: str) -> bool:
        """Send ``state``; False when there is no socket to send to (not under systemd)."""
        if not self.notify_socket:
            return False
        address = self.notify_socket
        if address.startswith("@"):
            address = "\0" + address[1:]
        with trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            await sock.sendto(state.encode(), address)
        return True


def watchdog_period(environ: Mapping[str, str], pid: int) -> float:
    """``WATCHDOG_USEC`` in seconds, 0 when unset or meant for another process."""
    usec = environ.get("WATCHDOG_USEC", "")
    if not usec:
        return 0.0
    try:
        value = int(usec)
    except ValueError:
        raise ConfigError.single(
            "WATCHDOG_USEC", "", f"configure watchdog: error converting WATCHDOG_USEC: {usec!r}"
        ) from None
    if value <= 0:
        raise ConfigError.single(
            "WATCHDOG_USEC", "", "configure watchdog: error WATCHDOG_USEC must be a positive number"
        )
    owner = environ.get("WATCHDOG_PID", "")
    if owner:
        try:
            if int(owner) != pid:
                return 0.0
        except ValueError:
            raise ConfigError.single(
                "WATCHDOG_PID", "", f"configure watchdog: error converting WATCHDOG_PID: {owner!r}"
            ) from None
    return value / 1_000_000


def failing_check(checks: Sequence[NamedCheck]) -> str | None:
    """The first failing health check, as upstream's watchdog words it; None: healthy."""
    for check in checks:
        reason = check.check()
        if reason is not None:
            return f"checker {check.name} failed: {reason}"
    return None


async def send_ready(unit: SystemdUnit) -> None:
    """READY=1: the kubelet has started (a failure is logged; start-up goes on)."""
    try:
        if await unit.notify(READY):
            log.info("notified systemd: %s", READY)
    except OSError as exc:
        log.warning("failed to notify systemd (%s): %s", READY, exc)


async def run_watchdog(unit: SystemdUnit, checks: Sequence[NamedCheck]) -> None:
    """Ping systemd's watchdog every half period while the health checks pass."""
    interval = unit.watchdog_interval
    if interval <= 0:
        log.info("Systemd watchdog is not enabled")
        return
    log.info("Starting systemd watchdog with interval %s", format_duration(interval))
    while True:
        failed = failing_check(checks)
        if failed is not None:
            log.error(
                "Do not notify watchdog this iteration as the kubelet is reportedly not "
                "healthy: %s",
                failed,
            )
        else:
            await _ping(unit, interval / 2)
        await trio.sleep(interval)


async def _ping(unit: SystemdUnit, timeout: float) -> None:
    for delay in (*RETRY_DELAYS, None):
        try:
            with trio.fail_after(timeout):
                if not await unit.notify(WATCHDOG):
                    log.error(
                        "Failed to notify watchdog: notification not supported "
                        "(i.e. NOTIFY_SOCKET is unset)"
                    )
                return
        except (OSError, trio.TooSlowError) as exc:
            if delay is None:
                log.error("Failed to notify watchdog: %s", exc or "timed out")
                return
            log.debug("failed to notify systemd watchdog, retrying: %s", exc)
            await trio.sleep(delay)
