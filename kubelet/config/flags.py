"""The kubelet's command-line flags: upstream's names, Go's spelling, help that states defaults.

Every flag is a ``FlagSpec``: either it overrides one ``KubeletConfiguration`` field
(``field`` is its path in the file) or it is a flag-only setting (``field`` is None).
argparse only collects raw strings; values are parsed later so a bad one raises
``ConfigError`` naming the flag instead of exiting from inside argparse.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from kubelet.errors import ConfigError, Problem

from . import flagvalues as fv
from .duration import format_duration
from .fields import get_by_wire_path
from .kubeletconfig import KubeletConfiguration
from .support import NOT_IMPLEMENTED, PARTIAL, SETTINGS

DEFAULT_ROOT_DIR = "/var/lib/kubelet"
DEFAULT_CERT_DIR = "/var/lib/kubelet/pki"
_BOOL_METAVAR = "true|false"
_LEGACY = "; without --config the flag default is {0}"
GC_FLAG_DEPRECATION = (
    "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version."
)
REMOVAL_DEPRECATION = "will be removed in 1.25 or later."
CONFIG_FLAG_DEPRECATION = (
    "This parameter should be set via the config file specified by the Kubelet's --config "
    "flag. See https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/ for "
    "more information."
)
"""Upstream marks every flag that sets a KubeletConfiguration field deprecated with this
message, but for -v, --vmodule, --log-flush-frequency and --provider-id (and
--seccomp-default, which upstream registers as a flag of its own)."""


def _identity(text: str) -> str:
    return text


@attrs.frozen
class FlagSpec:
    """One flag: its name, what it sets, how its text is parsed and repeated uses combine.

    ``combine`` is how repeated uses fold together, as pflag's value types do: "last"
    (scalars), "concat" (string slices), "update" (maps), "multimap" (header lists).
    """

    name: str
    help: str
    field: str | None = None
    parse: Callable[[str], Any] = _identity
    combine: str = "last"
    boolean: bool = False
    metavar: str | None = None
    short: str | None = None
    default: str | None = None
    """Shown as the default in --help; derived from KubeletConfiguration() when None."""
    deprecated: str = ""
    """pflag's deprecation message: the flag works, and using it prints a warning"""

    @property
    def dest(self) -> str:
        """The argparse destination (and the flag-only Options key)."""
        return self.name.replace("-", "_")


def _cfg(
    name: str,
    field: str,
    help: str,
    parse: Callable[[str], Any] = _identity,
    *,
    deprecated: str = CONFIG_FLAG_DEPRECATION,
    **kw: Any,
) -> FlagSpec:
    """A flag setting a config field: deprecated, as upstream's, unless told otherwise."""
    return FlagSpec(name=name, help=help, field=field, parse=parse, deprecated=deprecated, **kw)


def _bool(
    name: str, field: str, help: str, *, deprecated: str = CONFIG_FLAG_DEPRECATION, **kw: Any
) -> FlagSpec:
    """A boolean flag setting a config field (Go spelling: a bare flag means true)."""
    return _cfg(name, field, help, fv.go_bool, boolean=True, deprecated=deprecated, **kw)


