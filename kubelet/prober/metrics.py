"""Prober metrics, in a registry the caller owns (the server exposes it on /metrics).

A private registry by default, so tests and several managers in one process never
collide in prometheus-client's global one.
"""

from __future__ import annotations

import contextlib

from prometheus_client.metrics import Counter
from prometheus_client.registry import CollectorRegistry

from .results import ProbeKind, Result

__all__ = ["PROBE_RESULT_LABELS", "ProberMetrics"]

PROBE_RESULT_LABELS = {
    Result.SUCCESS: "successful",
    Result.FAILURE: "failed",
    Result.UNKNOWN: "unknown",
}
"""Upstream's values of the ``result`` label."""


class ProberMetrics:
    """``prober_probe_total{probe_type,result,container,pod,namespace}``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.probe_total = Counter(
            "prober_probe_total",
            "Cumulative number of a liveness, readiness or startup probe for a container "
            "by result.",
            ["probe_type", "result", "container", "pod", "namespace"],
            registry=self.registry,
        )

    def observe(
        self, kind: ProbeKind, result: Result, *, container: str, pod: str, namespace: str
    ) -> None:
        """Count one probe outcome (errors are not outcomes and are not counted)."""
        self.probe_total.labels(
            kind.value, PROBE_RESULT_LABELS[result], container, pod, namespace
        ).inc()

    def forget(self, kind: ProbeKind, *, container: str, pod: str, namespace: str) -> None:
        """Drop a stopped worker's series so departed pods do not linger on /metrics."""
        for label in PROBE_RESULT_LABELS.values():
            with contextlib.suppress(KeyError):
                self.probe_total.remove(kind.value, label, container, pod, namespace)

    def value(
        self, kind: ProbeKind, result: Result, *, container: str, pod: str, namespace: str
    ) -> float:
        """The current count (0 when the series does not exist); for tests and the console."""
        sample = self.registry.get_sample_value(
            "prober_probe_total",
            {
                "probe_type": kind.value,
                "result": PROBE_RESULT_LABELS[result],
                "container": container,
                "pod": pod,
                "namespace": namespace,
            },
        )
        return 0.0 if sample is None else sample
