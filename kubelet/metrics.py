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
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs
import trio
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.metrics import Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from kubelet.api import Pod
from kubelet.cri import ContainerRunState, RuntimePodStatus, SandboxState
from kubelet.podstartup import PodStartupTracker
from kubelet.version import KUBERNETES_VERSION, go_arch

# No ``…_created`` series beside each counter and histogram: upstream has none.
disable_created_metrics()  # type: ignore[no-untyped-call]

DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Prometheus' default buckets (Go ``prometheus.DefBuckets``)."""

LOOP_LAG_BUCKETS = (*DEF_BUCKETS, 30.0, 60.0)
"""Event-loop stalls: from the 5 ms floor of what counts as one up to a minute."""

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


IMAGE_PULL_BUCKETS = (
    1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600,
)  # fmt: skip
_MB, _GB = 1024 * 1024, 1024 * 1024 * 1024
IMAGE_SIZE_LABELS = (
    (0, "0-10MB"), (10 * _MB, "10MB-100MB"), (100 * _MB, "100MB-500MB"),
    (500 * _MB, "500MB-1GB"), (_GB, "1GB-5GB"), (5 * _GB, "5GB-10GB"),
    (10 * _GB, "10GB-20GB"), (20 * _GB, "20GB-30GB"), (30 * _GB, "30GB-40GB"),
    (40 * _GB, "40GB-60GB"), (60 * _GB, "60GB-100GB"), (100 * _GB, "GT100GB"),
)  # fmt: skip
"""``kubelet_image_pull_duration_seconds``' ``image_size_in_bytes``: the label of the
largest lower bound the image reaches."""


def image_size_label(size: int) -> str:
    """The ``image_size_in_bytes`` bucket of an image of ``size`` bytes."""
    for bound, label in reversed(IMAGE_SIZE_LABELS):
        if size >= bound:
            return label
    return IMAGE_SIZE_LABELS[0][1]


POD_STATUS_SYNC_BUCKETS = (0.010, 0.050, 0.100, 0.500, 1, 5, 10, 20, 30, 45, 60)
CONTAINERS_PER_POD_BUCKETS = (1, 2, 4, 8, 16)
"""ExponentialBuckets(1, 2, 5)."""


REST_CLIENT_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
"""client-go's rest_client_request_duration_seconds buckets."""


def _alpha(text: str) -> str:
    """component-base prefixes the help of every ALPHA metric with its stability level."""
    return f"[ALPHA] {text}"


def _static(pod: Pod) -> str:
    """The ``static`` label of upstream's pod counts: "true", or empty for an API pod."""
    return "true" if pod.is_static else ""


