"""``/metrics/cadvisor``: the cAdvisor series dashboards read, from the summary's figures.

Upstream serves cAdvisor's own Prometheus collector there. The kubelet here has no
cAdvisor; it derives the series most dashboards and alerts use from the same figures
as ``/stats/summary``, with cAdvisor's names, help texts and labels:

- per container (labels ``container``, ``id``, ``image``, ``name``, ``namespace``,
  ``pod``): ``container_cpu_usage_seconds_total`` (``cpu="total"``),
  ``container_memory_working_set_bytes``, ``container_memory_usage_bytes``,
  ``container_memory_rss``, ``container_fs_usage_bytes`` / ``container_fs_limit_bytes``
  / ``container_fs_inodes_total`` / ``container_fs_inodes_free`` (``device``: the
  writable layer's filesystem), ``container_start_time_seconds``;
- per pod (``container=""``, ``id`` the pod cgroup): CPU and memory, and
  ``container_network_{receive,transmit}_{bytes,errors}_total`` per ``interface``;
- the node (``id="/"``): CPU, memory, filesystem of ``--root-dir``;
- ``machine_cpu_cores``, ``machine_memory_bytes``, ``container_scrape_error``.

Series cAdvisor has and the CRI does not report (block I/O, CPU throttling, memory
cache and swap, per-CPU usage) are absent, not zero.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["cadvisor_metrics"]

Json = Mapping[str, Any]
LABELS = ["container", "id", "image", "name", "namespace", "pod"]
FS_LABELS = ["container", "device", "id", "image", "name", "namespace", "pod"]
NET_LABELS = ["container", "id", "image", "interface", "name", "namespace", "pod"]


def _ts(stamp: Any) -> float | None:
    if not isinstance(stamp, str):
        return None
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class _Families:
    def __init__(self) -> None:
        self.cpu = CounterMetricFamily(
            "container_cpu_usage_seconds",
            "Cumulative cpu time consumed in seconds.",
            labels=[*LABELS, "cpu"],
        )
        self.working_set = GaugeMetricFamily(
            "container_memory_working_set_bytes", "Current working set in bytes.", labels=LABELS
        )
        self.usage = GaugeMetricFamily(
            "container_memory_usage_bytes",
            "Current memory usage in bytes, including all memory regardless of when it was "
            "accessed",
            labels=LABELS,
        )
        self.rss = GaugeMetricFamily("container_memory_rss", "Size of RSS in bytes.", labels=LABELS)
        self.fs_usage = GaugeMetricFamily(
            "container_fs_usage_bytes",
            "Number of bytes that are consumed by the container on this filesystem.",
            labels=FS_LABELS,
        )
        self.fs_limit = GaugeMetricFamily(
            "container_fs_limit_bytes",
            "Number of bytes that can be consumed by the container on this filesystem.",
            labels=FS_LABELS,
        )
        self.fs_inodes = GaugeMetricFamily(
            "container_fs_inodes_total", "Number of Inodes", labels=FS_LABELS
        )
        self.fs_inodes_free = GaugeMetricFamily(
            "container_fs_inodes_free", "Number of available Inodes", labels=FS_LABELS
        )
        self.start = GaugeMetricFamily(
            "container_start_time_seconds",
            "Start time of the container since unix epoch in seconds.",
            labels=LABELS,
        )
        self.network = {
            (direction, what): CounterMetricFamily(
                f"container_network_{direction}_{what}",
                _NET_HELP[(direction, what)],
                labels=NET_LABELS,
            )
            for direction in ("receive", "transmit")
            for what in ("bytes", "errors")
        }

    def all(self) -> list[Any]:
        return [
            self.cpu, self.working_set, self.usage, self.rss, self.fs_usage, self.fs_limit,
            self.fs_inodes, self.fs_inodes_free, self.start, *self.network.values(),
        ]  # fmt: skip


_NET_HELP = {
    ("receive", "bytes"): "Cumulative count of bytes received",
    ("receive", "errors"): "Cumulative count of errors encountered while receiving",
    ("transmit", "bytes"): "Cumulative count of bytes transmitted",
    ("transmit", "errors"): "Cumulative count of errors encountered while transmitting",
}
_NET_FIELDS = {
    ("receive", "bytes"): "rxBytes",
    ("receive", "errors"): "rxErrors",
    ("transmit", "bytes"): "txBytes",
    ("transmit", "errors"): "txErrors",
}


def _cpu_memory(f: _Families, labels: list[str], obj: Json) -> None:
    cpu = obj.get("cpu") or {}
    if "usageCoreNanoSeconds" in cpu:
        f.cpu.add_metric(
            [*labels, "total"], cpu["usageCoreNanoSeconds"] / 1e9, timestamp=_ts(cpu.get("time"))
        )
    memory = obj.get("memory") or {}
    when = _ts(memory.get("time"))
    for family, key in ((f.working_set, "workingSetBytes"), (f.usage, "usageBytes"),
                        (f.rss, "rssBytes")):  # fmt: skip
        if key in memory:
            family.add_metric(labels, memory[key], timestamp=when)


def _fs(f: _Families, labels: list[str], device: str, fs: Json | None) -> None:
    if not fs:
        return
    with_device = [labels[0], device, *labels[1:]]
    when = _ts(fs.get("time"))
    for family, key in ((f.fs_usage, "usedBytes"), (f.fs_limit, "capacityBytes"),
                        (f.fs_inodes, "inodes"), (f.fs_inodes_free, "inodesFree")):  # fmt: skip
        if key in fs:
            family.add_metric(with_device, fs[key], timestamp=when)


def _network(f: _Families, labels: list[str], network: Json | None) -> None:
    if not network:
        return
    when = _ts(network.get("time"))
    for iface in network.get("interfaces") or ():
        row = [*labels[:3], iface.get("name", ""), *labels[3:]]
        for key, family in f.network.items():
            value = iface.get(_NET_FIELDS[key])
            if value is not None:
                family.add_metric(row, value, timestamp=when)


class _Collector(Collector):
    def __init__(self, summary: Json | None, cores: int, memory: int, root_dir: str) -> None:
        self.summary = summary
        self.cores = cores
        self.memory = memory
        self.root_dir = root_dir

    def collect(self) -> Iterator[Any]:
        cores = GaugeMetricFamily("machine_cpu_cores", "Number of logical CPU cores.")
        cores.add_metric([], self.cores)
        memory = GaugeMetricFamily(
            "machine_memory_bytes", "Amount of memory installed on the machine."
        )
        memory.add_metric([], self.memory)
        error = GaugeMetricFamily(
            "container_scrape_error",
            "1 if there was an error while getting container metrics, 0 otherwise",
        )
        error.add_metric([], 0 if self.summary is not None else 1)
        yield from (cores, memory, error)
        if self.summary is None:
            return
        f = _Families()
        node = self.summary.get("node") or {}
        root = ["", "/", "", "", "", ""]
        _cpu_memory(f, root, node)
        _fs(f, root, self.root_dir, node.get("fs"))
        for pod in self.summary.get("pods") or ():
            self._pod(f, pod)
        yield from f.all()

    def _pod(self, f: _Families, pod: Json) -> None:
        ref = pod.get("podRef") or {}
        namespace, name, uid = ref.get("namespace", ""), ref.get("name", ""), ref.get("uid", "")
        pod_id = f"/kubepods/pod{uid}"
        labels = ["", pod_id, "", "", namespace, name]
        _cpu_memory(f, labels, pod)
        _network(f, labels, pod.get("network"))
        for c in pod.get("containers") or ():
            cname = c.get("name", "")
            c_labels = [cname, f"{pod_id}/{cname}", "", cname, namespace, name]
            _cpu_memory(f, c_labels, c)
            _fs(f, c_labels, "rootfs", c.get("rootfs"))
            start = _ts(c.get("startTime"))
            if start is not None:
                f.start.add_metric(c_labels, start)


def cadvisor_metrics(summary: Json | None, cores: int, memory: int, root_dir: str) -> bytes:
    """The exposition text (``summary`` None: the scrape failed, only machine figures)."""
    registry = CollectorRegistry()
    registry.register(_Collector(summary, cores, memory, root_dir))
    return generate_latest(registry)