FLAGS: tuple[FlagSpec, ...] = (
    # Files and identity (flag-only)
    FlagSpec(
        "config",
        "Load the initial configuration (a KubeletConfiguration) from this file; "
        "flags given on the command line override its values.",
        metavar="FILE",
        default="none",
    ),
    FlagSpec(
        "config-dir",
        "Directory of drop-in KubeletConfiguration files (*.conf), merged over --config in "
        "lexical order (maps merged, lists replaced); flags still override them.",
        metavar="DIR",
        default='""',
    ),
    FlagSpec(
        "lock-file",
        "Hold an exclusive lock (flock) on this file while running; start-up waits for it.",
        metavar="FILE",
        default='""',
    ),
    FlagSpec(
        "exit-on-lock-contention",
        "Exit when another process opens --lock-file (to ask for the lock), releasing it.",
        parse=fv.go_bool,
        boolean=True,
        default="false",
    ),
    FlagSpec(
        "experimental-allocatable-ignore-eviction",
        "Leave the hard eviction thresholds out of node allocatable.",
        parse=fv.go_bool,
        boolean=True,
        default="false",
        deprecated=REMOVAL_DEPRECATION,
    ),
    FlagSpec(
        "experimental-mounter-path",
        "Path of a mount binary to use instead of mount(8).",
        metavar="PATH",
        default='""',
        deprecated=REMOVAL_DEPRECATION + " in favor of using CSI.",
    ),
    *(
        FlagSpec(
            f"log-{fmt}-{what}",
            help,
            parse=parse,
            boolean=parse is fv.go_bool,
            metavar=None if parse is fv.go_bool else "QTY",
            default=default,
            deprecated=CONFIG_FLAG_DEPRECATION,
        )
        for fmt in ("text", "json")
        for what, help, parse, default in (
            (
                "split-stream",
                f"[Alpha] In {fmt} format, write error messages to stderr and info messages "
                "to stdout; needs the LoggingAlphaOptions feature gate.",
                fv.go_bool,
                "false",
            ),
            (
                "info-buffer-size",
                f"[Alpha] In {fmt} format with split streams, buffer this many bytes of info "
                "messages; needs the LoggingAlphaOptions feature gate.",
                fv.quantity,
                "0",
            ),
        )
    ),
    FlagSpec(
        "kubeconfig",
        "Kubeconfig file that says how to reach the API server; without it the "
        "kubelet runs standalone (static pods only).",
        metavar="FILE",
        default="none",
    ),
    FlagSpec(
        "bootstrap-kubeconfig",
        "Kubeconfig used to obtain this node's client certificate (TLS bootstrap) when the "
        "--kubeconfig file is missing or its certificate expired; the certificate goes to "
        "--cert-dir and --kubeconfig is written to present it.",
        metavar="FILE",
        default="none",
    ),
    FlagSpec(
        "cloud-provider",
        "'external' when a cloud-controller-manager initializes the node (it is registered "
        "with the node.cloudprovider.kubernetes.io/uninitialized taint); empty for none. "
        "Built-in cloud providers do not exist any more.",
        metavar="NAME",
        default="none",
    ),
    FlagSpec(
        "image-credential-provider-config",
        "CredentialProviderConfig file naming the exec plugins asked for registry "
        "credentials of matching images.",
        metavar="FILE",
        default="none",
    ),
    FlagSpec(
        "image-credential-provider-bin-dir",
        "Directory holding the credential provider plugins' executables.",
        metavar="DIR",
        default="none",
    ),
    FlagSpec(
        "hostname-override",
        "Use this name instead of the machine's hostname to identify the node (lowercased).",
        metavar="NAME",
        default="the hostname",
    ),
    FlagSpec(
        "node-ip",
        "IP address of the node, or two comma-separated addresses for dual-stack.",
        parse=fv.node_ips,
        metavar="IP[,IP]",
        default="auto-detected",
    ),
    FlagSpec(
        "node-labels",
        "Labels to add when registering the node, as key=value pairs separated "
        "by ','; kubernetes.io labels are limited to the kubelet's own namespaces.",
        parse=fv.node_labels,
        combine="update",
        metavar="KEY=VALUE,...",
        default="none",
    ),
    FlagSpec(
        "root-dir",
        "Directory for the kubelet's own files (pod volumes, plugins, state).",
        metavar="DIR",
        default=DEFAULT_ROOT_DIR,
    ),
    FlagSpec(
        "runtime-cgroups",
        "Absolute cgroupfs name of the cgroup the container runtime runs in, reported as the "
        "'runtime' system container of /stats/summary; the runtime is not moved into it "
        "(as upstream with a remote runtime).",
        metavar="CGROUP",
        default="none",
    ),
    FlagSpec(
        "debug-console-socket",
        "Serve the trio debug console on this unix socket (mode 0600); `kubelet debug "
        "--socket PATH` attaches to it. Not an upstream flag; off unless given.",
        metavar="PATH",
        default="off",
    ),
    *(
        FlagSpec(
            name,
            help,
            parse=parse,
            metavar=metavar,
            default=default,
            deprecated=GC_FLAG_DEPRECATION,
        )
        for name, help, parse, metavar, default in (
            (
                "minimum-container-ttl-duration",
                "Minimum age of a finished container before container GC may remove it.",
                fv.duration,
                "DURATION",
                "0s",
            ),
            (
                "maximum-dead-containers-per-container",
                "Old instances of each container to keep (negative: no limit).",
                fv.int32,
                "N",
                "1",
            ),
            (
                "maximum-dead-containers",
                "Old container instances to keep on the node (negative: no limit).",
                fv.int32,
                "N",
                "-1",
            ),
        )
    ),
    FlagSpec(
        "cert-dir",
        "Directory for TLS certificates: the client certificate of TLS bootstrap and "
        "rotation, the serving certificate (self-signed, or from the certificates API with "
        "serverTLSBootstrap) when --tls-cert-file and --tls-private-key-file are not given.",
        metavar="DIR",
        default=DEFAULT_CERT_DIR,
    ),
    FlagSpec(
        "version",
        "Print version information and quit; --version=raw prints the version struct.",
        parse=fv.version_mode,
        boolean=True,
        default="false",
    ),
    # Logging
    _cfg(
        "v",
        "logging.verbosity",
        "Log verbosity, 0 or more: higher numbers log more.",
        fv.uint32,
        short="v",
        metavar="LEVEL",
        deprecated="",
    ),
    _cfg(
        "vmodule",
        "logging.vmodule",
        "Per-file verbosity, as pattern=N,... (text format only).",
        fv.vmodule,
        metavar="PATTERN=N,...",
        deprecated="",
    ),
    _cfg("logging-format", "logging.format", "Log format: 'text' or 'json'.", metavar="FORMAT"),
    _cfg(
        "log-flush-frequency",
        "logging.flushFrequency",
        "Longest time between log flushes.",
        fv.duration,
        metavar="DURATION",
        deprecated="",
    ),
    # Pod sources
    _cfg(
        "pod-manifest-path",
        "staticPodPath",
        "Directory of static pod files to run, or one static "
        "pod file; files starting with '.' are ignored.",
        metavar="PATH",
    ),
    _cfg(
        "manifest-url",
        "staticPodURL",
        "URL to fetch additional static pod specifications from.",
        metavar="URL",
    ),
    _cfg(
        "manifest-url-header",
        "staticPodURLHeader",
        "HTTP headers for --manifest-url, as "
        "'name:value' pairs separated by ','; repeat the flag to add more, values for one name "
        "accumulate in order (e.g. --manifest-url-header 'a:hello,b:again' "
        "--manifest-url-header 'b:beautiful').",
        fv.header_multimap,
        combine="multimap",
        metavar="NAME:VALUE,...",
    ),
    _cfg(
        "file-check-frequency",
        "fileCheckFrequency",
        "How often to re-read --pod-manifest-path.",
        fv.duration,
        metavar="DURATION",
    ),
    _cfg(
        "http-check-frequency",
        "httpCheckFrequency",
        "How often to re-fetch --manifest-url.",
        fv.duration,
        metavar="DURATION",
    ),
    _cfg(
        "sync-frequency",
        "syncFrequency",
        "Longest time between syncs of running containers with their configuration.",
        fv.duration,
        metavar="DURATION",
    ),
    _bool(
        "runonce",
        "runOnce",
        "Run-once mode, removed as upstream's: true stops start-up (false is accepted).",
    ),
    _cfg("max-pods", "maxPods", "Most pods this kubelet runs.", fv.int32, metavar="N"),
    _cfg(
        "pods-per-core",
        "podsPerCore",
        "Most pods per core: the node takes min(this × cores, --max-pods); 0 for no limit.",
        fv.int32,
        metavar="N",
    ),
    _cfg(
        "max-open-files",
        "maxOpenFiles",
        "The open-files limit (soft and hard) the kubelet sets for itself at start.",
        fv.int64,
        metavar="N",
    ),
    _cfg(
        "pod-max-pids",
        "podPidsLimit",
        "Most processes per pod; -1 leaves it to the node's allocatable PIDs.",
        fv.int64,
        metavar="N",
    ),
    # Runtime
    _cfg(
        "container-runtime-endpoint",
        "containerRuntimeEndpoint",
        "CRI runtime service endpoint, e.g. unix:///run/containerd/containerd.sock.",
        metavar="ENDPOINT",
    ),
    _cfg(
        "image-service-endpoint",
        "imageServiceEndpoint",
        "CRI image service endpoint; empty means the --container-runtime-endpoint.",
        metavar="ENDPOINT",
    ),
    _cfg(
        "runtime-request-timeout",
        "runtimeRequestTimeout",
        "Timeout for runtime calls other than long-running ones (pull, logs, exec, attach).",
        fv.duration,
        metavar="DURATION",
    ),
    _cfg(
        "cgroup-driver",
        "cgroupDriver",
        "How to manage cgroups: 'cgroupfs' or 'systemd' (slices over D-Bus); a runtime "
        "that reports its driver (CRI RuntimeConfig) overrides it.",
        metavar="DRIVER",
    ),
    _cfg(
        "cgroup-root",
        "cgroupRoot",
        "Root cgroup for pods; '/' when empty and --cgroups-per-qos is on.",
        metavar="CGROUP",
    ),
    _cfg(
        "cpu-manager-policy",
        "cpuManagerPolicy",
        "CPU manager policy: 'none' or 'static'.",
        metavar="POLICY",
    ),
    _cfg(
        "cpu-manager-policy-options",
        "cpuManagerPolicyOptions",
        "One key=value CPU manager policy option per use; repeat the flag for more.",
        fv.one_pair,
        combine="update",
        metavar="KEY=VALUE",
    ),
    _cfg(
        "cpu-manager-reconcile-period",
        "cpuManagerReconcilePeriod",
        "CPU manager reconciliation period; unset, --node-status-update-frequency.",
        fv.duration,
        metavar="DURATION",
    ),
    _cfg(
        "reserved-cpus",
        "reservedSystemCPUs",
        "CPUs or CPU ranges (e.g. 0-3,8) reserved for the system and Kubernetes daemons; "
        "supersedes the cpu of --system-reserved and --kube-reserved.",
        metavar="CPUS",
    ),
    _cfg(
        "memory-manager-policy",
        "memoryManagerPolicy",
        "Memory manager policy: 'None' or 'Static'.",
        metavar="POLICY",
    ),
    _cfg(
        "reserved-memory",
        "reservedMemory",
        "Memory reserved per NUMA node, e.g. 0:memory=1Gi,hugepages-1Mi=2Gi (entries "
        "separated by ';', or repeat the flag).",
        fv.reserved_memory,
        combine="concat",
        metavar="NUMA:TYPE=QTY,...",
    ),
    _cfg(
        "topology-manager-policy",
        "topologyManagerPolicy",
        "Topology manager policy: 'none', 'best-effort', 'restricted' or 'single-numa-node'.",
        metavar="POLICY",
    ),
    _cfg(
        "topology-manager-scope",
        "topologyManagerScope",
        "Scope of topology hints: 'container' or 'pod'.",
        metavar="SCOPE",
    ),
    _cfg(
        "topology-manager-policy-options",
        "topologyManagerPolicyOptions",
        "One key=value topology manager policy option per use; repeat the flag for more.",
        fv.one_pair,
        combine="update",
        metavar="KEY=VALUE",
    ),
    _bool(
        "fail-cgroupv1",
        "failCgroupV1",
        "Refuse to start on a host using cgroup v1.",
        deprecated="",  # upstream leaves it undeprecated
    ),
    _bool(
        "protect-kernel-defaults",
        "protectKernelDefaults",
        "Refuse to start when a kernel tunable differs from the kubelet's defaults.",
        default="false",
    ),
    _cfg(
        "volume-plugin-dir",
        "volumePluginDir",
        "Directory of third-party (FlexVolume) volume plugins.",
        metavar="DIR",
        default="/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
    ),
    _bool(
        "enable-controller-attach-detach",
        "enableControllerAttachDetach",
        "Leave attaching and detaching volumes to the attach/detach controller.",
        default="true",
    ),
    _bool(
        "make-iptables-util-chains",
        "makeIPTablesUtilChains",
        "Ensure the iptables utility chains exist on the host.",
        default="true",
    ),
    _bool(
        "kernel-memcg-notification",
        "kernelMemcgNotification",
        "Learn of memory thresholds crossed from the kernel's memcg notifications.",
        default="false",
    ),
    _cfg(
        "pod-cidr",
        "podCIDR",
        "The CIDR of pod IP addresses in standalone mode.",
        metavar="CIDR",
        default='""',
    ),
    _cfg(
        "hairpin-mode",
        "hairpinMode",
        "How hairpin NAT is set up: 'promiscuous-bridge', 'hairpin-veth' or 'none'.",
        metavar="MODE",
    ),
    _bool(
        "seccomp-default",
        "seccompDefault",
        "Run containers (and init containers) that set no seccomp profile with the "
        "runtime's default profile (RuntimeDefault) instead of Unconfined.",
        deprecated="",  # upstream's own flag, not one of its config flags
    ),
    _cfg(
        "allowed-unsafe-sysctls",
        "allowedUnsafeSysctls",
        "Comma-separated unsafe sysctls or sysctl patterns (ending in *) pods may set, "
        "beyond the safe set; each must be namespaced (net.*, kernel.shm*, kernel.msg*, "
        "kernel.sem, fs.mqueue.*). Use these at your own risk.",
        fv.string_list,
        combine="concat",
        metavar="NAME,...",
    ),
    _bool(
        "cgroups-per-qos",
        "cgroupsPerQOS",
        "Create the QoS-class cgroup hierarchy and one cgroup per pod.",
    ),
    _cfg(
        "enforce-node-allocatable",
        "enforceNodeAllocatable",
        "Comma-separated node allocatable "
        "enforcements: none, pods, system-reserved, kube-reserved (and -compressible variants).",
        fv.string_list,
        combine="concat",
        metavar="LEVEL,...",
    ),
    _cfg(
        "system-reserved",
        "systemReserved",
        "Resources reserved for the OS, e.g. cpu=200m,memory=500Mi.",
        fv.key_value_map,
        combine="update",
        metavar="RESOURCE=QTY,...",
    ),
    _cfg(
        "kube-reserved",
        "kubeReserved",
        "Resources reserved for Kubernetes daemons, e.g. cpu=200m,memory=500Mi.",
        fv.key_value_map,
        combine="update",
        metavar="RESOURCE=QTY,...",
    ),
    _cfg(
        "system-reserved-cgroup",
        "systemReservedCgroup",
        "Absolute name of the cgroup of the OS daemons --system-reserved is for, e.g. "
        "/system-reserved.",
        metavar="CGROUP",
    ),
    _cfg(
        "kube-reserved-cgroup",
        "kubeReservedCgroup",
        "Absolute name of the cgroup of the Kubernetes daemons --kube-reserved is for, e.g. "
        "/kube-reserved.",
        metavar="CGROUP",
    ),
    _bool("fail-swap-on", "failSwapOn", "Refuse to start when swap is enabled on the node."),
    _cfg(
        "kubelet-cgroups",
        "kubeletCgroups",
        "Absolute cgroupfs name of a cgroup to move the kubelet's process into (checked "
        "every minute).",
        metavar="CGROUP",
    ),
    _cfg(
        "system-cgroups",
        "systemCgroups",
        "Absolute cgroupfs name of a cgroup to move every non-kernel process of the root "
        "cgroup into (every minute); needs --cgroup-root.",
        metavar="CGROUP",
    ),
    _cfg(
        "qos-reserved",
        "qosReserved",
        "With the QOSReserved feature gate: the percentage of the memory requests of "
        "higher QoS classes kept from lower ones, e.g. memory=50%.",
        fv.key_value_map,
        combine="update",
        metavar="memory=PERCENT",
    ),
    _bool(
        "cpu-cfs-quota",
        "cpuCFSQuota",
        "Enforce container and pod CPU limits with CFS quota; false leaves them unlimited.",
    ),
    _cfg(
        "cpu-cfs-quota-period",
        "cpuCFSQuotaPeriod",
        "The CFS period of CPU limits; other than 100ms needs the CustomCPUCFSQuotaPeriod "
        "feature gate (then 1ms to 1s).",
        fv.duration,
        metavar="DURATION",
    ),
    _bool(
        "local-storage-capacity-isolation",
        "localStorageCapacityIsolation",
        "Account and limit pods' local ephemeral storage.",
    ),
    _cfg(
        "eviction-hard",
        "evictionHard",
        "Hard eviction thresholds, e.g. memory.available<100Mi,nodefs.available<10%.",
        fv.langle_map,
        combine="update",
        metavar="SIGNAL<QTY,...",
    ),
    _cfg(
        "eviction-soft",
        "evictionSoft",
        "Soft eviction thresholds, e.g. memory.available<1.5Gi; each needs a grace period.",
        fv.langle_map,
        combine="update",
        metavar="SIGNAL<QTY,...",
    ),
    _cfg(
        "eviction-soft-grace-period",
        "evictionSoftGracePeriod",
        "How long a soft threshold must hold before a pod is evicted, e.g. memory.available=1m30s.",
        fv.key_value_map,
        combine="update",
        metavar="SIGNAL=DURATION,...",
    ),
    _cfg(
        "eviction-minimum-reclaim",
        "evictionMinimumReclaim",
        "What must be freed beyond a threshold before pressure ends, e.g. imagefs.available=2Gi.",
        fv.key_value_map,
        combine="update",
        metavar="SIGNAL=QTY,...",
    ),
    _cfg(
        "eviction-pressure-transition-period",
        "evictionPressureTransitionPeriod",
        "How long a pressure condition stays after its threshold was last met.",
        fv.duration,
    ),
    _cfg(
        "eviction-max-pod-grace-period",
        "evictionMaxPodGracePeriod",
        "Longest grace period (seconds) a pod gets when a soft threshold evicts it.",
        fv.int32,
        metavar="SECONDS",
    ),
    # Images
    _bool("serialize-image-pulls", "serializeImagePulls", "Pull images one at a time."),
    _cfg(
        "registry-qps",
        "registryPullQPS",
        "Image pulls per second; 0 is unlimited.",
        fv.int32,
        metavar="N",
    ),
    _cfg(
        "registry-burst",
        "registryBurst",
        "Burst of image pulls above --registry-qps.",
        fv.int32,
        metavar="N",
    ),
    _cfg(
        "image-gc-high-threshold",
        "imageGCHighThresholdPercent",
        "Disk usage percent at which image garbage collection always runs.",
        fv.int32,
        metavar="PERCENT",
    ),
    _cfg(
        "image-gc-low-threshold",
        "imageGCLowThresholdPercent",
        "Disk usage percent image garbage "
        "collection frees down to; must be below the high threshold.",
        fv.int32,
        metavar="PERCENT",
    ),
    _cfg(
        "volume-stats-agg-period",
        "volumeStatsAggPeriod",
        "How long a measurement of each pod volume's disk usage is reused; a negative value "
        "(or 0 on the command line) turns the measuring off.",
        fv.duration,
        metavar="DURATION",
    ),
    _cfg(
        "minimum-image-ttl-duration",
        "imageMinimumGCAge",
        "Least age of an unused image before it may be garbage collected.",
        fv.duration,
        metavar="DURATION",
    ),
    _cfg(
        "container-log-max-size",
        "containerLogMaxSize",
        "Size at which a container log file is rotated, e.g. 10Mi.",
        metavar="QTY",
    ),
    _cfg(
        "container-log-max-files",
        "containerLogMaxFiles",
        "Most log files kept per container (at least 2).",
        fv.int32,
        metavar="N",
    ),
    # Node registration and status
    _bool(
        "register-node",
        "registerNode",
        "Register the node with the API server (needs --kubeconfig).",
    ),
    _cfg(
        "register-with-taints",
        "registerWithTaints",
        "Taints to register the node with, as comma-separated key=value:Effect.",
        fv.taints,
        metavar="KEY=VALUE:EFFECT,...",
    ),
    _cfg(
        "node-status-update-frequency",
        "nodeStatusUpdateFrequency",
        "How often node status is computed and posted when it changed.",
        fv.duration,
        metavar="DURATION",
    ),
    _cfg(
        "node-status-max-images",
        "nodeStatusMaxImages",
        "Most images reported in the node's status.images; -1 for no cap.",
        fv.int32,
        metavar="N",
    ),
    _cfg(
        "provider-id",
        "providerID",
        "Identifier of the node in a machine database, e.g. a cloud provider's.",
        metavar="ID",
        deprecated="",
    ),
    _cfg(
        "feature-gates",
        "featureGates",
        "Feature gates as Name=true|false,...; merged over the config file's, flags winning. "
        "The names are upstream v1.36's (AllAlpha and AllBeta included); an unknown gate, or "
        "a gate locked to its default set to the other value, stops start-up.",
        fv.bool_map,
        combine="update",
        metavar="NAME=BOOL,...",
    ),
    _cfg(
        "kube-api-qps",
        "kubeAPIQPS",
        "Requests per second to the API server (events and node heartbeats excepted); "
        "must be >= 0, and 0 means client-go's default, 5.",
        fv.int32,
        metavar="N",
    ),
    _cfg(
        "kube-api-content-type",
        "contentType",
        "Content type of requests sent to the API server.",
        metavar="TYPE",
        default="application/vnd.kubernetes.protobuf",
    ),
    _cfg(
        "kube-api-burst",
        "kubeAPIBurst",
        "Burst of requests to the API server above --kube-api-qps; must be >= 0, and 0 "
        "means client-go's default, 10 (in the config file, 0 means 100).",
        fv.int32,
        metavar="N",
    ),
    _cfg(
        "event-qps",
        "eventRecordQPS",
        "Events created per second; must be >= 0, and 0 means client-go's default, 5.",
        fv.int32,
        metavar="N",
    ),
    _cfg(
        "event-burst",
        "eventBurst",
        "Burst of events above --event-qps; must be >= 0, and 0 means client-go's default, "
        "10 (in the config file, 0 means 100).",
        fv.int32,
        metavar="N",
    ),
    _bool(
        "contention-profiling",
        "enableContentionProfiling",
        "Enable block profiling, if profiling is enabled.",
        default="false",
    ),
    _cfg(
        "oom-score-adj",
        "oomScoreAdj",
        "OOM score adjustment of the kubelet process, in [-1000, 1000]; set at start-up.",
        fv.int32,
        metavar="N",
    ),
    # Servers
    _bool("enable-server", "enableServer", "Run the kubelet's authenticated server."),
    _cfg(
        "address",
        "address",
        "IP address the kubelet's server listens on ('0.0.0.0' or '::' for all).",
        fv.ip,
        metavar="IP",
    ),
    _cfg("port", "port", "Port of the kubelet's server.", fv.int32, metavar="PORT"),
    _cfg(
        "streaming-connection-idle-timeout",
        "streamingConnectionIdleTimeout",
        "How long an exec, attach or port-forward stream may pass no byte either way before "
        "it is closed; 0 means no limit (a zero in the config file means the default).",
        fv.duration,
        metavar="DURATION",
    ),
    _cfg(
        "read-only-port",
        "readOnlyPort",
        "Port of the unauthenticated read-only server; 0 disables it.",
        fv.int32,
        metavar="PORT",
        default="0" + _LEGACY.format(10255),
    ),
    _cfg(
        "healthz-port",
        "healthzPort",
        "Port of the /healthz server; 0 disables it.",
        fv.int32,
        metavar="PORT",
    ),
    _cfg(
        "healthz-bind-address",
        "healthzBindAddress",
        "IP address the /healthz server listens on.",
        fv.ip,
        metavar="IP",
    ),
    _bool(
        "enable-debugging-handlers",
        "enableDebuggingHandlers",
        "Serve logs, exec, attach, port-forward and run endpoints.",
    ),
    _cfg(
        "tls-cert-file",
        "tlsCertFile",
        "Serving certificate (with intermediates); a self-signed "
        "one is made in --cert-dir when unset.",
        metavar="FILE",
    ),
    _cfg(
        "tls-private-key-file",
        "tlsPrivateKeyFile",
        "Private key of --tls-cert-file.",
        metavar="FILE",
    ),
    _cfg(
        "tls-cipher-suites",
        "tlsCipherSuites",
        "Comma-separated cipher suites of the server (Go's IANA names); the TLS library's "
        "defaults when omitted.",
        fv.string_list,
        combine="concat",
        metavar="SUITE,...",
    ),
    _cfg(
        "tls-min-version",
        "tlsMinVersion",
        "Minimum TLS version: VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13.",
        metavar="VERSION",
    ),
    _bool(
        "rotate-certificates",
        "rotateCertificates",
        "Renew the client certificate through the certificates API before it expires.",
    ),
    _bool(
        "rotate-server-certificates",
        "serverTLSBootstrap",
        "Request and renew the serving certificate through the certificates API.",
    ),
    _bool(
        "anonymous-auth",
        "authentication.anonymous.enabled",
        "Serve requests no authenticator accepted as system:anonymous.",
        default="false" + _LEGACY.format("true"),
    ),
    _bool(
        "authentication-token-webhook",
        "authentication.webhook.enabled",
        "Authenticate bearer tokens with the TokenReview API.",
        default="true" + _LEGACY.format("false"),
    ),
    _cfg(
        "authentication-token-webhook-cache-ttl",
        "authentication.webhook.cacheTTL",
        "How long TokenReview answers are cached.",
        fv.duration,
        metavar="DURATION",
    ),
    _cfg(
        "client-ca-file",
        "authentication.x509.clientCAFile",
        "CA bundle that authenticates client certificates.",
        metavar="FILE",
    ),
    _cfg(
        "authorization-mode",
        "authorization.mode",
        "Authorization of server requests: 'AlwaysAllow' or 'Webhook' (SubjectAccessReview).",
        metavar="MODE",
        default="Webhook" + _LEGACY.format("AlwaysAllow"),
    ),
    _cfg(
        "authorization-webhook-cache-authorized-ttl",
        "authorization.webhook.cacheAuthorizedTTL",
        "How long 'authorized' SubjectAccessReview answers are cached.",
        fv.duration,
        metavar="DURATION",
    ),
    _cfg(
        "authorization-webhook-cache-unauthorized-ttl",
        "authorization.webhook.cacheUnauthorizedTTL",
        "How long 'unauthorized' SubjectAccessReview answers are cached.",
        fv.duration,
        metavar="DURATION",
    ),
    # DNS
    _cfg(
        "cluster-dns",
        "clusterDNS",
        "Comma-separated DNS server IPs for pods with dnsPolicy ClusterFirst.",
        fv.ip_list,
        combine="concat",
        metavar="IP,...",
    ),
    _cfg(
        "cluster-domain",
        "clusterDomain",
        "Cluster DNS domain, added to pods' search domains.",
        metavar="DOMAIN",
    ),
    _cfg(
        "resolv-conf",
        "resolvConf",
        "Resolver configuration that pods' DNS is based on; empty disables it.",
        metavar="FILE",
    ),
)

