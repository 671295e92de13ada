"""Which cgroup driver to use: the runtime's, when it says (KubeletCgroupDriverFromCRI).

Upstream's kubelet (the gate is GA and locked on) asks the runtime with the CRI
``RuntimeConfig`` call before it builds its container manager: a runtime that answers
``SYSTEMD`` or ``CGROUPFS`` decides, and ``cgroupDriver`` from the configuration is
ignored (logged "Using cgroup driver setting received from the CRI runtime"); a runtime
without the call (``Unimplemented``: containerd before 2.0, CRI-O before 1.28) or without
a Linux section leaves the configured driver. Other errors are retried three times,
2 s apart, then stop start-up -- a runtime that cannot say which driver it uses must not
get pods whose cgroups might be spelled for the other one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from kubelet.cri import CriError, Unimplemented, api
from kubelet.errors import ConfigError

from .names import CGROUPFS, SYSTEMD

__all__ = ["ATTEMPTS", "RETRY_DELAY", "driver_from_runtime"]

log = logging.getLogger(__name__)

ATTEMPTS = 3
RETRY_DELAY = 2.0
_DRIVERS = {api.SYSTEMD: SYSTEMD, api.CGROUPFS: CGROUPFS}


async def driver_from_runtime(
    runtime_config: Callable[[], Awaitable[api.RuntimeConfigResponse]], configured: str
) -> str:
    """The driver to use: the runtime's, else ``configured``."""
    last: CriError | None = None
    for attempt in range(ATTEMPTS):
        if attempt:
            await trio.sleep(RETRY_DELAY)
        try:
            response = await runtime_config()
        except Unimplemented:
            log.info(
                "CRI implementation should be updated to support RuntimeConfig when "
                "KubeletCgroupDriverFromCRI feature gate has been enabled. Falling back to "
                "using cgroupDriver from kubelet config."
            )
            return configured
        except CriError as err:
            last = err
            continue
        break
    else:
        assert last is not None
        raise ConfigError.single(
            "", "cgroupDriver", f"cannot ask the container runtime for its cgroup driver: {last}"
        )
    if not response.HasField("linux"):
        return configured
    value = response.linux.cgroup_driver
    driver = _DRIVERS.get(value)
    if driver is None:
        message = f"runtime returned an unknown cgroup driver {value}"
        raise ConfigError.single("", "cgroupDriver", message)
    ignored = f" (cgroupDriver: {configured} in the configuration is ignored)"
    log.info(
        "Using cgroup driver setting received from the CRI runtime cgroupDriver=%s%s",
        driver,
        ignored if driver != configured else "",
    )
    return driver
