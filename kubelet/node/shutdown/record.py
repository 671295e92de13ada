"""When the last graceful shutdown started and ended: upstream's state file and gauges.

Upstream (pkg/kubelet/nodeshutdown, with the GracefulNodeShutdownBasedOnPodPriority gate)
keeps ``<root-dir>/graceful_node_shutdown_state`` (JSON ``{"startTime": …, "endTime": …}``)
and the gauges ``kubelet_graceful_shutdown_start_time_seconds`` and
``kubelet_graceful_shutdown_end_time_seconds`` (seconds since the epoch): set when a
shutdown is processed (the end reset to 0 at its start), and read back from the file
when the kubelet starts again after the reboot, so the last shutdown can be seen.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from prometheus_client.metrics import Gauge
from prometheus_client.registry import CollectorRegistry

from kubelet.goformat import parse_rfc3339, rfc3339

__all__ = ["STATE_FILE", "ShutdownRecord"]

log = logging.getLogger(__name__)

STATE_FILE = "graceful_node_shutdown_state"
ZERO_TIME = "0001-01-01T00:00:00Z"
"""Go's zero time.Time, as its JSON encoder writes it."""


class ShutdownRecord:
    """The state file and the two gauges."""

    def __init__(
        self, root_dir: str, registry: CollectorRegistry, now: Callable[[], float]
    ) -> None:
        self.path = Path(root_dir) / STATE_FILE
        self.now = now
        self.start = Gauge(
            "kubelet_graceful_shutdown_start_time_seconds",
            "[ALPHA] Last graceful shutdown start time since unix epoch in seconds",
            registry=registry,
        )
        self.end = Gauge(
            "kubelet_graceful_shutdown_end_time_seconds",
            "[ALPHA] Last graceful shutdown end time since unix epoch in seconds",
            registry=registry,
        )
        self._started = 0.0

    def load(self) -> None:
        """The last shutdown's times, from the file (none: nothing to show)."""
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.error("failed to load graceful shutdown state from %s: %s", self.path, exc)
            return
        for gauge, key in ((self.start, "startTime"), (self.end, "endTime")):
            value = parse_rfc3339(str(doc.get(key, ZERO_TIME))) if isinstance(doc, dict) else None
            gauge.set(value if value is not None and value > 0 else 0)

    def started(self) -> None:
        self._started = self.now()
        self._store(self._started, None)
        self.start.set(self._started)
        self.end.set(0)

    def ended(self) -> None:
        end = self.now()
        self._store(self._started, end)
        self.end.set(end)

    def _store(self, start: float, end: float | None) -> None:
        doc = {"startTime": rfc3339(start), "endTime": rfc3339(end) if end else ZERO_TIME}
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, self.path)
        except OSError as exc:
            log.error("failed to store graceful shutdown state in %s: %s", self.path, exc)