BY_NAME: Mapping[str, FlagSpec] = {spec.name: spec for spec in FLAGS}


@attrs.frozen
class ParsedFlags:
    """The flags as given: raw strings per flag name, in command-line order."""

    given: Mapping[str, tuple[str, ...]]

    def raw(self, name: str) -> tuple[str, ...]:
        """Every value given for ``name`` (empty when the flag was not used)."""
        return self.given.get(name, ())

    @property
    def version(self) -> str:
        """What ``--version`` asks for: "" (run), "true" (print the version) or "raw"
        (print the version struct), as upstream's verflag; ConfigError on another value."""
        values = self.raw("version")
        if not values or values[-1] == "raw":
            return values[-1] if values else ""
        try:
            return "true" if fv.go_bool(values[-1]) else ""
        except ValueError:
            raise ConfigError.single(
                "--version", "", f'invalid value "{values[-1]}": expected true, false or raw'
            ) from None


def parse_flags(argv: Sequence[str]) -> ParsedFlags:
    """Collect the flags; an unknown flag or a missing value raises ``ConfigError``.

    ``--help`` prints help and raises ``SystemExit(0)``, as any command does.
    """
    namespace, extra = build_parser().parse_known_args(_go_style(argv))
    if extra and extra != ["--"]:
        raise ConfigError(Problem("", "", _unknown(extra)))
    given = {
        spec.name: tuple(getattr(namespace, spec.dest))
        for spec in FLAGS
        if getattr(namespace, spec.dest) is not None
    }
    return ParsedFlags(given=given)


