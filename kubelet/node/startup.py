"""How long the node took to come up: upstream's ``kubelet_node_startup_*`` gauges.

Boot → kubelet start (``pre_kubelet``), kubelet start → first registration attempt
(``pre_registration``), that attempt → the Node created (``registration``), created →
first reported Ready (``post_registration``) and boot → Ready (the total). Set once, and
only when this kubelet created the Node: a kubelet restarted on a registered node leaves
them at 0, as upstream's do. Without a boot time the two figures from boot stay 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client.metrics import Gauge
from prometheus_client.registry import CollectorRegistry


def _gauge(registry: CollectorRegistry, name: str, text: str) -> Gauge:
    return Gauge(f"kubelet_node_startup_{name}", f"[ALPHA] {text}", registry=registry)


class NodeStartup:
    def __init__(
        self,
        registry: CollectorRegistry,
        wall_clock: Callable[[], float],
        started: float,
        boot: float | None,
    ) -> None:
        self._clock = wall_clock
        self._started = started
        self._boot = boot
        self._attempt: float | None = None
        self._created: float | None = None
        self._ready: float | None = None
        self.pre_kubelet = _gauge(
            registry, "pre_kubelet_duration_seconds",
            "Duration in seconds of node startup before kubelet starts.",
        )  # fmt: skip
        self.pre_registration = _gauge(
            registry, "pre_registration_duration_seconds",
            "Duration in seconds of node startup before registration.",
        )  # fmt: skip
        self.registration = _gauge(
            registry, "registration_duration_seconds",
            "Duration in seconds of node startup during registration.",
        )  # fmt: skip
        self.post_registration = _gauge(
            registry, "post_registration_duration_seconds",
            "Duration in seconds of node startup after registration.",
        )  # fmt: skip
        self.total = _gauge(
            registry, "duration_seconds", "Duration in seconds of node startup in total."
        )

    def attempt(self) -> None:
        """A registration attempt begins (the first one counts)."""
        if self._attempt is None:
            self._attempt = self._clock()

    def created(self) -> None:
        """This kubelet created the Node."""
        if self._attempt is None or self._created is not None:
            return
        self._created = self._clock()
        if self._boot is not None:
            self.pre_kubelet.set(self._started - self._boot)
        self.pre_registration.set(self._attempt - self._started)
        self.registration.set(self._created - self._attempt)

    def reported(self, node: dict[str, Any]) -> None:
        """A node status was written; the first Ready one after the creation counts."""
        if self._created is None or self._ready is not None or not _ready(node):
            return
        self._ready = self._clock()
        self.post_registration.set(self._ready - self._created)
        if self._boot is not None:
            self.total.set(self._ready - self._boot)


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
