"""Where the systemd driver finds systemd, and its errors: what the rest of the kubelet
names without loading the D-Bus client (``systemd.py``, jeepney), which a node on the
cgroupfs driver never uses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs

from .fs import CgroupError

__all__ = ["HOST_SYSTEMD", "SystemdAccess", "SystemdError", "SystemdUnavailable"]


class SystemdError(CgroupError):
    """A call to systemd failed; the message names the call and systemd's reason."""


class SystemdUnavailable(SystemdError):
    """systemd is not PID 1 here, or not on the system bus."""


@attrs.frozen
class SystemdAccess:
    """Where the systemd driver finds systemd (tests: a private bus, a fake check)."""

    bus: str = "SYSTEM"
    """"SYSTEM" ($DBUS_SYSTEM_BUS_ADDRESS, else /run/dbus/system_bus_socket) or an address"""
    running: Callable[[], bool] = Path("/run/systemd/system").is_dir
    """upstream's test for systemd as PID 1: the directory systemd makes at boot"""


HOST_SYSTEMD = SystemdAccess()