def _unknown(extra: Sequence[str]) -> str:
    """pflag's and the kubelet's words for the first argument no flag took (a removed
    flag such as --pod-infra-container-image is "unknown flag: ..." upstream too)."""
    token = extra[0]
    if token == "--" and len(extra) > 1:
        token = extra[1]
    elif token.startswith("--"):
        return f"unknown flag: {token.partition('=')[0]}"
    elif token.startswith("-") and len(token) > 1:
        return f"unknown shorthand flag: {token[1]!r} in {token}"
    return f"unknown command {token}"


def deprecation_warnings(flags: ParsedFlags) -> list[str]:
    """pflag's line for each deprecated flag given (upstream prints it and goes on)."""
    return [
        f"Flag --{spec.name} has been deprecated, {spec.deprecated}"
        for spec in FLAGS
        if spec.deprecated and flags.raw(spec.name)
    ]


def parse_value(spec: FlagSpec, values: Sequence[str]) -> Any:
    """The combined value of every use of a flag; ``ConfigError`` names the flag."""
    parsed = []
    for raw in values:
        try:
            parsed.append(spec.parse(raw))
        except ValueError as exc:
            raise ConfigError.single(
                f"--{spec.name}", "", f'invalid value "{raw}": {exc}'
            ) from None
    if spec.combine == "concat":
        return tuple(item for value in parsed for item in value)
    if spec.combine == "update":
        return {k: v for value in parsed for k, v in value.items()}
    if spec.combine == "multimap":
        merged: dict[str, tuple[str, ...]] = {}
        for value in parsed:
            for k, items in value.items():
                merged[k] = (*merged.get(k, ()), *items)
        return merged
    return parsed[-1]


