"""The kubelet's Prometheus metrics: upstream names, labels and buckets, one registry.

``KubeletMetrics`` owns one ``CollectorRegistry`` (served at ``/metrics``). Components do
not import it: the agent hands them small callables (``observe_runtime_operation`` as the
CRI channel's observer, ``observe_relist`` to the PLEG, ...). Gauges that describe state
the kubelet already keeps (running pods and containers, desired pods) are computed when
scraped from providers, so they can never drift from that state.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kubelet.api.pod import Pod
from kubelet.cri.types import ContainerRunState, RuntimePodStatus, SandboxState

DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Prometheus' default buckets (Go ``prometheus.DefBuckets``)."""

POD_START_BUCKETS = (
    0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600,
    900, 1200, 1800, 2700, 3600,
)  # fmt: skip
RUNTIME_OPERATION_BUCKETS = tuple(0.005 * 2.5**i for i in range(14))
"""ExponentialBuckets(.005, 2.5, 14), as upstream's runtime operation histogram."""

_OPERATION_NAMES = {
    "RunPodSandbox": "run_podsandbox",
    "StopPodSandbox": "stop_podsandbox",
    "RemovePodSandbox": "remove_podsandbox",
    "PodSandboxStatus": "podsandbox_status",
    "ListPodSandbox": "list_podsandbox",
    "UpdateContainerResources": "update_container",
    "PodSandboxStats": "podsandbox_stats",
    "ListPodSandboxStats": "list_podsandbox_stats",
    "ListPodSandboxMetrics": "list_podsandbox_metrics",
    "ImageFsInfo": "image_fs_info",
}


def operation_type(rpc: str) -> str:
    """Upstream's ``operation_type`` for a CRI RPC (``ListContainers``: ``list_containers``)."""
    known = _OPERATION_NAMES.get(rpc)
    if known is not None:
        return known
    return re.sub(r"(?<!^)(?=[A-Z])", "_", rpc).lower()


def _alpha(text: str) -> str:
    """component-base prefixes the help of every ALPHA metric with its stability level."""
    return f"[ALPHA] {text}"


RuntimePodsProvider = Callable[[], Iterable[RuntimePodStatus]]
DesiredPodsProvider = Callable[[], Iterable[Pod]]


class PodGauges(Collector):
    """Gauges computed at scrape time from what the kubelet already knows: the pods the
    runtime holds (the pod cache) and the pods it should run (the desired pods). A
    provider left out leaves its gauges out. Register it once both exist."""

    def __init__(
        self,
        runtime_pods: RuntimePodsProvider | None = None,
        desired_pods: DesiredPodsProvider | None = None,
    ) -> None:
        self.runtime_pods = runtime_pods
        self.desired_pods = desired_pods

    def collect(self) -> Iterator[Any]:
        yield from self._runtime_families()
        yield from self._desired_families()

    def _runtime_families(self) -> Iterator[GaugeMetricFamily]:
        provider = self.runtime_pods
        if provider is None:
            return
        running_pods = 0
        by_state = {state.value: 0 for state in ContainerRunState}
        for status in provider():
            if any(s.state is SandboxState.READY for s in status.sandboxes):
                running_pods += 1
            for container in status.containers:
                by_state[container.state.value] += 1
        pods = GaugeMetricFamily(
            "kubelet_running_pods", _alpha("Number of pods that have a running pod sandbox")
        )
        pods.add_metric([], running_pods)
        yield pods
        containers = GaugeMetricFamily(
            "kubelet_running_containers",
            _alpha("Number of containers currently running"),
            labels=["container_state"],
        )
        for state, count in by_state.items():
            containers.add_metric([state], count)
        yield containers

    def _desired_families(self) -> Iterator[GaugeMetricFamily]:
        provider = self.desired_pods
        if provider is None:
            return
        counts = {"true": 0, "false": 0}
        for pod in provider():
            counts["true" if pod.is_static else "false"] += 1
        family = GaugeMetricFamily(
            "kubelet_desired_pods",
            _alpha(
                "The number of pods the kubelet is being instructed to run. static is true "
                "if the pod is not from the apiserver."
            ),
            labels=["static"],
        )
        for static, count in counts.items():
            family.add_metric([static], count)
        yield family


