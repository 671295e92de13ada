"""``KubeletConfiguration`` (kubelet.config.k8s.io/v1beta1): upstream's names and defaults.

Only the fields this kubelet models are here; the loader accepts upstream's other fields
and warns that they are ignored. Durations are float seconds (Go duration strings in the
file). Defaults are v1beta1's: ``KubeletConfiguration()`` is what an empty config file
means. Fields marked ``zero_unset`` are non-pointer Go fields, where upstream reads a zero
("0s", 0, "") as "use the default" — kubeadm writes ``syncFrequency: 0s`` relying on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

from .features import KUBELET_ENSURE_SECRET_PULLED_IMAGES, FeatureGates
from .fields import meta

API_GROUP = "kubelet.config.k8s.io"
API_VERSION = f"{API_GROUP}/v1beta1"
KIND = "KubeletConfiguration"

DEFAULT_EVICTION_HARD: Mapping[str, str] = MappingProxyType(
    {
        "memory.available": "100Mi",
        "nodefs.available": "10%",
        "nodefs.inodesFree": "5%",
        "imagefs.available": "15%",
        "imagefs.inodesFree": "5%",
    }
)
"""Linux hard-eviction thresholds when ``evictionHard`` is not set (eviction/defaults_linux.go)."""

DEFAULT_CREDENTIALS_POLICY = "NeverVerifyPreloadedImages"
"""``imagePullCredentialsVerificationPolicy`` with KubeletEnsureSecretPulledImages on."""


def _eviction_default() -> Mapping[str, str]:
    return dict(DEFAULT_EVICTION_HARD)


@attrs.frozen
class KubeletX509Authentication:
    """Client-certificate authentication for the kubelet's server."""

    client_ca_file: str = attrs.field(default="", metadata=meta(wire="clientCAFile"))


@attrs.frozen
class KubeletWebhookAuthentication:
    """Bearer-token authentication through the TokenReview API."""

    enabled: bool = True
    cache_ttl: float = attrs.field(
        default=120.0, metadata=meta(wire="cacheTTL", duration=True, zero_unset=True)
    )


@attrs.frozen
class KubeletAnonymousAuthentication:
    """Whether requests no authenticator accepted run as ``system:anonymous``."""

    enabled: bool = False


@attrs.frozen
class KubeletAuthentication:
    """How requests to the kubelet's server (:10250) are authenticated."""

    x509: KubeletX509Authentication = attrs.field(factory=KubeletX509Authentication)
    webhook: KubeletWebhookAuthentication = attrs.field(factory=KubeletWebhookAuthentication)
    anonymous: KubeletAnonymousAuthentication = attrs.field(factory=KubeletAnonymousAuthentication)


@attrs.frozen
class KubeletWebhookAuthorization:
    """Cache lifetimes for SubjectAccessReview answers."""

    cache_authorized_ttl: float = attrs.field(
        default=300.0, metadata=meta(wire="cacheAuthorizedTTL", duration=True, zero_unset=True)
    )
    cache_unauthorized_ttl: float = attrs.field(
        default=30.0, metadata=meta(wire="cacheUnauthorizedTTL", duration=True, zero_unset=True)
    )


@attrs.frozen
class KubeletAuthorization:
    """How authenticated requests to the kubelet's server are authorized."""

    mode: str = attrs.field(default="Webhook", metadata=meta(zero_unset=True))
    webhook: KubeletWebhookAuthorization = attrs.field(factory=KubeletWebhookAuthorization)


@attrs.frozen
class VModuleItem:
    """A per-file verbosity override (klog's ``-vmodule``)."""

    file_pattern: str
    verbosity: int


@attrs.frozen
class LoggingConfiguration:
    """component-base logging options; ``options`` (alpha) is accepted and ignored."""

    format: str = attrs.field(default="text", metadata=meta(zero_unset=True))
    flush_frequency: float = attrs.field(default=5.0, metadata=meta(nanos_ok=True, zero_unset=True))
    verbosity: int = 0
    vmodule: tuple[VModuleItem, ...] = ()


@attrs.frozen
class CrashLoopBackOffConfig:
    """Node-wide cap on the crash-loop back-off; None means the built-in 300 s."""

    max_container_restart_period: float | None = attrs.field(
        default=None, metadata=meta(duration=True)
    )


@attrs.frozen
class TracingConfiguration:
    """OpenTelemetry tracing (component-base's TracingConfiguration): absent means off.

    ``endpoint`` unset is the OTLP gRPC default ``localhost:4317``; an unset or zero
    ``samplingRatePerMillion`` samples no trace the kubelet starts.
    """

    endpoint: str | None = None
    sampling_rate_per_million: int | None = None