class _Parser(argparse.ArgumentParser):
    """argparse that raises ``ConfigError`` instead of printing usage and exiting 2."""

    def error(self, message: str) -> Any:
        raise ConfigError(Problem("", "", message))


class _HelpFormatter(argparse.HelpFormatter):
    """Shows Go-style booleans as ``--flag[=true|false]``; wraps help at spaces only, so
    that a URL or a hyphenated word stays whole (and can be copied)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(
            " ".join(text.split()), width, break_on_hyphens=False, break_long_words=False
        )

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if action.metavar == _BOOL_METAVAR:
            return ", ".join(f"{opt}[={_BOOL_METAVAR}]" for opt in action.option_strings)
        return super()._format_action_invocation(action)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser, with help for every flag (each stating its default)."""
    parser = _Parser(
        prog="kubelet",
        usage="kubelet [flags]",
        description="The node agent: runs the pods that belong on this node through a CRI "
        "runtime and reports their status. Written as one Trio structured-concurrency program.",
        allow_abbrev=False,
        formatter_class=lambda prog: _HelpFormatter(prog, max_help_position=40, width=100),
    )
    defaults = KubeletConfiguration()
    for spec in FLAGS:
        names = [f"--{spec.name}"] + ([f"-{spec.short}"] if spec.short else [])
        default = spec.default if spec.default is not None else _show_default(defaults, spec)
        parser.add_argument(
            *names,
            dest=spec.dest,
            action="append",
            metavar=_BOOL_METAVAR if spec.boolean else spec.metavar,
            help=_help_text(spec, default),
        )
    return parser


