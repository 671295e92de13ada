"""More of the series the kubelet's cAdvisor emits for every cgroup it watches, each from a
figure or two that ``cgroupfigures`` already reads (help texts and labels are cAdvisor
v0.56's, the version 1.36 vendors):

- ``container_last_seen`` (its base set): the scrape's time, in whole seconds;
- ``container_cpu_cfs_burst_periods_total`` and ``container_cpu_cfs_burst_seconds_total``
  (``CpuUsageMetrics``; only under a CPU quota, as the other CFS series): ``nr_bursts``
  and ``burst_time``/``burst_usec`` of ``cpu.stat``, 0 on kernels without them;
- ``container_cpu_load_average_10s``, ``container_cpu_load_d_average_10s`` and
  ``container_tasks_state`` (``CpuLoadMetrics``): always 0, as upstream — the kubelet
  includes the metric set but cAdvisor's load reader (netlink taskstats) stays off unless
  cAdvisor's own ``--enable_load_reader`` is given, which the kubelet never does;
- ``container_memory_kernel_usage`` (v1 ``memory.kmem.usage_in_bytes``, 0 on v2 as runc
  reports), ``container_memory_total_active_file_bytes`` and
  ``container_memory_total_inactive_file_bytes`` (v1 ``total_active_file``/
  ``total_inactive_file``, v2 ``active_file``/``inactive_file``) and
  ``container_memory_failures_total`` (``failure_type`` pgfault/pgmajfault, ``scope``
  container/hierarchy: both scopes from the ``pgfault``/``pgmajfault`` keys of
  ``memory.stat``, which are local on v1 — cAdvisor's own reading)
  (``MemoryUsageMetrics``), for every cgroup whose ``memory.stat`` was read;
- ``container_processes``, ``container_file_descriptors``, ``container_sockets``,
  ``container_threads`` and ``container_threads_max`` (``ProcessMetrics``, see
  ``kubelet.stats.processes``). cAdvisor's ``container_ulimits_soft`` needs the
  container's root PID, which the cgroup does not give: absent.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from kubelet.stats import CgroupFigures

__all__ = ["ExtraFamilies"]

_TASK_STATES = ("sleeping", "running", "stopped", "uninterruptible", "iowaiting")


class ExtraFamilies:
    def __init__(self, labels: list[str], now: float) -> None:
        self.now = int(now)
        self.last_seen = GaugeMetricFamily(
            "container_last_seen", "Last time a container was seen by the exporter", labels=labels
        )
        self.bursts = CounterMetricFamily(
            "container_cpu_cfs_burst_periods", "Number of periods when burst occurs.",
            labels=labels,
        )  # fmt: skip
        self.burst_seconds = CounterMetricFamily(
            "container_cpu_cfs_burst_seconds",
            "Total time duration the container has been bursted.", labels=labels,
        )  # fmt: skip
        self.load = GaugeMetricFamily(
            "container_cpu_load_average_10s",
            "Value of container cpu load average over the last 10 seconds.", labels=labels,
        )  # fmt: skip
        self.load_d = GaugeMetricFamily(
            "container_cpu_load_d_average_10s",
            "Value of container cpu load.d average over the last 10 seconds.", labels=labels,
        )  # fmt: skip
        self.tasks = GaugeMetricFamily(
            "container_tasks_state", "Number of tasks in given state", labels=[*labels, "state"]
        )
        self.kernel = GaugeMetricFamily(
            "container_memory_kernel_usage", "Size of kernel memory allocated in bytes.",
            labels=labels,
        )  # fmt: skip
        self.active_file = GaugeMetricFamily(
            "container_memory_total_active_file_bytes", "Current total active file in bytes.",
            labels=labels,
        )  # fmt: skip
        self.inactive_file = GaugeMetricFamily(
            "container_memory_total_inactive_file_bytes",
            "Current total inactive file in bytes.", labels=labels,
        )  # fmt: skip
        self.processes = {
            key: GaugeMetricFamily(name, text, labels=labels) for key, name, text in (
                ("processes", "container_processes",
                 "Number of processes running inside the container."),
                ("fds", "container_file_descriptors",
                 "Number of open file descriptors for the container."),
                ("sockets", "container_sockets", "Number of open sockets for the container."),
                ("threads_max", "container_threads_max",
                 "Maximum number of threads allowed inside the container, infinity if value "
                 "is zero"),
                ("threads", "container_threads",
                 "Number of threads running inside the container"),
            )
        }  # fmt: skip
        self.failures = CounterMetricFamily(
            "container_memory_failures",
            "Cumulative count of memory allocation failures.",
            labels=[*labels, "failure_type", "scope"],
        )

    def add(self, labels: list[str], figures: CgroupFigures | None) -> None:
        """One row: ``last_seen`` for any; the rest only for a cgroup that was read."""
        self.last_seen.add_metric(labels, self.now)
        if figures is None:
            return
        cfs = figures.cfs
        if cfs is not None and cfs.quota:
            self.bursts.add_metric(labels, cfs.bursts)
            self.burst_seconds.add_metric(labels, cfs.burst_ns / 1e9)
        if figures.processes is not None:
            for key, family in self.processes.items():
                family.add_metric(labels, getattr(figures.processes, key))
        self.load.add_metric(labels, 0)
        self.load_d.add_metric(labels, 0)
        for state in _TASK_STATES:
            self.tasks.add_metric([*labels, state], 0)
        memory = figures.memory
        if memory is None:
            return
        self.kernel.add_metric(labels, memory.kernel or 0)
        self.active_file.add_metric(labels, memory.active_file or 0)
        self.inactive_file.add_metric(labels, memory.inactive_file or 0)
        pgfault, pgmajfault = memory.page_faults
        for scope in ("container", "hierarchy"):
            self.failures.add_metric([*labels, "pgfault", scope], pgfault or 0)
            self.failures.add_metric([*labels, "pgmajfault", scope], pgmajfault or 0)

    def all(self) -> list[Any]:
        families = (
            self.last_seen, self.bursts, self.burst_seconds, self.load, self.load_d,
            self.tasks, self.kernel, self.active_file, self.inactive_file, self.failures,
            *self.processes.values(),
        )  # fmt: skip
        return [family for family in families if family.samples]
