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
- ``machine_cpu_cores``, ``machine_memory_bytes``, ``container_scrape_error``;
- from the cgroups themselves (``cgroupfigures``), for the node, pods and containers, as
  the kubelet's cAdvisor includes them (its ``CpuUsageMetrics`` and ``DiskIOMetrics``):
  ``container_cpu_cfs_periods_total``, ``container_cpu_cfs_throttled_periods_total``,
  ``container_cpu_cfs_throttled_seconds_total`` (only for a cgroup with a CPU quota),
  ``container_fs_reads_bytes_total``, ``container_fs_writes_bytes_total``,
  ``container_fs_reads_total``, ``container_fs_writes_total`` (``device``: ``/dev/<name>``)
  and ``container_blkio_device_usage_total`` (``device``, ``major``, ``minor``,
  ``operation``); with KubeletPSI on cgroup v2 (its ``PressureMetrics``)
  ``container_pressure_{cpu,memory,io}_{stalled,waiting}_seconds_total`` (``full`` and
  ``some`` totals of the ``*.pressure`` files; /proc/pressure for the node).

The limits each of these cgroups was given, as cAdvisor emits them whatever metric set is
chosen: ``container_spec_cpu_period``, ``container_spec_cpu_shares`` (v2: from
``cpu.weight``), ``container_spec_cpu_quota`` (only under a quota),
``container_spec_memory_limit_bytes``, ``container_spec_memory_reservation_limit_bytes``
and ``container_spec_memory_swap_limit_bytes`` (0 when unlimited; see ``cgroupspec``).

Also from the cgroups: ``container_cpu_user_seconds_total``,
``container_cpu_system_seconds_total``, ``container_memory_cache``, ``container_memory_swap``,
``container_memory_mapped_file``, ``container_memory_failcnt`` (a gauge here: the client
library would rename a counter to ``…_total``) and ``container_memory_max_usage_bytes``.