@attrs.frozen
class Taint:
    """A taint the node registers with (``registerWithTaints``; core/v1 Taint)."""

    key: str
    effect: str
    value: str = ""


@attrs.frozen
class ShutdownGracePeriodByPodPriority:
    """One ``shutdownGracePeriodByPodPriority`` entry: pods of at least ``priority`` (and
    below the next entry's) get ``shutdownGracePeriodSeconds`` at node shutdown."""

    priority: int = 0
    shutdown_grace_period_seconds: int = 0


@attrs.frozen
class MemorySwapConfiguration:
    """How containers may use the node's swap: "" or NoSwap (none), LimitedSwap (cgroup
    v2: Burstable containers in proportion to their memory request)."""

    swap_behavior: str = ""


@attrs.frozen
class MemoryReservation:
    """One ``reservedMemory`` entry: memory reserved on a NUMA node, per memory type."""

    numa_node: int = attrs.field(default=0, metadata=meta(wire="numaNode"))
    limits: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class KubeletConfiguration:
    """The kubelet's node configuration, as read from ``--config`` and overridden by flags."""

    # Pod sources
    static_pod_path: str = ""
    static_pod_url: str = ""
    static_pod_url_header: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    file_check_frequency: float = attrs.field(
        default=20.0, metadata=meta(duration=True, zero_unset=True)
    )
    http_check_frequency: float = attrs.field(
        default=20.0, metadata=meta(duration=True, zero_unset=True)
    )
    sync_frequency: float = attrs.field(default=60.0, metadata=meta(duration=True, zero_unset=True))
    run_once: bool = False
    max_pods: int = attrs.field(default=110, metadata=meta(zero_unset=True))
    pods_per_core: int = 0
    pod_pids_limit: int = -1

    # Container runtime
    container_runtime_endpoint: str = attrs.field(
        default="unix:///run/containerd/containerd.sock", metadata=meta(zero_unset=True)
    )
    image_service_endpoint: str = ""
    runtime_request_timeout: float = attrs.field(
        default=120.0, metadata=meta(duration=True, zero_unset=True)
    )
    streaming_connection_idle_timeout: float = attrs.field(
        default=4 * 3600.0, metadata=meta(duration=True, zero_unset=True)
    )
    pod_logs_dir: str = attrs.field(default="/var/log/pods", metadata=meta(zero_unset=True))
    seccomp_default: bool = False
    allowed_unsafe_sysctls: tuple[str, ...] = ()
    container_log_max_size: str = attrs.field(default="10Mi", metadata=meta(zero_unset=True))
    container_log_max_files: int = 5
    container_log_max_workers: int = 1
    container_log_monitor_interval: float = attrs.field(default=10.0, metadata=meta(duration=True))

    # Images
    serialize_image_pulls: bool = True
    max_parallel_image_pulls: int | None = None
    registry_pull_qps: int = attrs.field(default=5, metadata=meta(wire="registryPullQPS"))
    registry_burst: int = attrs.field(default=10, metadata=meta(zero_unset=True))
    image_pull_credentials_verification_policy: str = ""
    """Defaulted to NeverVerifyPreloadedImages only while KubeletEnsureSecretPulledImages
    is on (``gated_defaults``): with the gate off, setting it is refused, as upstream."""
    preloaded_images_verification_allowlist: tuple[str, ...] = ()
    image_gc_high_threshold_percent: int = attrs.field(
        default=85, metadata=meta(wire="imageGCHighThresholdPercent")
    )
    image_gc_low_threshold_percent: int = attrs.field(
        default=80, metadata=meta(wire="imageGCLowThresholdPercent")
    )
    image_minimum_gc_age: float = attrs.field(
        default=120.0, metadata=meta(wire="imageMinimumGCAge", duration=True, zero_unset=True)
    )
    volume_stats_agg_period: float = attrs.field(
        default=60.0, metadata=meta(duration=True, zero_unset=True)
    )
    image_maximum_gc_age: float = attrs.field(
        default=0.0, metadata=meta(wire="imageMaximumGCAge", duration=True)
    )

    # Cgroups and node allocatable
    cgroup_driver: str = attrs.field(default="cgroupfs", metadata=meta(zero_unset=True))
    cgroup_root: str = ""
    cgroups_per_qos: bool = attrs.field(default=True, metadata=meta(wire="cgroupsPerQOS"))
    enforce_node_allocatable: tuple[str, ...] = ("pods",)
    system_reserved: Mapping[str, str] = attrs.field(factory=dict)
    kube_reserved: Mapping[str, str] = attrs.field(factory=dict)
    system_reserved_cgroup: str = ""
    kube_reserved_cgroup: str = ""
    fail_swap_on: bool = True
    local_storage_capacity_isolation: bool = True
    cpu_cfs_quota: bool = attrs.field(default=True, metadata=meta(wire="cpuCFSQuota"))
    cpu_cfs_quota_period: float = attrs.field(
        default=0.1, metadata=meta(wire="cpuCFSQuotaPeriod", duration=True)
    )
    kubelet_cgroups: str = ""
    system_cgroups: str = ""
    fail_cgroup_v1: bool = attrs.field(default=True, metadata=meta(wire="failCgroupV1"))
    """Refuse to start on a cgroup v1 host (upstream's default since 1.35)."""
    single_process_oom_kill: bool | None = attrs.field(
        default=None, metadata=meta(wire="singleProcessOOMKill")
    )
    """None: true on cgroup v1, false on v2 (the container's cgroup is OOM-killed whole)."""
    memory_swap: MemorySwapConfiguration = attrs.field(factory=MemorySwapConfiguration)
    qos_reserved: Mapping[str, str] = attrs.field(factory=dict, metadata=meta(wire="qosReserved"))

    # Resource managers (CPU, memory, topology)
    cpu_manager_policy: str = attrs.field(
        default="none", metadata=meta(wire="cpuManagerPolicy", zero_unset=True)
    )
    """none (the shared pool for every container) or static (exclusive CPUs for
    Guaranteed containers with whole CPU requests)"""
    cpu_manager_policy_options: Mapping[str, str] = attrs.field(
        factory=dict, metadata=meta(wire="cpuManagerPolicyOptions")
    )
    cpu_manager_reconcile_period: float = attrs.field(
        default=10.0,
        metadata=meta(wire="cpuManagerReconcilePeriod", duration=True, zero_unset=True),
    )
    """Defaults to nodeStatusUpdateFrequency when the file leaves it unset, as upstream."""
    memory_manager_policy: str = attrs.field(default="None", metadata=meta(zero_unset=True))
    reserved_memory: tuple[MemoryReservation, ...] = ()
    topology_manager_policy: str = attrs.field(default="none", metadata=meta(zero_unset=True))
    topology_manager_scope: str = attrs.field(default="container", metadata=meta(zero_unset=True))
    topology_manager_policy_options: Mapping[str, str] = attrs.field(factory=dict)
    reserved_system_cpus: str = attrs.field(default="", metadata=meta(wire="reservedSystemCPUs"))
    """CPUs (a list such as ``0,2-3``) kept for the system: never given exclusively,
    and node allocatable's CPU reservation (it replaces kubeReserved/systemReserved cpu)"""

    # Eviction
    eviction_hard: Mapping[str, str] = attrs.field(factory=_eviction_default)
    eviction_soft: Mapping[str, str] = attrs.field(factory=dict)
    eviction_soft_grace_period: Mapping[str, str] = attrs.field(factory=dict)
    eviction_minimum_reclaim: Mapping[str, str] = attrs.field(factory=dict)
    eviction_pressure_transition_period: float = attrs.field(
        default=300.0, metadata=meta(duration=True, zero_unset=True)
    )
    eviction_max_pod_grace_period: int = 0
    merge_default_eviction_settings: bool = False

    # Node registration and status
    register_node: bool = True
    register_with_taints: tuple[Taint, ...] = ()
    provider_id: str = ""
    node_status_update_frequency: float = attrs.field(
        default=10.0, metadata=meta(duration=True, zero_unset=True)
    )
    node_status_report_frequency: float = attrs.field(
        default=300.0, metadata=meta(duration=True, zero_unset=True)
    )
    node_status_max_images: int = 50
    node_lease_duration_seconds: int = attrs.field(default=40, metadata=meta(zero_unset=True))
    shutdown_grace_period: float = attrs.field(default=0.0, metadata=meta(duration=True))
    shutdown_grace_period_critical_pods: float = attrs.field(
        default=0.0, metadata=meta(duration=True)
    )
    shutdown_grace_period_by_pod_priority: tuple[ShutdownGracePeriodByPodPriority, ...] = ()

    # API client and events
    kube_api_qps: int = attrs.field(default=50, metadata=meta(wire="kubeAPIQPS"))
    kube_api_burst: int = attrs.field(
        default=100, metadata=meta(wire="kubeAPIBurst", zero_unset=True)
    )
    event_record_qps: int = attrs.field(default=50, metadata=meta(wire="eventRecordQPS"))
    event_burst: int = attrs.field(default=100, metadata=meta(zero_unset=True))

    # Servers
    enable_server: bool = True
    address: str = attrs.field(default="0.0.0.0", metadata=meta(zero_unset=True))
    port: int = attrs.field(default=10250, metadata=meta(zero_unset=True))
    read_only_port: int = 0
    healthz_port: int = 10248
    healthz_bind_address: str = attrs.field(default="127.0.0.1", metadata=meta(zero_unset=True))
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    tls_cipher_suites: tuple[str, ...] = ()
    """Go's names; applied to TLS 1.0-1.2 handshakes (TLS 1.3 suites are fixed, as in Go)."""
    tls_curve_preferences: tuple[int, ...] = ()
    """TLS supported-group IDs (23 P-256, 24 P-384, 25 P-521, 29 X25519, ...) the main port
    negotiates, in TLS 1.2 and 1.3; empty: the TLS library's defaults."""
    tls_min_version: str = ""
    rotate_certificates: bool = False
    server_tls_bootstrap: bool = False
    authentication: KubeletAuthentication = attrs.field(factory=KubeletAuthentication)
    authorization: KubeletAuthorization = attrs.field(factory=KubeletAuthorization)
    enable_debugging_handlers: bool = True
    enable_system_log_handler: bool = True
    """``/logs/``: the files under /var/log (with the debugging handlers)."""
    enable_system_log_query: bool = False
    """``/logs/?query=``: the node log query (with the NodeLogQuery gate)."""
    enable_debug_flags_handler: bool = True
    """``PUT /debug/flags/v`` sets the log verbosity (with the debugging handlers)."""
    enable_profiling_handler: bool = True
    """``/debug/pprof/``: CPU samples, the task tree, live objects (with the debugging
    handlers)."""
    """``PUT /debug/flags/v`` sets the log verbosity (with the debugging handlers)."""

    # Networking and DNS
    hairpin_mode: str = attrs.field(default="promiscuous-bridge", metadata=meta(zero_unset=True))
    """Checked as upstream does; with a CRI runtime the network plugin does hairpinning."""
    cluster_domain: str = ""
    cluster_dns: tuple[str, ...] = ()
    resolv_conf: str = "/etc/resolv.conf"

    # Process
    oom_score_adj: int = -999
    protect_kernel_defaults: bool = False
    """True: start-up stops when a kernel tunable differs from the kubelet's value; false:
    the kubelet sets it."""
    max_open_files: int = attrs.field(default=1000000, metadata=meta(zero_unset=True))
    feature_gates: Mapping[str, bool] = attrs.field(factory=dict)
    logging: LoggingConfiguration = attrs.field(factory=LoggingConfiguration)
    crash_loop_back_off: CrashLoopBackOffConfig = attrs.field(factory=CrashLoopBackOffConfig)
    tracing: TracingConfiguration | None = None
    """Spans of pod syncs, CRI and API calls and served requests, sent over OTLP/gRPC."""