class BareCounter(Collector):
    """A counter exposed under its own name, as upstream's ``kubelet_evictions`` or
    ``kubelet_pleg_discard_events``: the client library would add ``_total`` to a
    ``Counter``. Collected as an untyped family; ``exposition`` writes its TYPE line as
    ``counter``. ``provider`` reads the count from its owner at scrape time instead."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...] = (),
        provider: Callable[[], float] | None = None,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.provider = provider
        self.values: dict[tuple[str, ...], float] = {} if labelnames else {(): 0.0}

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, got {labels}")
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, self.documentation, "unknown")
        if self.provider is not None:
            family.add_sample(self.name, {}, float(self.provider()))
        else:
            for labels, count in sorted(self.values.items()):
                named = dict(zip(self.labelnames, labels, strict=True))
                family.add_sample(self.name, named, count)
        yield family


POD_RESOURCES_METHODS = {"list": "List", "get": "Get", "get_allocatable": "GetAllocatableResources"}
"""podresources v1 calls: the metric suffix and the method name of their help texts."""
BARE_COUNTERS = (
    "kubelet_pleg_discard_events", "kubelet_evictions", "kubelet_preemptions",
    "kubelet_container_aligned_compute_resources_count",
    "kubelet_container_aligned_compute_resources_failure_count",
    *(f"kubelet_pod_resources_endpoint_{kind}_{m}"
      for kind in ("requests", "errors") for m in POD_RESOURCES_METHODS),
)  # fmt: skip
"""The counters upstream names without ``_total`` (see ``BareCounter``)."""
ADMISSION_REJECTION_REASONS = frozenset({
    "AppArmor", "PodOSSelectorNodeLabelDoesNotMatch", "PodOSNotSupported", "InvalidNodeInfo",
    "InitContainerRestartPolicyForbidden", "SupplementalGroupsPolicyNotSupported",
    "UnexpectedAdmissionError", "UnknownReason", "UnexpectedPredicateFailureType",
    "OutOfcpu", "OutOfmemory", "OutOfephemeral-storage", "OutOfpods",
    "node(s) had taints that the pod didn't tolerate", "Evicted", "SysctlForbidden",
    "TopologyAffinityError", "NodeShutdown", "VolumeAttachmentLimitExceeded",
})  # fmt: skip
"""Reasons ``kubelet_admission_rejections_total`` keeps as they are (upstream's
allowlist); another ``OutOf…`` is ``OutOfExtendedResources``, anything else ``Other``."""

_BARE_TYPE_LINE = re.compile(rb"^# TYPE (\S+) untyped$", re.MULTILINE)


def exposition(registry: CollectorRegistry, bare: Iterable[str] = BARE_COUNTERS) -> bytes:
    """The text format of ``registry`` (what ``/metrics`` serves), the families named in
    ``bare`` typed ``counter``."""
    from prometheus_client.exposition import generate_latest  # the text format, on first scrape

    names = {n.encode() for n in bare}
    text = generate_latest(registry)
    if not names:
        return text

    def retype(match: re.Match[bytes]) -> bytes:
        name = match.group(1)
        return b"# TYPE " + name + (b" counter" if name in names else b" untyped")

    return _BARE_TYPE_LINE.sub(retype, text)


def text_content_type() -> str:
    """The ``Content-Type`` of the text format (the library's; its exposition module, and
    what that imports, loads on the first scrape, not at start-up)."""
    from prometheus_client.exposition import CONTENT_TYPE_LATEST

    return CONTENT_TYPE_LATEST


GATHER_BETWEEN_CHECKPOINTS = 8
"""Families collected between two checkpoints of a scrape."""


@attrs.frozen
class _Gathered:
    """Families already collected, handed to ``generate_latest`` as its registry."""

    families: tuple[Metric, ...]

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


async def scrape(
    registry: CollectorRegistry,
    run_sync: Callable[[Callable[[], bytes]], Awaitable[bytes]],
    bare: Iterable[str] = BARE_COUNTERS,
) -> bytes:
    """``exposition`` without holding the event loop: the families are gathered on it (the
    collectors read the kubelet's state, which only the loop touches), a checkpoint every
    few, and the text is written through ``run_sync`` (a worker thread). A whole scrape on
    the loop held it 15-25 ms with a few pods."""
    families: list[Metric] = []
    for family in registry.collect():
        families.append(family)
        if len(families) % GATHER_BETWEEN_CHECKPOINTS == 0:
            await trio.lowlevel.checkpoint()
    gathered = _Gathered(tuple(families))
    return await run_sync(lambda: exposition(gathered, bare))  # type: ignore[arg-type]


RuntimePodsProvider = Callable[[], Iterable[RuntimePodStatus]]
DesiredPodsProvider = Callable[[], Iterable[Pod]]


class _ClaimsInUse(Collector):
    """dra_resource_claims_in_use, computed at scrape time."""

    def __init__(self, provider: Callable[[], Mapping[str, int]]) -> None:
        self.provider = provider

    def collect(self) -> Iterator[Any]:
        counts = self.provider()
        family = GaugeMetricFamily(
            "dra_resource_claims_in_use",
            _alpha(
                "The number of ResourceClaims that are currently in use on the node, by "
                "driver name (driver_name label value) and across all drivers (special "
                "value <any> for driver_name). Note that the sum of all by-driver counts is "
                "not the total number of in-use ResourceClaims because the same "
                "ResourceClaim might use devices from different drivers. Instead, use the "
                "count for the <any> driver_name."
            ),
            labels=["driver_name"],
        )
        family.add_metric(["<any>"], counts.get("<any>", 0))
        for driver, count in sorted(counts.items()):
            if driver != "<any>":
                family.add_metric([driver], count)
        yield family


RESIZE_DURATION_BUCKETS = (
    10,
    50,
    100,
    500,
    1000,
    2000,
    5000,
    10000,
    20000,
    30000,
    60000,
    120000,
    300000,
    600000,
)
"""upstream's ``kubelet_pod_resize_duration_milliseconds`` buckets"""
RESIZE_PENDING_REASONS = ("deferred", "infeasible")

ResizeCounts = Callable[[], tuple[Mapping[str, int], int]]
"""→ (pending resizes by reason, Deferred/Infeasible; in-progress resizes)"""


class _Resizes(Collector):
    """kubelet_pod_pending_resizes and kubelet_pod_in_progress_resizes, read from the
    allocations when scraped."""

    def __init__(self) -> None:
        self.provider: ResizeCounts | None = None

    def collect(self) -> Iterator[Any]:
        pending, in_progress = self.provider() if self.provider is not None else ({}, 0)
        family = GaugeMetricFamily(
            "kubelet_pod_pending_resizes",
            _alpha("Number of pending resizes for pods."),
            labels=["reason"],
        )
        for reason in RESIZE_PENDING_REASONS:
            family.add_metric([reason], pending.get(reason, 0))
        yield family
        yield GaugeMetricFamily(
            "kubelet_pod_in_progress_resizes",
            _alpha("Number of in-progress resizes for pods."),
            value=in_progress,
        )


class PodGauges(Collector):
    """Gauges computed at scrape time from what the kubelet already knows: the pods the
    runtime holds (the pod cache) and the pods it should run (the desired pods). A
    provider left out leaves its gauges out. Register it once both exist."""

    def __init__(
        self,
        runtime_pods: RuntimePodsProvider | None = None,
        desired_pods: DesiredPodsProvider | None = None,
        active_pods: DesiredPodsProvider | None = None,
        mirror_pods: Callable[[], int] | None = None,
        working_pods: Callable[[], Mapping[tuple[str, str, str], int]] | None = None,
    ) -> None:
        self.runtime_pods = runtime_pods
        self.desired_pods = desired_pods
        self.active_pods = active_pods
        """the pods admission counts (upstream's ``GetActivePods``)"""
        self.mirror_pods = mirror_pods
        """how many mirror pods the desired pods have in the API"""
        self.working_pods = working_pods
        """(lifecycle, config, static) → how many pod workers (``pods.census``)"""

    def collect(self) -> Iterator[Any]:
        yield from self._runtime_families()
        yield from self._desired_families()
        yield from self._active_families()

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
        counts = {"": 0, "true": 0}
        ephemeral = 0
        for pod in provider():
            counts[_static(pod)] += 1
            ephemeral += len(pod.spec.ephemeral_containers)
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
        managed = GaugeMetricFamily(
            "kubelet_managed_ephemeral_containers",
            _alpha("Current number of ephemeral containers in pods managed by this kubelet."),
        )
        managed.add_metric([], ephemeral)
        yield managed

    def _active_families(self) -> Iterator[GaugeMetricFamily]:
        if self.active_pods is not None:
            counts = {"": 0, "true": 0}
            for pod in self.active_pods():
                counts[_static(pod)] += 1
            family = GaugeMetricFamily(
                "kubelet_active_pods",
                _alpha(
                    "The number of pods the kubelet considers active and which are being "
                    "considered when admitting new pods. static is true if the pod is not "
                    "from the apiserver."
                ),
                labels=["static"],
            )
            for static, count in counts.items():
                family.add_metric([static], count)
            yield family
        if self.working_pods is not None:
            working = GaugeMetricFamily(
                "kubelet_working_pods",
                _alpha(
                    "Number of pods the kubelet is actually running, broken down by lifecycle "
                    "phase, whether the pod is desired, orphaned, or runtime only (also "
                    "orphaned), and whether the pod is static. An orphaned pod has been "
                    "removed from local configuration or force deleted in the API and "
                    "consumes resources that are not otherwise visible."
                ),
                labels=["lifecycle", "config", "static"],
            )
            for labels, count in self.working_pods().items():
                working.add_metric(list(labels), count)
            yield working
        if self.mirror_pods is not None:
            mirrors = GaugeMetricFamily(
                "kubelet_mirror_pods",
                _alpha(
                    "The number of mirror pods the kubelet will try to create (one per "
                    "admitted static pod)"
                ),
            )
            mirrors.add_metric([], self.mirror_pods())
            yield mirrors


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
        self._loop_lag_max = 0.0
        self._operation_series: dict[str, tuple[str, Any, Any]] = {}
        """Per CRI RPC: its operation type, count and duration series (5 calls a pod
        start; a series lives as long as its metric, so nothing here goes stale)."""
        reg = self.registry
        if process:
            ProcessCollector(registry=reg)
        self._component_families(reg)
        self._node_families(reg)
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
        self._dra_metrics(reg)
        self._device_plugin_metrics(reg)
        self._http_metrics(reg)
        self._node_protection_metrics(reg)
        self._resource_manager_metrics(reg)
        self._resize_metrics(reg)
        self._loop_metrics(reg)
        self.pod_startup = PodStartupTracker(self._observe_startup, wall_clock)
        """The pod startup SLI's tracker (the API source, image pulls and the status
        manager feed it)."""
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
        self.pod_start_sli_duration = Histogram(
            "kubelet_pod_start_sli_duration_seconds",
            _alpha(
                "Duration in seconds to start a pod, excluding time to pull images and run "
                "init containers, measured from pod creation timestamp to when all its "
                "containers are reported as started and observed via watch"
            ),
            buckets=POD_START_BUCKETS,
            registry=reg,
        )
        self.pod_start_total_duration = Histogram(
            "kubelet_pod_start_total_duration_seconds",
            _alpha(
                "Duration in seconds to start a pod since creation, including time to pull "
                "images and run init containers, measured from pod creation timestamp to "
                "when all its containers are reported as started and observed via watch"
            ),
            buckets=POD_START_BUCKETS,
            registry=reg,
        )
        self.first_network_pod_start_sli_duration = Gauge(
            "kubelet_first_network_pod_start_sli_duration_seconds",
            "[INTERNAL] Duration in seconds to start the first network pod, excluding time to "
            "pull images and run init containers, measured from pod creation timestamp to "
            "when all its containers are reported as started and observed via watch",
            registry=reg,
        )
        self.pod_status_sync_duration = Histogram(
            "kubelet_pod_status_sync_duration_seconds",
            _alpha(
                "Duration in seconds to sync a pod status update. Measures time from "
                "detection of a change to pod status until the API is successfully updated "
                "for that pod, even if multiple intevening changes to pod status occur."
            ),
            buckets=POD_STATUS_SYNC_BUCKETS,
            registry=reg,
        )
        self.pod_worker_start_duration = Histogram(
            "kubelet_pod_worker_start_duration_seconds",
            _alpha("Duration in seconds from kubelet seeing a pod to starting a worker."),
            buckets=DEF_BUCKETS,
            registry=reg,
        )
        self.containers_per_pod = Histogram(
            "kubelet_containers_per_pod_count",
            _alpha("The number of containers per pod."),
            buckets=CONTAINERS_PER_POD_BUCKETS,
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
        self.pleg_discard_events = BareCounter(
            "kubelet_pleg_discard_events", _alpha("The number of discard events in PLEG.")
        )
        reg.register(self.pleg_discard_events)

    def _dra_metrics(self, reg: CollectorRegistry) -> None:
        """Dynamic resource allocation: the DRA manager's operations and driver calls."""
        self.dra_operations_duration = Histogram(
            "dra_operations_duration_seconds",
            _alpha(
                "Latency histogram in seconds for the duration of handling all ResourceClaims "
                "referenced by a pod when the pod starts or stops. Identified by the name of "
                "the operation (PrepareResources or UnprepareResources) and separated by the "
                "success of the operation. The number of failed operations is provided "
                "through the histogram's overall count."
            ),
            ["operation_name", "is_error"],
            buckets=DEF_BUCKETS,
            registry=reg,
        )
        self.dra_grpc_operations_duration = Histogram(
            "dra_grpc_operations_duration_seconds",
            _alpha("Duration in seconds of the DRA gRPC operations"),
            ["driver_name", "method_name", "grpc_status_code"],
            buckets=DEF_BUCKETS,
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
        self.run_podsandbox_duration = Histogram(
            "kubelet_run_podsandbox_duration_seconds",
            _alpha(
                "Duration in seconds of the run_podsandbox operations. Broken down by "
                "RuntimeClass.Handler."
            ),
            ["runtime_handler"],
            buckets=DEF_BUCKETS,
            registry=reg,
        )
        self.cgroup_manager_duration = Histogram(
            "kubelet_cgroup_manager_duration_seconds",
            _alpha("Duration in seconds for cgroup manager operations. Broken down by method."),
            ["operation_type"],
            buckets=DEF_BUCKETS,
            registry=reg,
        )
        self.run_podsandbox_errors = Counter(
            "kubelet_run_podsandbox_errors_total",
            _alpha(
                "Cumulative number of the run_podsandbox operation errors by RuntimeClass.Handler."
            ),
            ["runtime_handler"],
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
        self.terminated_containers = Counter(
            "kubelet_terminated_containers_total",
            _alpha("Cumulative number of containers that terminated, by exit code"),
            ["container_type", "exit_code", "reason"],
            registry=reg,
        )

    def _device_plugin_metrics(self, reg: CollectorRegistry) -> None:
        self.device_plugin_registrations = Counter(
            "kubelet_device_plugin_registration_total",
            _alpha(
                "Cumulative number of device plugin registrations. Broken down by resource name."
            ),
            ["resource_name"],
            registry=reg,
        )
        self.device_plugin_alloc_duration = Histogram(
            "kubelet_device_plugin_alloc_duration_seconds",
            _alpha(
                "Duration in seconds to serve a device plugin Allocation request. "
                "Broken down by resource name."
            ),
            ["resource_name"],
            buckets=DEF_BUCKETS,
            registry=reg,
        )

    def _node_protection_metrics(self, reg: CollectorRegistry) -> None:
        """Evictions, critical pod preemptions and image garbage collection."""
        self.evictions = BareCounter(
            "kubelet_evictions",
            _alpha("Cumulative number of pod evictions by eviction signal"),
            ("eviction_signal",),
        )
        reg.register(self.evictions)
        self.eviction_stats_age = Histogram(
            "kubelet_eviction_stats_age_seconds",
            _alpha(
                "Time between when stats are collected, and when pod is evicted based on "
                "those stats by eviction signal"
            ),
            ["eviction_signal"],
            buckets=DEF_BUCKETS,
            registry=reg,
        )
        self.orphaned_runtime_pods = Counter(
            "kubelet_orphaned_runtime_pods_total",
            _alpha(
                "Number of pods that have been detected in the container runtime without "
                "being already known to the pod worker. This typically indicates the kubelet "
                "was restarted while a pod was force deleted in the API or in the local "
                "configuration, which is unusual."
            ),
            registry=reg,
        )
        self.restarted_pods = Counter(
            "kubelet_restarted_pods_total",
            _alpha(
                "Number of pods that have been restarted because they were deleted and "
                "recreated with the same UID while the kubelet was watching them (common for "
                "static pods, extremely uncommon for API pods)"
            ),
            ["static"],
            registry=reg,
        )
        self.preemptions = BareCounter(
            "kubelet_preemptions",
            _alpha("Cumulative number of pod preemptions by preemption resource"),
            ("preemption_signal",),
        )
        reg.register(self.preemptions)
        self.cgroup_version = Gauge(
            "kubelet_cgroup_version", _alpha("cgroup version on the hosts."), registry=reg
        )
        self.image_pull_duration = Histogram(
            "kubelet_image_pull_duration_seconds",
            _alpha("Duration in seconds to pull an image."),
            ["image_size_in_bytes"],
            buckets=IMAGE_PULL_BUCKETS,
            registry=reg,
        )
        self.image_garbage_collected = Counter(
            "kubelet_image_garbage_collected_total",
            _alpha(
                "Total number of images garbage collected by the kubelet, whether through "
                "disk usage or image age."
            ),
            ["reason"],
            registry=reg,
        )

    def _resource_manager_metrics(self, reg: CollectorRegistry) -> None:
        """The CPU manager's pinning and the topology manager's admission."""
        self.cpu_pinning_requests = Counter(
            "kubelet_cpu_manager_pinning_requests",
            _alpha("The number of cpu core allocations which required pinning."),
            registry=reg,
        )
        self.cpu_pinning_errors = Counter(
            "kubelet_cpu_manager_pinning_errors",
            _alpha("The number of cpu core allocations which required pinning failed."),
            registry=reg,
        )
        self.memory_pinning_requests = Counter(
            "kubelet_memory_manager_pinning_requests",
            _alpha("The number of memory pages allocations which required pinning."),
            registry=reg,
        )
        self.memory_pinning_errors = Counter(
            "kubelet_memory_manager_pinning_errors",
            _alpha("The number of memory pages allocations which required pinning that failed."),
            registry=reg,
        )
        self.topology_admission_requests = Counter(
            "kubelet_topology_manager_admission_requests",
            _alpha("The number of admission requests where resources have to be aligned."),
            registry=reg,
        )
        self.topology_admission_errors = Counter(
            "kubelet_topology_manager_admission_errors",
            _alpha(
                "The number of admission request failures where resources could not be aligned."
            ),
            registry=reg,
        )
        self.aligned_compute = BareCounter(
            "kubelet_container_aligned_compute_resources_count",
            _alpha(
                "Cumulative number of aligned compute resources allocated to containers by "
                "alignment type."
            ),
            ("scope", "boundary"),
        )
        reg.register(self.aligned_compute)
        self.aligned_compute_failures = BareCounter(
            "kubelet_container_aligned_compute_resources_failure_count",
            _alpha(
                "Cumulative number of failures to allocate aligned compute resources to "
                "containers by alignment type."
            ),
            ("scope", "boundary"),
        )
        reg.register(self.aligned_compute_failures)
        self.topology_admission_duration = Histogram(
            "kubelet_topology_manager_admission_duration_ms",
            _alpha("Duration in milliseconds to serve a pod admission request."),
            buckets=[0.05 * 2**i for i in range(15)],
            registry=reg,
        )

    def _resize_metrics(self, reg: CollectorRegistry) -> None:
        """In-place resize, as upstream's allocation manager and runtime report it."""
        self.pod_resize_duration = Histogram(
            "kubelet_pod_resize_duration_milliseconds",
            _alpha("Duration in milliseconds to actuate a pod resize"),
            ["success"],
            buckets=RESIZE_DURATION_BUCKETS,
            registry=reg,
        )
        self.pod_infeasible_resizes = Counter(
            "kubelet_pod_infeasible_resizes",
            _alpha("Number of infeasible resizes for pods."),
            ["reason_detail"],
            registry=reg,
        )
        self.pod_deferred_accepted_resizes = Counter(
            "kubelet_pod_deferred_accepted_resizes",
            _alpha("Cumulative number of resizes that were accepted after being deferred."),
            ["retry_trigger"],
            registry=reg,
        )
        self._resizes = _Resizes()
        reg.register(self._resizes)

    def watch_resizes(self, provider: ResizeCounts) -> None:
        """The pending and in-progress resize gauges read ``provider`` when scraped."""
        self._resizes.provider = provider

    def observe_pod_resize(self, seconds: float, success: bool) -> None:
        """One actuation of a pod's resize (the runtime's and cgroup updates)."""
        self.pod_resize_duration.labels(success=str(success).lower()).observe(seconds * 1000)

    def resize_infeasible(self, detail: str) -> None:
        self.pod_infeasible_resizes.labels(reason_detail=detail).inc()

    def deferred_resize_accepted(self, trigger: str) -> None:
        self.pod_deferred_accepted_resizes.labels(retry_trigger=trigger).inc()

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

    def _loop_metrics(self, reg: CollectorRegistry) -> None:
        """The kubelet's own event loop (``server.looplag``); no upstream twin: Go has none."""
        self.event_loop_lag = Histogram(
            "kubelet_event_loop_lag_seconds",
            _alpha(
                "Task steps that held the kubelet's event loop for 5 ms or more without "
                "returning to the scheduler, by duration in seconds"
            ),
            buckets=LOOP_LAG_BUCKETS,
            registry=reg,
        )
        self.event_loop_lag_max = Gauge(
            "kubelet_event_loop_lag_max_seconds",
            _alpha("The longest the kubelet's event loop was held by one task step since start"),
            registry=reg,
        )

    def _component_families(self, reg: CollectorRegistry) -> None:
        """component-base's families every Kubernetes binary has: build info, feature
        gates, and client-go's REST client requests."""
        build = Gauge(
            "kubernetes_build_info",
            _alpha(
                "A metric with a constant '1' value labeled by major, minor, git version, git "
                "commit, git tree state, build date, Go version, and compiler from which "
                "Kubernetes was built, and platform on which it is running."
            ),
            ["build_date", "compiler", "git_commit", "git_tree_state", "git_version",
             "go_version", "major", "minor", "platform"],
            registry=reg,
        )  # fmt: skip
        major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
        build.labels(
            "", "", "", "", KUBERNETES_VERSION, "", major, minor, f"linux/{go_arch()}"
        ).set(1)
        self.feature_enabled = Gauge(
            "kubernetes_feature_enabled",
            "[BETA] This metric records the data about the stage and enablement of a k8s feature.",
            ["name", "stage"],
            registry=reg,
        )
        self.rest_requests = Counter(
            "rest_client_requests",
            _alpha("Number of HTTP requests, partitioned by status code, method, and host."),
            ["code", "host", "method"],
            registry=reg,
        )
        self.rest_duration = Histogram(
            "rest_client_request_duration_seconds",
            _alpha("Request latency in seconds. Broken down by verb, and host."),
            ["host", "verb"],
            buckets=REST_CLIENT_BUCKETS,
            registry=reg,
        )

    def _node_families(self, reg: CollectorRegistry) -> None:
        self.admission_rejections = Counter(
            "kubelet_admission_rejections",
            _alpha("Cumulative number pod admission rejections by the Kubelet."),
            ["reason"],
            registry=reg,
        )
        self.pod_resources_requests = Counter(
            "kubelet_pod_resources_endpoint_requests",
            _alpha(
                "Cumulative number of requests to the PodResource endpoint. Broken down by "
                "server api version."
            ),
            ["server_api_version"],
            registry=reg,
        )
        self.pod_resources_calls: dict[tuple[str, str], BareCounter] = {}
        for method, name in POD_RESOURCES_METHODS.items():
            for kind, what in (("requests", ""), ("errors", " which returned error")):
                counter = BareCounter(
                    f"kubelet_pod_resources_endpoint_{kind}_{method}",
                    _alpha(
                        f"Number of requests to the PodResource {name} endpoint{what}. "
                        "Broken down by server api version."
                    ),
                    ("server_api_version",),
                )
                reg.register(counter)
                self.pod_resources_calls[kind, method] = counter

    def observe_admission_rejection(self, reason: str) -> None:
        """A pod refused at admission (upstream's recordAdmissionRejection)."""
        if reason not in ADMISSION_REJECTION_REASONS:
            reason = "OutOfExtendedResources" if reason.startswith("OutOf") else "Other"
        self.admission_rejections.labels(reason).inc()

    def observe_pod_resources(self, method: str, failed: bool, version: str = "v1") -> None:
        """One podresources call past the rate limit (``method``: list, get,
        get_allocatable)."""
        self.pod_resources_requests.labels(version).inc()
        self.pod_resources_calls["requests", method].inc(version)
        if failed:
            self.pod_resources_calls["errors", method].inc(version)

    def record_features(self, gates: Iterable[tuple[str, str, bool]]) -> None:
        """``kubernetes_feature_enabled``: (name, stage, on) of every known gate; GA is
        the empty stage, as component-base labels it."""
        for name, stage, on in gates:
            self.feature_enabled.labels(name, "" if stage == "GA" else stage).set(1 if on else 0)

    def observe_rest_request(self, method: str, host: str, code: str, seconds: float) -> None:
        """One API request (the ApiClient observer): ``code`` is the status, or
        ``<error>`` when no answer came."""
        self.rest_requests.labels(code, host, method).inc()
        self.rest_duration.labels(host, method).observe(seconds)

    def observe_loop_lag(self, seconds: float) -> None:
        """A task step held the event loop for ``seconds`` (at least the stall floor)."""
        self.event_loop_lag.observe(seconds)
        if seconds > self._loop_lag_max:
            self._loop_lag_max = seconds
            self.event_loop_lag_max.set(seconds)

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

    def watch_pleg_discards(self, discarded: Callable[[], int]) -> None:
        """``kubelet_pleg_discard_events`` reads the PLEG's own count when scraped."""
        self.pleg_discard_events.provider = discarded

    def pod_evicted(self, signal: str) -> None:
        """The eviction manager stopped a pod for ``signal`` (a threshold's signal, or a
        ``*.limit`` pseudo-signal of local storage)."""
        self.evictions.inc(signal)

    def observe_eviction_stats_age(self, signal: str, measured_at: float) -> None:
        """A met threshold an eviction acts on: how old (wall clock) its figure is."""
        age = max(self._wall_clock() - measured_at, 0.0)
        self.eviction_stats_age.labels(eviction_signal=signal).observe(age)

    def orphaned_runtime_pod(self) -> None:
        """Housekeeping found a runtime pod no pod worker knew, and stops it."""
        self.orphaned_runtime_pods.inc()

    def pod_restarted(self, pod: Pod) -> None:
        """``pod``'s UID came back while its worker was terminating it: it runs again."""
        self.restarted_pods.labels(static=_static(pod)).inc()

    def pod_preempted(self, resource: str) -> None:
        """A pod stopped to admit a critical pod; ``resource`` the first one short (or "")."""
        self.preemptions.inc(resource)

    def observe_image_pull(self, seconds: float, size: int) -> None:
        """A pull made for a container: its time, the wait for a turn included."""
        self.image_pull_duration.labels(image_size_in_bytes=image_size_label(size)).observe(seconds)

    def image_collected(self, reason: str) -> None:
        """Image garbage collection removed an image; ``reason``: "age" or "space"."""
        self.image_garbage_collected.labels(reason=reason).inc()

    def observe_run_podsandbox(
        self, runtime_handler: str, seconds: float, error: bool = False
    ) -> None:
        """One RunPodSandbox (``runtime_handler``: the RuntimeClass handler, "" for the
        default)."""
        self.run_podsandbox_duration.labels(runtime_handler=runtime_handler).observe(seconds)
        if error:
            self.run_podsandbox_errors.labels(runtime_handler=runtime_handler).inc()

    def cpu_pinning(self, kind: str) -> None:
        """A CPU manager pinning: ``requests`` (every one) or ``errors`` (refused); with
        ``full-pcpus-only``, a container on whole cores (``aligned``) or not
        (``unaligned``)."""
        if kind in ("aligned", "unaligned"):
            self._aligned(kind, "container", "physical_cpu")
            return
        (self.cpu_pinning_errors if kind == "errors" else self.cpu_pinning_requests).inc()

    def _aligned(self, kind: str, scope: str, boundary: str) -> None:
        counter = self.aligned_compute if kind == "aligned" else self.aligned_compute_failures
        counter.inc(scope, boundary)

    def memory_pinning(self, kind: str) -> None:
        """A memory manager pinning: ``requests`` (every one) or ``errors`` (refused)."""
        (self.memory_pinning_errors if kind == "errors" else self.memory_pinning_requests).inc()

    def topology_admission(self, kind: str, value: float) -> None:
        """A topology manager admission: ``requests``, ``errors``, or its ``duration``
        in whole milliseconds."""
        if kind == "duration":
            self.topology_admission_duration.observe(value)
        elif kind.startswith(("aligned-", "unaligned-")):
            aligned, _, scope = kind.partition("-")
            self._aligned(aligned, scope, "numa_node")
        else:
            (
                self.topology_admission_errors
                if kind == "errors"
                else self.topology_admission_requests
            ).inc()

    def observe_dra_operation(self, operation: str, is_error: bool, seconds: float) -> None:
        """A pod's PrepareResources or UnprepareResources by the DRA manager."""
        self.dra_operations_duration.labels(
            operation_name=operation, is_error="true" if is_error else "false"
        ).observe(seconds)

    def observe_dra_grpc(self, driver: str, method: str, code: str, seconds: float) -> None:
        """One call to a DRA driver (``method``: the full gRPC method name)."""
        self.dra_grpc_operations_duration.labels(
            driver_name=driver, method_name=method, grpc_status_code=code
        ).observe(seconds)

    def dra_claims_in_use(self, provider: Callable[[], Mapping[str, int]]) -> None:
        """Register ``dra_resource_claims_in_use`` over ``provider`` (driver → claims in
        use), with upstream's "<any>" total; once (the DRA manager's start)."""
        self.registry.register(_ClaimsInUse(provider))

    def observe_cgroup_manager(self, operation: str, seconds: float) -> None:
        """One cgroup "create", "update" or "destroy" by the cgroup manager."""
        self.cgroup_manager_duration.labels(operation_type=operation).observe(seconds)

    def observe_device_plugin_registration(self, resource: str) -> None:
        """A device plugin asked to register ``resource`` (counted before the checks)."""
        self.device_plugin_registrations.labels(resource_name=resource).inc()

    def observe_device_plugin_alloc(self, resource: str, seconds: float) -> None:
        """One Allocate call to the plugin of ``resource``."""
        self.device_plugin_alloc_duration.labels(resource_name=resource).observe(seconds)

    def observe_worker_start(self, seconds: float | None, containers: int) -> None:
        """A pod's first sync begins: ``seconds`` since the kubelet first saw it (None:
        not known) and its number of containers."""
        if seconds is not None:
            self.pod_worker_start_duration.observe(max(seconds, 0.0))
        self.containers_per_pod.observe(containers)

    def _observe_startup(self, total: float, sli: float | None, first_network: bool) -> None:
        self.pod_start_total_duration.observe(total)
        if sli is not None:
            self.pod_start_sli_duration.observe(sli)
            if first_network:
                self.first_network_pod_start_sli_duration.set(sli)

    def observe_pod_worker(self, operation: str, seconds: float) -> None:
        """One pod sync: ``operation`` is ``create`` (first sync), ``update`` or ``sync``."""
        self.pod_worker_duration.labels(operation_type=operation).observe(seconds)

    def observe_pod_start(self, seconds: float) -> None:
        """A pod's containers all run, ``seconds`` after the kubelet first saw it."""
        self.pod_start_duration.observe(seconds)

    def pod_started(self, error: bool = False) -> None:
        """A RunPodSandbox attempt (``error``: it failed)."""
        (self.started_pods_errors if error else self.started_pods).inc()

    def container_terminated(self, container_type: str, exit_code: int, reason: str) -> None:
        """A container's exit, reported once (``status.new_terminations``)."""
        self.terminated_containers.labels(
            container_type=container_type, exit_code=str(exit_code), reason=reason
        ).inc()

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