``cadvisorextra`` adds last seen, CFS bursts, the load figures (always 0, as the
kubelet's cAdvisor) and the rest of the memory figures.

Series cAdvisor has that need what is not read here (per-CPU
usage, the CFQ-only I/O times and merges, the root's /proc/diskstats figures, process
and OOM-event counts, network packets) are absent, not zero.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from kubelet.goformat import parse_time
from kubelet.metrics import exposition
from kubelet.stats import CgroupFigures, CgroupSpec, Figures, spec_memory_value

from .cadvisorextra import ExtraFamilies

__all__ = ["cadvisor_metrics"]

Json = Mapping[str, Any]
LABELS = ["container", "id", "image", "name", "namespace", "pod"]
FS_LABELS = ["container", "device", "id", "image", "name", "namespace", "pod"]
NET_LABELS = ["container", "id", "image", "interface", "name", "namespace", "pod"]
BLKIO_LABELS = ["container", "device", "id", "image", "major", "minor", "name", "namespace",
                "operation", "pod"]  # fmt: skip


def _ts(stamp: Any) -> float | None:
    return parse_time(stamp) if isinstance(stamp, str) else None


def _cpu_split_families() -> tuple[CounterMetricFamily, CounterMetricFamily]:
    return (
        CounterMetricFamily(
            "container_cpu_user_seconds",
            "Cumulative user cpu time consumed in seconds.",
            labels=LABELS,
        ),
        CounterMetricFamily(
            "container_cpu_system_seconds",
            "Cumulative system cpu time consumed in seconds.",
            labels=LABELS,
        ),
    )


def _cfs_families() -> dict[str, CounterMetricFamily]:
    return {
        key: CounterMetricFamily(name, text, labels=LABELS) for key, name, text in (
            ("periods", "container_cpu_cfs_periods",
             "Number of elapsed enforcement period intervals."),
            ("throttled_periods", "container_cpu_cfs_throttled_periods",
             "Number of throttled period intervals."),
            ("throttled", "container_cpu_cfs_throttled_seconds",
             "Total time duration the container has been throttled."),
        )
    }  # fmt: skip


def _spec_families() -> dict[str, GaugeMetricFamily]:
    """cAdvisor's ``container_spec_*`` gauges, keyed by what they show (``cgroupspec``)."""
    return {
        key: GaugeMetricFamily(name, text, labels=LABELS) for key, name, text in (
            ("cpu_period", "container_spec_cpu_period", "CPU period of the container."),
            ("cpu_quota", "container_spec_cpu_quota", "CPU quota of the container."),
            ("cpu_shares", "container_spec_cpu_shares", "CPU share of the container."),
            ("memory_limit", "container_spec_memory_limit_bytes",
             "Memory limit for the container."),
            ("memory_swap_limit", "container_spec_memory_swap_limit_bytes",
             "Memory swap limit for the container."),
            ("memory_reservation", "container_spec_memory_reservation_limit_bytes",
             "Memory reservation limit for the container."),
        )
    }  # fmt: skip


def _spec(f: dict[str, GaugeMetricFamily], labels: list[str], spec: CgroupSpec | None) -> None:
    """As cAdvisor: period and shares for any cgroup with CPU, the quota only when one is
    set; the three memory figures where memory is accounted, 0 for unlimited."""
    if spec is None:
        return
    if spec.cpu is not None:
        f["cpu_period"].add_metric(labels, spec.cpu.period)
        if spec.cpu.quota:
            f["cpu_quota"].add_metric(labels, spec.cpu.quota)
        f["cpu_shares"].add_metric(labels, spec.cpu.shares)
    if spec.memory is not None:
        for key, value in (("memory_limit", spec.memory.limit),
                           ("memory_swap_limit", spec.memory.swap_limit),
                           ("memory_reservation", spec.memory.reservation)):  # fmt: skip
            f[key].add_metric(labels, spec_memory_value(value))


def _memory_detail_families() -> dict[str, GaugeMetricFamily]:
    """Keyed by the field of ``CgroupMemoryDetail``."""
    return {
        key: GaugeMetricFamily(name, text, labels=LABELS) for key, name, text in (
            ("cache", "container_memory_cache", "Number of bytes of page cache memory."),
            ("swap", "container_memory_swap", "Container swap usage in bytes."),
            ("mapped_file", "container_memory_mapped_file",
             "Size of memory mapped files in bytes."),
            ("failcnt", "container_memory_failcnt", "Number of memory usage hits limits"),
            ("max_usage", "container_memory_max_usage_bytes",
             "Maximum memory usage recorded in bytes"),
        )
    }  # fmt: skip


class _Families:
    def __init__(self, now: float = 0.0) -> None:
        self.extra = ExtraFamilies(LABELS, now)
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
        self.cpu_user, self.cpu_system = _cpu_split_families()
        self.memory_detail = _memory_detail_families()
        self.spec = _spec_families()
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

        self.cfs = _cfs_families()
        self.io = {
            key: CounterMetricFamily(name, text, labels=FS_LABELS) for key, name, text in (
                (("bytes", "Read"), "container_fs_reads_bytes", "Cumulative count of bytes read"),
                (("ios", "Read"), "container_fs_reads", "Cumulative count of reads completed"),
                (("bytes", "Write"), "container_fs_writes_bytes",
                 "Cumulative count of bytes written"),
                (("ios", "Write"), "container_fs_writes", "Cumulative count of writes completed"),
            )
        }  # fmt: skip
        self.blkio = CounterMetricFamily(
            "container_blkio_device_usage", "Blkio Device bytes usage", labels=BLKIO_LABELS
        )
        self.pressure = {
            (resource, kind): CounterMetricFamily(
                f"container_pressure_{resource}_{_PSI_NAME[kind]}_seconds",
                _PSI_HELP[kind].format(_PSI_RESOURCE[resource]),
                labels=LABELS,
            )
            for resource in ("cpu", "memory", "io")
            for kind in ("full", "some")
        }

    def all(self) -> list[Any]:
        return [
            self.cpu, self.cpu_user, self.cpu_system, *self.cfs.values(), self.working_set,
            self.usage, self.rss, *self.memory_detail.values(), self.fs_usage,
            self.fs_limit, self.fs_inodes, self.fs_inodes_free, *self.io.values(), self.blkio,
            self.start, *(family for family in self.spec.values() if family.samples),
            *self.network.values(),
            *(family for family in self.pressure.values() if family.samples),
            *self.extra.all(),
        ]  # fmt: skip


_PSI_NAME = {"full": "stalled", "some": "waiting"}
_PSI_RESOURCE = {"cpu": "CPU", "memory": "memory", "io": "IO"}
_PSI_HELP = {
    "full": "Total time duration no tasks in the container could make progress due to {} "
    "congestion.",
    "some": "Total time duration tasks in the container have waited due to {} congestion.",
}
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


def _cgroup(f: _Families, labels: list[str], figures: CgroupFigures | None) -> None:
    """CFS series (only under a CPU limit, as cAdvisor), block I/O per device, the memory
    details and PSI (microseconds in the files, seconds here)."""
    f.extra.add(labels, figures)
    if figures is None:
        return
    cfs = figures.cfs
    if cfs is not None and cfs.quota:
        f.cfs["periods"].add_metric(labels, cfs.periods)
        f.cfs["throttled_periods"].add_metric(labels, cfs.throttled_periods)
        f.cfs["throttled"].add_metric(labels, cfs.throttled_ns / 1e9)
    for device, io in figures.io:
        with_device = [labels[0], device, *labels[1:]]
        for kind, rows in (("bytes", io.bytes), ("ios", io.ios)):
            for op, value in rows:
                family = f.io.get((kind, op))
                if family is not None:
                    family.add_metric(with_device, value)
        for op, value in io.bytes:
            row = [labels[0], device, labels[1], labels[2], str(io.major), str(io.minor),
                   labels[3], labels[4], op, labels[5]]  # fmt: skip
            f.blkio.add_metric(row, value)
    if figures.cpu_user_system_ns is not None:
        user, system = figures.cpu_user_system_ns
        f.cpu_user.add_metric(labels, user / 1e9)
        f.cpu_system.add_metric(labels, system / 1e9)
    memory = figures.memory
    if memory is not None:
        for key, gauge in f.memory_detail.items():
            value = getattr(memory, key)
            if value is not None:
                gauge.add_metric(labels, value)
    for resource, pressure in figures.pressure.items():
        for kind, data in (("full", pressure.full), ("some", pressure.some)):
            f.pressure[(resource, kind)].add_metric(labels, data.total / 1e6)
    _spec(f.spec, labels, figures.spec)


class _Collector(Collector):
    def __init__(
        self,
        summary: Json | None,
        cores: int,
        memory: int,
        root_dir: str,
        figures: Figures,
        now: float,
    ) -> None:
        self.now = now
        self.summary = summary
        self.cores = cores
        self.memory = memory
        self.root_dir = root_dir
        self.figures = figures

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
        f = _Families(self.now)
        node = self.summary.get("node") or {}
        root = ["", "/", "", "", "", ""]
        _cpu_memory(f, root, node)
        _cgroup(f, root, self.figures.get(("", "")))
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
        _cgroup(f, labels, self.figures.get((uid, "")))
        _network(f, labels, pod.get("network"))
        for c in pod.get("containers") or ():
            cname = c.get("name", "")
            c_labels = [cname, f"{pod_id}/{cname}", "", cname, namespace, name]
            _cpu_memory(f, c_labels, c)
            _cgroup(f, c_labels, self.figures.get((uid, cname)))
            _fs(f, c_labels, "rootfs", c.get("rootfs"))
            start = _ts(c.get("startTime"))
            if start is not None:
                f.start.add_metric(c_labels, start)


def cadvisor_metrics(
    summary: Json | None,
    cores: int,
    memory: int,
    root_dir: str,
    figures: Figures | None = None,
    now: float | None = None,
) -> bytes:
    """The exposition text (``summary`` None: the scrape failed, only machine figures);
    ``figures``: the cgroups' CFS and block I/O figures (``cgroupfigures``); ``now``: the
    wall clock (``container_last_seen``)."""
    registry = CollectorRegistry()
    when = time.time() if now is None else now
    registry.register(_Collector(summary, cores, memory, root_dir, figures or {}, when))
    return exposition(registry, bare=())