def _help_text(spec: FlagSpec, default: str) -> str:
    """pflag's usage line: help, default, then "(DEPRECATED: ...)" (upstream's kubelet
    shows its deprecated flags rather than hiding them)."""
    text = f"{spec.help}{support_note(spec)} (default: {default})"
    if spec.deprecated:
        text += f" (DEPRECATED: {spec.deprecated})"
    return text.replace("%", "%%")


def support_key(spec: FlagSpec) -> str:
    """The flag's entry in the support table: its config field, or ``--name``."""
    return spec.field if spec.field is not None else f"--{spec.name}"


def support_note(spec: FlagSpec) -> str:
    """ " [Not implemented yet: ...]" for a flag the kubelet accepts but does not act on."""
    support = SETTINGS[support_key(spec)]
    if support.status == NOT_IMPLEMENTED:
        return f" [Not implemented yet: {support.note}.]"
    if support.status == PARTIAL and spec.field is not None:
        return f" [Partly implemented: {support.note}.]"
    return ""


def shown_default(spec: FlagSpec) -> str:
    """The default ``--help`` states for a flag (the configuration reference prints it too)."""
    return spec.default if spec.default is not None else _show_default(KubeletConfiguration(), spec)


def _show_default(defaults: KubeletConfiguration, spec: FlagSpec) -> str:
    assert spec.field is not None, spec.name
    value = get_by_wire_path(defaults, tuple(spec.field.split(".")))
    if spec.parse is fv.duration:
        return format_duration(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        sep = "<" if spec.parse is fv.langle_map else "="
        return ",".join(f"{k}{sep}{v}" for k, v in value.items()) or "none"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) or "none"
    return str(value) if value != "" else '""'


def _go_style(argv: Sequence[str]) -> list[str]:
    """Rewrite Go flag spellings argparse does not know.

    A bare boolean flag means ``=true`` (so ``--register-node false`` leaves ``false`` as a
    stray argument, an error, exactly as in Go), and ``-v=3`` is klog's ``-v 3``.
    """
    booleans = {f"--{spec.name}" for spec in FLAGS if spec.boolean}
    out: list[str] = []
    for i, token in enumerate(argv):
        if token == "--":
            out.extend(argv[i:])
            break
        if token in booleans:
            out.append(f"{token}=true")
        elif token.startswith("-v=") and not token.startswith("--"):
            out.extend(["-v", token[3:]])
        else:
            out.append(token)
    return out
