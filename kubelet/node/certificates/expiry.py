"""Exit when the node has had no valid client certificate for five minutes.

Upstream's client transport (pkg/kubelet/certificate ``UpdateTransport``, with
``exitAfter`` five minutes under ``rotateCertificates``) looks at the client certificate
manager every 10 s. While there is no valid certificate (none, or it has expired) for
longer than five minutes since one was last seen, it logs, every 10 s, either
``It has been 5m0s since a valid client cert was found and the server is responsive,
exiting.`` and exits the process (klog.Fatal: code 255), so that its supervisor (systemd,
``Restart=always``) starts it again and TLS bootstrap gets its chance with the bootstrap
credentials; or, when the API server has not answered the manager's last request,
``It has been 5m0s since a valid client cert was found, but the server is not
responsive. A restart may be necessary to retrieve new initial credentials.`` and goes
on. ``ClientCertificateWatch.run`` does the same in ``run_node``'s nursery; the exit is
a ``FatalError`` that ends the kubelet's task tree (``agent.start`` returns 255).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import attrs
import trio

from kubelet.errors import FatalError
from kubelet.goformat import format_duration

from .store import CertKeyPair

__all__ = ["CHECK_PERIOD", "EXIT_AFTER", "ClientCertificateWatch"]

log = logging.getLogger(__name__)

EXIT_AFTER = 300.0
"""Seconds without a valid client certificate before the kubelet exits."""
CHECK_PERIOD = 10.0


class Watched(Protocol):
    """What is read of the client certificate manager (``manager.CertificateManager``)."""

    @property
    def server_healthy(self) -> bool: ...

    def current(self) -> CertKeyPair | None: ...


@attrs.define
class ClientCertificateWatch:
    """Watches the client certificate manager; ``run`` raises ``FatalError`` to exit."""

    manager: Watched
    now: Callable[[], float]
    """Wall-clock seconds (the manager's clock)."""
    exit_after: float = EXIT_AFTER

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        last_available = self.now()
        task_status.started()
        while True:
            now = self.now()
            if self.manager.current() is not None:
                last_available = now
            elif now > last_available + self.exit_after:
                self._without_certificate()
            await trio.sleep(CHECK_PERIOD)

    def _without_certificate(self) -> None:
        since = format_duration(self.exit_after)
        if self.manager.server_healthy:
            message = (
                f"It has been {since} since a valid client cert was found and the server "
                "is responsive, exiting."
            )
            log.critical("%s", message)
            raise FatalError(message)
        log.error(
            "It has been %s since a valid client cert was found, but the server is not "
            "responsive. A restart may be necessary to retrieve new initial credentials.",
            since,
        )