class KubeletMetrics:
    """Every kubelet metric on one registry, with the helpers that record them.

    ``runtime_pods`` and ``desired_pods`` are providers read at scrape time (``PodGauges``;
    the agent registers its own once the components exist); without them those gauges
    are simply absent.
    """

    def __init__(
        self,
        node_name: str = "",
        *,
        runtime_pods: RuntimePodsProvider | None = None,
        desired_pods: DesiredPodsProvider | None = None,
        wall_clock: Callable[[], float] = time.time,
        process: bool = True,
    ) -> None:
        self.registry = CollectorRegistry()
        self._wall_clock = wall_clock
        self._last_relist_start: float | None = None
        self._operation_series: dict[str, tuple[str, Any, Any]] = {}
        """Per CRI RPC: its operation type, count and duration series (5 calls a pod
        start; a series lives as long as its metric, so nothing here goes stale)."""
        reg = self.registry
        if process:
            ProcessCollector(registry=reg)
        self.node_name = Gauge(
            "kubelet_node_name",
            _alpha("The node's name. The count is always 1."),
            ["node"],
            registry=reg,
        )
        if node_name:
            self.node_name.labels(node=node_name).set(1)
        self._pod_metrics(reg)
        self._pleg_metrics(reg)
        self._runtime_metrics(reg)
        self._http_metrics(reg)
        if runtime_pods is not None or desired_pods is not None:
            reg.register(PodGauges(runtime_pods, desired_pods))

    # -- helpers the agent calls ---------------------------------------------------------

    def _pod_metrics(self, reg: CollectorRegistry) -> None:
        """Pod start and pod worker durations."""
        self.pod_start_duration = Histogram(
            "kubelet_pod_start_duration_seconds",
            _alpha(
                "Duration in seconds from kubelet seeing a pod for the first time to the pod "
                "starting to run"
            ),
            buckets=POD_START_BUCKETS,
            registry=reg,
        )
        self.pod_worker_duration = Histogram(
            "kubelet_pod_worker_duration_seconds",
            _alpha(
                "Duration in seconds to sync a single pod. Broken down by operation type: "
                "create, update, or sync"
            ),
            ["operation_type"],
            buckets=DEF_BUCKETS,
            registry=reg,
        )

    def _pleg_metrics(self, reg: CollectorRegistry) -> None:
        """The PLEG's relists."""
        self.pleg_relist_duration = Histogram(
            "kubelet_pleg_relist_duration_seconds",
            _alpha("Duration in seconds for relisting pods in PLEG."),
            buckets=DEF_BUCKETS,
            registry=reg,
        )
        self.pleg_relist_interval = Histogram(
            "kubelet_pleg_relist_interval_seconds",
            _alpha("Interval in seconds between relisting in PLEG."),
            buckets=DEF_BUCKETS,
            registry=reg,
        )
        self.pleg_last_seen = Gauge(
            "kubelet_pleg_last_seen_seconds",
            _alpha("Timestamp in seconds when PLEG was last seen active."),
            registry=reg,
        )

    def _runtime_metrics(self, reg: CollectorRegistry) -> None:
        """CRI operations, pods and containers started."""
        self.runtime_operations = Counter(
            "kubelet_runtime_operations_total",
            _alpha("Cumulative number of runtime operations by operation type."),
            ["operation_type"],
            registry=reg,
        )
        self.runtime_operations_errors = Counter(
            "kubelet_runtime_operations_errors_total",
            _alpha("Cumulative number of runtime operation errors by operation type."),
            ["operation_type"],
            registry=reg,
        )
        self.runtime_operations_duration = Histogram(
            "kubelet_runtime_operations_duration_seconds",
            _alpha("Duration in seconds of runtime operations. Broken down by operation type."),
            ["operation_type"],
            buckets=RUNTIME_OPERATION_BUCKETS,
            registry=reg,
        )
        self.started_pods = Counter(
            "kubelet_started_pods_total", _alpha("Cumulative number of pods started"), registry=reg
        )
        self.started_pods_errors = Counter(
            "kubelet_started_pods_errors_total",
            _alpha("Cumulative number of errors when starting pods"),
            registry=reg,
        )
        self.started_containers = Counter(
            "kubelet_started_containers_total",
            _alpha("Cumulative number of containers started"),
            ["container_type"],
            registry=reg,
        )
        self.started_containers_errors = Counter(
            "kubelet_started_containers_errors_total",
            _alpha("Cumulative number of errors when starting containers"),
            ["container_type", "code"],
            registry=reg,
        )

    def _http_metrics(self, reg: CollectorRegistry) -> None:
        """Requests to the kubelet's HTTP server."""
        self.http_requests = Counter(
            "kubelet_http_requests_total",
            _alpha("Number of the http requests received since the server started"),
            ["method", "path", "server_type", "long_running"],
            registry=reg,
        )
        self.http_requests_duration = Histogram(
            "kubelet_http_requests_duration_seconds",
            _alpha("Duration in seconds to serve http requests"),
            ["method", "path", "server_type", "long_running"],
            buckets=DEF_BUCKETS,
            registry=reg,
        )
        self.http_inflight_requests = Gauge(
            "kubelet_http_inflight_requests",
            _alpha("Number of the inflight http requests"),
            ["method", "path", "server_type", "long_running"],
            registry=reg,
        )

    def observe_runtime_operation(
        self, rpc: str, seconds: float, error: BaseException | None
    ) -> None:
        """Every CRI call (the ``CriChannel`` observer): count, duration, errors."""
        series = self._operation_series.get(rpc)
        if series is None:
            op = operation_type(rpc)
            series = self._operation_series[rpc] = (
                op,
                self.runtime_operations.labels(operation_type=op),
                self.runtime_operations_duration.labels(operation_type=op),
            )
        op, count, duration = series
        count.inc()
        duration.observe(seconds)
        if error is not None:  # its series only once there is an error, as upstream
            self.runtime_operations_errors.labels(operation_type=op).inc()

    def observe_relist(self, started: float, seconds: float) -> None:
        """One PLEG relist that began at ``started`` (trio clock) and took ``seconds``."""
        if self._last_relist_start is not None:
            self.pleg_relist_interval.observe(max(started - self._last_relist_start, 0.0))
        self._last_relist_start = started
        self.pleg_relist_duration.observe(seconds)
        self.pleg_last_seen.set(self._wall_clock())

    def observe_pod_worker(self, operation: str, seconds: float) -> None:
        """One pod sync: ``operation`` is ``create`` (first sync), ``update`` or ``sync``."""
        self.pod_worker_duration.labels(operation_type=operation).observe(seconds)

    def observe_pod_start(self, seconds: float) -> None:
        """A pod's containers all run, ``seconds`` after the kubelet first saw it."""
        self.pod_start_duration.observe(seconds)

    def pod_started(self, error: bool = False) -> None:
        """A RunPodSandbox attempt (``error``: it failed)."""
        (self.started_pods_errors if error else self.started_pods).inc()

    def container_started(self, container_type: str = "container", code: str = "") -> None:
        """A StartContainer attempt; ``code`` names the failure (a gRPC code) if it failed.

        ``container_type`` is ``container``, ``init_container`` or ``ephemeral_container``.
        """
        self.started_containers.labels(container_type=container_type).inc()
        if code:
            self.started_containers_errors.labels(container_type=container_type, code=code).inc()


def probe_registry() -> CollectorRegistry:
    """A registry for ``/metrics/probes`` with ``process_start_time_seconds``, as upstream.

    The prober registers its own ``prober_probe_total`` / duration metrics on it.
    """
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    return registry
