"""Kubelet metrics: upstream names, labels and buckets, scrape-time gauges, the helpers."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from kubelet.api import EphemeralContainer, ObjectMeta, Pod, PodSpec
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    RuntimePodStatus,
    SandboxInfo,
    SandboxState,
)
from kubelet.goformat import go_duration_ms
from kubelet.metrics import (
    RUNTIME_OPERATION_BUCKETS,
    KubeletMetrics,
    PodGauges,
    exposition,
    image_size_label,
    operation_type,
)


def scrape(metrics: KubeletMetrics) -> dict[str, list[Sample]]:
    text = generate_latest(metrics.registry).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(samples: list[Sample], name: str, **labels: str) -> float:
    for s in samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise KeyError((name, labels))


def test_operation_types() -> None:
    assert operation_type("ListContainers") == "list_containers"
    assert operation_type("RunPodSandbox") == "run_podsandbox"
    assert operation_type("PodSandboxStatus") == "podsandbox_status"
    assert operation_type("ExecSync") == "exec_sync"
    assert operation_type("ImageFsInfo") == "image_fs_info"
    assert operation_type("PullImage") == "pull_image"


def test_runtime_operations() -> None:
    m = KubeletMetrics("node1", process=False)
    m.observe_runtime_operation("ListContainers", 0.002, None)
    m.observe_runtime_operation("ListContainers", 0.5, RuntimeError("x"))
    got = scrape(m)
    ops = got["kubelet_runtime_operations"]
    assert value(ops, "kubelet_runtime_operations_total", operation_type="list_containers") == 2
    errors = got["kubelet_runtime_operations_errors"]
    assert (
        value(errors, "kubelet_runtime_operations_errors_total", operation_type="list_containers")
        == 1
    )
    durations = got["kubelet_runtime_operations_duration_seconds"]
    buckets = [s for s in durations if s.name.endswith("_bucket")]
    assert [float(s.labels["le"]) for s in buckets[:3]] == [0.005, 0.0125, 0.03125]
    assert len(buckets) == len(RUNTIME_OPERATION_BUCKETS) + 1  # +Inf
    assert value(durations, "kubelet_runtime_operations_duration_seconds_bucket", le="0.005") == 1


def test_runtime_operation_errors_series_appears_with_the_first_error() -> None:
    m = KubeletMetrics("node1", process=False)
    for _ in range(3):
        m.observe_runtime_operation("StartContainer", 0.002, None)
    got = scrape(m)
    ops = got["kubelet_runtime_operations"]
    assert value(ops, "kubelet_runtime_operations_total", operation_type="start_container") == 3
    assert not [s for s in got["kubelet_runtime_operations_errors"] if s.labels]
    m.observe_runtime_operation("StartContainer", 0.002, RuntimeError("x"))
    errors = scrape(m)["kubelet_runtime_operations_errors"]
    total = "kubelet_runtime_operations_errors_total"
    assert value(errors, total, operation_type="start_container") == 1


def test_node_name_and_help_text() -> None:
    m = KubeletMetrics("node1", process=False)
    text = generate_latest(m.registry).decode()
    assert 'kubelet_node_name{node="node1"} 1.0' in text
    assert "# HELP kubelet_node_name [ALPHA] The node's name. The count is always 1." in text


def test_pleg_relist() -> None:
    m = KubeletMetrics(process=False, wall_clock=lambda: 1234.5)
    m.observe_relist(10.0, 0.02)
    m.observe_relist(11.0, 0.03)
    got = scrape(m)
    assert (
        value(
            got["kubelet_pleg_relist_duration_seconds"],
            "kubelet_pleg_relist_duration_seconds_count",
        )
        == 2
    )
    assert (
        value(
            got["kubelet_pleg_relist_interval_seconds"],
            "kubelet_pleg_relist_interval_seconds_count",
        )
        == 1
    )
    assert (
        value(
            got["kubelet_pleg_relist_interval_seconds"], "kubelet_pleg_relist_interval_seconds_sum"
        )
        == 1.0
    )
    assert value(got["kubelet_pleg_last_seen_seconds"], "kubelet_pleg_last_seen_seconds") == 1234.5


def test_pod_and_container_counters() -> None:
    m = KubeletMetrics(process=False)
    m.pod_started()
    m.pod_started(error=True)
    m.container_started("init_container")
    m.container_started("container", code="Unknown")
    m.observe_pod_worker("create", 0.3)
    m.observe_pod_start(2.5)
    got = scrape(m)
    assert value(got["kubelet_started_pods"], "kubelet_started_pods_total") == 1
    assert value(got["kubelet_started_pods_errors"], "kubelet_started_pods_errors_total") == 1
    started = got["kubelet_started_containers"]
    assert value(started, "kubelet_started_containers_total", container_type="init_container") == 1
    errors = got["kubelet_started_containers_errors"]
    assert (
        value(
            errors,
            "kubelet_started_containers_errors_total",
            container_type="container",
            code="Unknown",
        )
        == 1
    )
    worker = got["kubelet_pod_worker_duration_seconds"]
    assert value(worker, "kubelet_pod_worker_duration_seconds_count", operation_type="create") == 1
    start = got["kubelet_pod_start_duration_seconds"]
    assert value(start, "kubelet_pod_start_duration_seconds_bucket", le="3.0") == 1
    assert value(start, "kubelet_pod_start_duration_seconds_bucket", le="2.0") == 0


def test_gauges_computed_at_scrape_time() -> None:
    statuses: list[RuntimePodStatus] = []
    pods: list[Pod] = []
    m = KubeletMetrics(process=False, runtime_pods=lambda: statuses, desired_pods=lambda: pods)
    statuses.append(
        RuntimePodStatus(
            uid="u1",
            sandboxes=(SandboxInfo(id="s1", state=SandboxState.READY),),
            containers=(
                ContainerInfo(id="c1", name="a", state=ContainerRunState.RUNNING),
                ContainerInfo(id="c2", name="b", state=ContainerRunState.EXITED),
            ),
        )
    )
    statuses.append(
        RuntimePodStatus(uid="u2", sandboxes=(SandboxInfo(id="s2", state=SandboxState.NOTREADY),))
    )
    pods.append(
        Pod(metadata=ObjectMeta(name="s", annotations={"kubernetes.io/config.source": "file"}))
    )
    pods.append(
        Pod(metadata=ObjectMeta(name="a", annotations={"kubernetes.io/config.source": "api"}))
    )
    got = scrape(m)
    assert value(got["kubelet_running_pods"], "kubelet_running_pods") == 1
    running = got["kubelet_running_containers"]
    assert value(running, "kubelet_running_containers", container_state="running") == 1
    assert value(running, "kubelet_running_containers", container_state="exited") == 1
    assert value(running, "kubelet_running_containers", container_state="created") == 0
    desired = got["kubelet_desired_pods"]
    assert value(desired, "kubelet_desired_pods", static="true") == 1
    assert value(desired, "kubelet_desired_pods", static="") == 1  # upstream: empty, not false
    statuses.clear()
    assert value(scrape(m)["kubelet_running_pods"], "kubelet_running_pods") == 0


def test_process_collector() -> None:
    assert "process_cpu_seconds" in scrape(KubeletMetrics())


def _lines(metrics: KubeletMetrics, prefix: str) -> list[str]:
    text = exposition(metrics.registry).decode()
    return [line for line in text.splitlines() if prefix in line]


def test_bare_counters_keep_upstream_names_and_counter_type() -> None:
    m = KubeletMetrics("node1", process=False)
    m.pod_evicted("memory.available")
    m.pod_evicted("memory.available")
    m.pod_evicted("ephemeralpodfs.limit")
    m.pod_preempted("cpu")
    discards = [0]
    m.watch_pleg_discards(lambda: discards[0])
    discards[0] = 3
    assert _lines(m, "kubelet_evictions") == [
        "# HELP kubelet_evictions [ALPHA] Cumulative number of pod evictions by eviction signal",
        "# TYPE kubelet_evictions counter",
        'kubelet_evictions{eviction_signal="ephemeralpodfs.limit"} 1.0',
        'kubelet_evictions{eviction_signal="memory.available"} 2.0',
    ]
    assert _lines(m, "kubelet_pleg_discard_events") == [
        "# HELP kubelet_pleg_discard_events [ALPHA] The number of discard events in PLEG.",
        "# TYPE kubelet_pleg_discard_events counter",
        "kubelet_pleg_discard_events 3.0",
    ]
    assert 'kubelet_preemptions{preemption_signal="cpu"} 1.0' in _lines(m, "kubelet_preemptions")
    families = {f.name: f for f in text_string_to_metric_families(exposition(m.registry).decode())}
    assert families["kubelet_evictions"].type == "counter"  # Prometheus reads them as counters


def test_an_unlabelled_bare_counter_starts_at_zero() -> None:
    m = KubeletMetrics("node1", process=False)
    assert "kubelet_pleg_discard_events 0.0" in _lines(m, "kubelet_pleg_discard_events")
    assert _lines(m, "kubelet_evictions{") == []  # a labelled one: no series before the first


def test_no_created_series() -> None:
    m = KubeletMetrics("node1", process=False)
    m.pod_started()
    m.image_collected("space")
    text = exposition(m.registry).decode()
    assert "kubelet_started_pods_total 1.0" in text
    assert 'kubelet_image_garbage_collected_total{reason="space"} 1.0' in text
    assert "_created" not in text


def test_eviction_stats_age_and_sandbox_and_worker_start() -> None:
    m = KubeletMetrics("node1", process=False, wall_clock=lambda: 1000.0)
    m.observe_eviction_stats_age("memory.available", 997.0)
    m.observe_run_podsandbox("", 0.3)
    m.observe_run_podsandbox("kata", 0.1, error=True)
    m.observe_worker_start(0.02, 3)
    m.observe_worker_start(None, 1)
    m.observe_cgroup_manager("destroy", 0.02)
    got = scrape(m)
    cgroups = got["kubelet_cgroup_manager_duration_seconds"]
    name = "kubelet_cgroup_manager_duration_seconds_bucket"
    assert value(cgroups, name, operation_type="destroy", le="0.01") == 0
    assert value(cgroups, name, operation_type="destroy", le="0.025") == 1
    age = got["kubelet_eviction_stats_age_seconds"]
    signal = {"eviction_signal": "memory.available"}
    assert value(age, "kubelet_eviction_stats_age_seconds_sum", **signal) == 3.0
    assert value(age, "kubelet_eviction_stats_age_seconds_bucket", le="2.5", **signal) == 0
    sandbox = got["kubelet_run_podsandbox_duration_seconds"]
    name = "kubelet_run_podsandbox_duration_seconds_count"
    assert value(sandbox, name, runtime_handler="") == 1
    assert value(sandbox, name, runtime_handler="kata") == 1
    errors = got["kubelet_run_podsandbox_errors"]
    assert value(errors, "kubelet_run_podsandbox_errors_total", runtime_handler="kata") == 1
    assert not [s for s in errors if s.labels.get("runtime_handler") == ""]
    start = got["kubelet_pod_worker_start_duration_seconds"]
    assert value(start, "kubelet_pod_worker_start_duration_seconds_count") == 1  # None: unknown
    per_pod = got["kubelet_containers_per_pod_count"]
    assert value(per_pod, "kubelet_containers_per_pod_count_count") == 2
    assert value(per_pod, "kubelet_containers_per_pod_count_bucket", le="2.0") == 1
    assert value(per_pod, "kubelet_containers_per_pod_count_bucket", le="4.0") == 2


def test_active_and_mirror_pods_and_ephemeral_containers() -> None:
    static = Pod(metadata=ObjectMeta(name="s", annotations={"kubernetes.io/config.source": "file"}))
    debugged = Pod(
        metadata=ObjectMeta(name="a", annotations={"kubernetes.io/config.source": "api"}),
        spec=PodSpec(ephemeral_containers=(EphemeralContainer(name="d1"),)),
    )
    mirrors = [1]
    m = KubeletMetrics("node1", process=False)
    m.registry.register(
        PodGauges(None, lambda: [static, debugged], lambda: [static], lambda: mirrors[0])
    )
    got = scrape(m)
    assert value(got["kubelet_active_pods"], "kubelet_active_pods", static="true") == 1
    assert value(got["kubelet_active_pods"], "kubelet_active_pods", static="") == 0
    assert value(got["kubelet_mirror_pods"], "kubelet_mirror_pods") == 1
    managed = got["kubelet_managed_ephemeral_containers"]
    assert value(managed, "kubelet_managed_ephemeral_containers") == 1


def test_image_size_labels() -> None:
    assert image_size_label(0) == "0-10MB"
    assert image_size_label(10 * 1024 * 1024 - 1) == "0-10MB"
    assert image_size_label(10 * 1024 * 1024) == "10MB-100MB"
    assert image_size_label(3 * 1024**3) == "1GB-5GB"
    assert image_size_label(500 * 1024**3) == "GT100GB"


def test_go_durations_to_the_millisecond() -> None:
    assert [go_duration_ms(x) for x in (0, 0.0004, 0.567, 1, 1.2345, 61.5, 3723.4, 60)] == [
        "0s", "0s", "567ms", "1s", "1.234s", "1m1.5s", "1h2m3.4s", "1m0s",
    ]  # fmt: skip


def test_resize_metrics_are_upstreams() -> None:
    m = KubeletMetrics(process=False)
    text = generate_latest(m.registry).decode()
    assert "# HELP kubelet_pod_in_progress_resizes [ALPHA] Number of in-progress resizes" in text
    m.watch_resizes(lambda: ({"deferred": 2}, 1))
    m.resize_infeasible("swap_limitation")
    m.deferred_resize_accepted("pods_removed")
    m.observe_pod_resize(0.2, True)
    got = scrape(m)
    pending = got["kubelet_pod_pending_resizes"]
    assert value(pending, "kubelet_pod_pending_resizes", reason="deferred") == 2
    assert value(pending, "kubelet_pod_pending_resizes", reason="infeasible") == 0
    assert value(got["kubelet_pod_in_progress_resizes"], "kubelet_pod_in_progress_resizes") == 1
    infeasible = got["kubelet_pod_infeasible_resizes"]
    assert (
        value(infeasible, "kubelet_pod_infeasible_resizes_total", reason_detail="swap_limitation")
        == 1
    )
    accepted = got["kubelet_pod_deferred_accepted_resizes"]
    name = "kubelet_pod_deferred_accepted_resizes_total"
    assert value(accepted, name, retry_trigger="pods_removed") == 1
    duration = got["kubelet_pod_resize_duration_milliseconds"]
    bucket = "kubelet_pod_resize_duration_milliseconds_bucket"
    assert value(duration, bucket, success="true", le="100.0") == 0
    assert value(duration, bucket, success="true", le="500.0") == 1


def test_aligned_compute_resources_counters_are_upstreams() -> None:
    m = KubeletMetrics()
    m.cpu_pinning("aligned")
    m.cpu_pinning("unaligned")
    m.topology_admission("aligned-pod", 1)
    m.topology_admission("aligned-pod", 1)
    lines = _lines(m, "kubelet_container_aligned_compute_resources")
    assert "# TYPE kubelet_container_aligned_compute_resources_count counter" in lines
    assert (
        'kubelet_container_aligned_compute_resources_count{boundary="physical_cpu",'
        'scope="container"} 1.0' in lines
    )
    assert (
        'kubelet_container_aligned_compute_resources_count{boundary="numa_node",scope="pod"} 2.0'
        in lines
    )
    assert (
        'kubelet_container_aligned_compute_resources_failure_count{boundary="physical_cpu",'
        'scope="container"} 1.0' in lines
    )
