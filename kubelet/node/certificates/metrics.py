"""Upstream's certificate manager metrics, on the kubelet's registry.

Client certificate (cmd/kubelet/app/server.go, pkg/kubelet/certificate/kubelet.go):
``kubelet_certificate_manager_client_ttl_seconds`` (gauge: seconds until the current
certificate expires, truncated, negative once expired, +Inf with none) and
``kubelet_certificate_manager_client_expiration_renew_errors`` (counter).
Serving certificate: ``kubelet_certificate_manager_server_ttl_seconds`` (gauge, same
rule), ``kubelet_server_expiration_renew_errors`` (counter) and
``kubelet_certificate_manager_server_rotation_seconds`` (histogram of how long the
previous certificate lived, from its NotBefore, when it was replaced).
No labels. All are ALPHA upstream, so their help starts with ``[ALPHA]``.

The two counters have no ``_total`` suffix upstream; prometheus_client would add one
to a Counter, so they are exposed as untyped samples under upstream's exact names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import attrs
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.metrics import Histogram
from prometheus_client.registry import Collector, CollectorRegistry

__all__ = ["ROTATION_BUCKETS", "ManagerMetrics", "client_metrics", "server_metrics"]

ROTATION_BUCKETS = (
    60, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000,
)  # fmt: skip
"""1 minute, 1 hour, 4 hours, 1 day, 1 week, 1, 3 and 6 months, 1 and 4 years."""

Expiry = Callable[[], float | None]
"""The current certificate's NotAfter (epoch seconds), None without one."""


@attrs.define
class ManagerMetrics:
    """What one certificate manager reports: renew errors, rotation ages."""

    renew_errors: Callable[[], None]
    rotation_age: Callable[[float], None] | None = None


class _Collector(Collector):
    def __init__(
        self, ttl_name: str, ttl_help: str, errors_name: str, now: Callable[[], float]
    ) -> None:
        self.ttl_name, self.ttl_help, self.errors_name = ttl_name, ttl_help, errors_name
        self.now = now
        self.expiry: Expiry = lambda: None
        self.errors = 0

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(self.ttl_name, self.ttl_help)
        not_after = self.expiry()
        gauge.add_metric([], math.inf if not_after is None else math.trunc(not_after - self.now()))
        yield gauge
        errors = Metric(
            self.errors_name, "[ALPHA] Counter of certificate renewal errors.", "unknown"
        )
        errors.add_sample(self.errors_name, {}, float(self.errors))
        yield errors

    def increment(self) -> None:
        self.errors += 1


def client_metrics(
    registry: CollectorRegistry, now: Callable[[], float]
) -> tuple[ManagerMetrics, Callable[[Expiry], None]]:
    """The client manager's metrics; the second value connects the TTL gauge to it."""
    collector = _Collector(
        "kubelet_certificate_manager_client_ttl_seconds",
        "[ALPHA] Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The "
        "value is in seconds until certificate expiry (negative if already expired). If "
        "client certificate is invalid or unused, the value will be +INF.",
        "kubelet_certificate_manager_client_expiration_renew_errors",
        now,
    )
    registry.register(collector)
    return ManagerMetrics(collector.increment), _connect(collector)


def server_metrics(
    registry: CollectorRegistry, now: Callable[[], float]
) -> tuple[ManagerMetrics, Callable[[Expiry], None]]:
    """The serving manager's metrics (with the rotation histogram)."""
    collector = _Collector(
        "kubelet_certificate_manager_server_ttl_seconds",
        "[ALPHA] Gauge of the shortest TTL (time-to-live) of the Kubelet's serving "
        "certificate. The value is in seconds until certificate expiry (negative if "
        "already expired). If serving certificate is invalid or unused, the value will be "
        "+INF.",
        "kubelet_server_expiration_renew_errors",
        now,
    )
    registry.register(collector)
    rotation = Histogram(
        "kubelet_certificate_manager_server_rotation_seconds",
        "[ALPHA] Histogram of the number of seconds the previous certificate lived before "
        "being rotated.",
        buckets=ROTATION_BUCKETS,
        registry=registry,
    )
    return ManagerMetrics(collector.increment, rotation.observe), _connect(collector)


def _connect(collector: _Collector) -> Callable[[Expiry], None]:
    def connect(expiry: Expiry) -> None:
        collector.expiry = expiry

    return connect