def legacy_flag_defaults(config: KubeletConfiguration) -> KubeletConfiguration:
    """The defaults upstream keeps for a kubelet started without ``--config``.

    Flags predate the config file and kept their old defaults: anonymous authentication
    on, no token webhook, AlwaysAllow authorization and the read-only port 10255.
    """
    return attrs.evolve(
        config,
        read_only_port=10255,
        authentication=attrs.evolve(
            config.authentication,
            anonymous=KubeletAnonymousAuthentication(enabled=True),
            webhook=attrs.evolve(config.authentication.webhook, enabled=False),
        ),
        authorization=attrs.evolve(config.authorization, mode="AlwaysAllow"),
    )


def gated_defaults(config: KubeletConfiguration, gates: FeatureGates) -> KubeletConfiguration:
    """Defaults upstream gives only while a feature gate is on (once the gates are known)."""
    policy = config.image_pull_credentials_verification_policy
    if not policy and gates.enabled(KUBELET_ENSURE_SECRET_PULLED_IMAGES):
        return attrs.evolve(
            config, image_pull_credentials_verification_policy=DEFAULT_CREDENTIALS_POLICY
        )
    return config


def effective_defaults(config: KubeletConfiguration) -> KubeletConfiguration:
    """Defaults upstream settles only after flags are applied (server start-up).

    ``reservedSystemCPUs`` replaces the CPU of ``kubeReserved`` and ``systemReserved``:
    the node reserves as many CPUs as it lists, as upstream's server does."""
    if config.cgroups_per_qos and not config.cgroup_root:
        config = attrs.evolve(config, cgroup_root="/")
    count = cpu_list_size(config.reserved_system_cpus)
    if count:
        kube = {k: v for k, v in config.kube_reserved.items() if k != "cpu"}
        system = {**config.system_reserved, "cpu": str(count)}
        config = attrs.evolve(config, kube_reserved=kube, system_reserved=system)
    return config


def cpu_list_size(text: str) -> int:
    """How many CPUs a list such as ``0,2-3`` names (0 when it does not parse: validation
    reports it)."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, sep, last = part.partition("-")
        if not first.isdigit() or (sep and not last.isdigit()):
            return 0
        cpus.update(range(int(first), int(last if sep else first) + 1))
    return len(cpus)
