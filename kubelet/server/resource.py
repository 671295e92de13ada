"""``/metrics/resource``: CPU and memory of node, pods and containers (what metrics-server reads).

Derived from the same figures as ``/stats/summary`` (CPU, memory and swap), with upstream's
metric names; each sample carries the time it was measured.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from kubelet.goformat import parse_time
from kubelet.metrics import exposition

Json = dict[str, Any]


def _ts(stamp: str) -> float:
    """A summary stamp (the kubelet's own RFC 3339) as seconds since the epoch."""
    return parse_time(stamp) or 0.0


class _SummaryCollector(Collector):
    def __init__(self, summary: Json | None) -> None:
        self.summary = summary

    def collect(self) -> Iterator[Any]:
        error = GaugeMetricFamily(
            "resource_scrape_error",
            "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
        )
        error.add_metric([], 0 if self.summary is not None else 1)
        if self.summary is None:
            yield error
            return
        node = self.summary["node"]
        node_cpu = CounterMetricFamily(
            "node_cpu_usage_seconds",
            "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
        )
        node_mem = GaugeMetricFamily(
            "node_memory_working_set_bytes",
            "[STABLE] Current working set of the node in bytes",
        )
        if "cpu" in node and "usageCoreNanoSeconds" in node["cpu"]:
            cpu = node["cpu"]
            node_cpu.add_metric([], cpu["usageCoreNanoSeconds"] / 1e9, timestamp=_ts(cpu["time"]))
        if "memory" in node and "workingSetBytes" in node["memory"]:
            mem = node["memory"]
            node_mem.add_metric([], mem["workingSetBytes"], timestamp=_ts(mem["time"]))
        node_swap = GaugeMetricFamily(
            "node_swap_usage_bytes",
            "[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems",
        )
        swap = node.get("swap") or {}
        if "swapUsageBytes" in swap:
            node_swap.add_metric([], swap["swapUsageBytes"], timestamp=_ts(swap["time"]))
        yield from (node_cpu, node_mem, node_swap)
        yield from self._pods()
        yield error

    def _pods(self) -> Iterator[Any]:
        assert self.summary is not None
        pod_labels = ["namespace", "pod"]
        c_labels = ["container", "namespace", "pod"]
        c_cpu = CounterMetricFamily(
            "container_cpu_usage_seconds",
            "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
            labels=c_labels,
        )
        c_mem = GaugeMetricFamily(
            "container_memory_working_set_bytes",
            "[STABLE] Current working set of the container in bytes",
            labels=c_labels,
        )
        c_start = GaugeMetricFamily(
            "container_start_time_seconds",
            "[STABLE] Start time of the container since unix epoch in seconds",
            labels=c_labels,
        )
        p_cpu = CounterMetricFamily(
            "pod_cpu_usage_seconds",
            "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
            labels=pod_labels,
        )
        p_mem = GaugeMetricFamily(
            "pod_memory_working_set_bytes",
            "[STABLE] Current working set of the pod in bytes",
            labels=pod_labels,
        )
        c_swap, c_swap_limit, p_swap = _swap_families(c_labels, pod_labels)
        for pod in self.summary["pods"]:
            ref = [pod["podRef"]["namespace"], pod["podRef"]["name"]]
            swap = pod.get("swap") or {}
            if "swapUsageBytes" in swap:
                p_swap.add_metric(ref, swap["swapUsageBytes"], timestamp=_ts(swap["time"]))
            if "cpu" in pod and "usageCoreNanoSeconds" in pod["cpu"]:
                cpu = pod["cpu"]
                p_cpu.add_metric(ref, cpu["usageCoreNanoSeconds"] / 1e9, timestamp=_ts(cpu["time"]))
            if "memory" in pod and "workingSetBytes" in pod["memory"]:
                mem = pod["memory"]
                p_mem.add_metric(ref, mem["workingSetBytes"], timestamp=_ts(mem["time"]))
            for c in pod["containers"]:
                labels = [c["name"], *ref]
                c_start.add_metric(labels, _ts(c["startTime"]))
                if "cpu" in c and "usageCoreNanoSeconds" in c["cpu"]:
                    cpu = c["cpu"]
                    c_cpu.add_metric(
                        labels, cpu["usageCoreNanoSeconds"] / 1e9, timestamp=_ts(cpu["time"])
                    )
                if "memory" in c and "workingSetBytes" in c["memory"]:
                    mem = c["memory"]
                    c_mem.add_metric(labels, mem["workingSetBytes"], timestamp=_ts(mem["time"]))
                _container_swap(c_swap, c_swap_limit, labels, c.get("swap") or {})
        yield from (c_cpu, c_mem, c_swap, c_swap_limit, c_start, p_cpu, p_mem, p_swap)


_SWAP_HELP = "[ALPHA] Current {}. Reported only on non-windows systems"


def _swap_families(
    c_labels: list[str], pod_labels: list[str]
) -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
    """container_swap_usage_bytes, container_swap_limit_bytes, pod_swap_usage_bytes."""
    return (
        GaugeMetricFamily(
            "container_swap_usage_bytes",
            _SWAP_HELP.format("amount of the container swap usage in bytes"),
            labels=c_labels,
        ),
        GaugeMetricFamily(
            "container_swap_limit_bytes",
            _SWAP_HELP.format("amount of the container swap limit in bytes"),
            labels=c_labels,
        ),
        GaugeMetricFamily(
            "pod_swap_usage_bytes",
            _SWAP_HELP.format("amount of the pod swap usage in bytes"),
            labels=pod_labels,
        ),
    )


def _container_swap(
    usage: GaugeMetricFamily, limit: GaugeMetricFamily, labels: list[str], swap: Json
) -> None:
    """Usage, and the limit as available + usage (upstream's sum)."""
    if not swap:
        return
    when = _ts(swap["time"])
    if "swapUsageBytes" in swap:
        usage.add_metric(labels, swap["swapUsageBytes"], timestamp=when)
    if "swapAvailableBytes" in swap:
        total = swap["swapAvailableBytes"] + swap.get("swapUsageBytes", 0)
        limit.add_metric(labels, total, timestamp=when)


def resource_metrics(summary: Json | None) -> bytes:
    """The exposition text for a summary (None: the scrape failed)."""
    registry = CollectorRegistry()
    registry.register(_SummaryCollector(summary))
    return exposition(registry, bare=())
