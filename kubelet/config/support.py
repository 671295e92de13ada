"""What this kubelet does with each setting it accepts: the one table, and the start-up warning.

Every flag and every KubeletConfiguration key (ours and upstream's) has an entry:
implemented (it acts as upstream's does), partial, or not implemented. A setting that is
not implemented says which of its values we nevertheless honour (``honoured``: the
value for which doing nothing *is* upstream's behaviour, e.g. ``podPidsLimit: -1``), and
may name the upstream default behaviour we lack (``missing_default``: image garbage
collection, eviction, ...).

The warning rule (docs/configuration.md, "Settings accepted but not acted on"):
- every setting the user set, in the file or on the command line, to a value we do not
  honour is listed once, with where it was set;
- every upstream default whose absence changes what the node enforces, protects or
  reclaims is named once, whether or not the user touched the setting, so that someone
  relying on upstream's defaults learns they are not there;
- feature gates count as settings: a gate set away from its default whose effect we do
  not implement is listed like any other, and the gates upstream turns on by default whose
  effect we lack are named among the missing defaults while left at that default.
Performance-only differences (wire format, refresh timing) are not listed by default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from .gatedata import GATES

IMPLEMENTED = "implemented"
PARTIAL = "partial"
NOT_IMPLEMENTED = "not implemented"

Honoured = Callable[[Any], bool]


def _never(_: Any) -> bool:
    return False


def _always(_: Any) -> bool:
    return True


def _is(*values: Any) -> Honoured:
    return lambda value: value in values


def _falsy(value: Any) -> bool:
    return not value


@attrs.frozen
class Support:
    """How far one setting is implemented, why, and which of its values we honour anyway."""

    status: str
    note: str
    honoured: Honoured = _always
    missing_default: str = ""
    """The upstream default behaviour this kubelet lacks, named in the warning when unset."""


def ok(note: str = "") -> Support:
    """Acts as upstream's kubelet does."""
    return Support(IMPLEMENTED, note)


def partial(note: str, honoured: Honoured = _never, missing_default: str = "") -> Support:
    """Acts in part; ``note`` says which part is missing."""
    return Support(PARTIAL, note, honoured, missing_default)


def missing(note: str, honoured: Honoured = _never, missing_default: str = "") -> Support:
    """Accepted but not acted on; ``honoured`` are the values where that is upstream's behaviour."""
    return Support(NOT_IMPLEMENTED, note, honoured, missing_default)


_QOS = "with the QOSReserved gate: memory limits on the burstable and besteffort cgroups"
_WS_TO_SPDY = (
    "WebSocket v5 exec/attach translated to SPDY for the runtime (wstranslate); kubectl's "
    "WebSocket port-forward tunnel unwrapped to SPDY (pftunnel)"
)

SETTINGS: Mapping[str, Support] = {
    # --- flags that set no KubeletConfiguration field --------------------------------------
    "--config": ok(),
    "--kubeconfig": ok(),
    "--bootstrap-kubeconfig": ok("TLS bootstrap through the certificates API"),
    "--cloud-provider": ok("'external': the uninitialized taint, provided-node-ip annotation"),
    "--image-credential-provider-config": ok("exec plugins after the node's docker config"),
    "--image-credential-provider-bin-dir": ok(),
    "--hostname-override": ok(),
    "--node-ip": ok(),
    "--node-labels": ok(),
    "--root-dir": ok(),
    "--debug-console-socket": ok("not an upstream flag"),
    "--runtime-cgroups": ok(
        "the summary's `runtime` system container; the runtime is not moved, as upstream "
        "with a remote runtime"
    ),
    "--cert-dir": ok("client and serving certificates (kubelet-{client,server}-*.pem)"),
    "--version": ok(),
    "--minimum-container-ttl-duration": ok("deprecated, as upstream: container GC's min age"),
    "--maximum-dead-containers-per-container": ok("deprecated, as upstream"),
    "--maximum-dead-containers": ok("deprecated, as upstream"),
    "--config-dir": ok("*.conf drop-ins merged over --config in lexical order"),
    "--lock-file": ok("flock held for the life of the process; start-up waits for it"),
    "--exit-on-lock-contention": ok("inotify: another process opening the lock file stops us"),
    "--experimental-allocatable-ignore-eviction": missing(
        "hard eviction thresholds are always subtracted from allocatable", _falsy
    ),
    "--experimental-mounter-path": missing("mounts use mount(8)", _falsy),
    "--log-text-split-stream": missing("split log streams are not implemented", _falsy),
    "--log-text-info-buffer-size": missing("split log streams are not implemented", _is("0")),
    "--log-json-split-stream": missing("split log streams are not implemented", _falsy),
    "--log-json-info-buffer-size": missing("split log streams are not implemented", _is("0")),
    # --- KubeletConfiguration fields we model ------------------------------------------------
    "staticPodPath": ok(),
    "staticPodURL": ok(),
    "staticPodURLHeader": ok(),
    "fileCheckFrequency": ok(),
    "httpCheckFrequency": ok(),
    "syncFrequency": ok(),
    "runOnce": ok("true stops start-up, as upstream: run-once mode was removed"),
    "maxPods": ok(),
    "podPidsLimit": ok("pids.max of every pod cgroup"),
    "containerRuntimeEndpoint": ok(),
    "imageServiceEndpoint": ok(),
    "runtimeRequestTimeout": ok(),
    "podLogsDir": ok(),
    "containerLogMaxSize": ok(),
    "containerLogMaxFiles": ok(),
    "containerLogMaxWorkers": ok(),
    "containerLogMonitorInterval": ok(),
    "serializeImagePulls": ok(),
    "maxParallelImagePulls": ok(),
    "registryPullQPS": missing("image pulls are not rate-limited", _is(0)),
    "registryBurst": missing("image pulls are not rate-limited"),
    "imageGCHighThresholdPercent": ok("image garbage collection every 5 minutes"),
    "imageGCLowThresholdPercent": ok(),
    "imageMinimumGCAge": ok(),
    "imageMaximumGCAge": ok(),
    "cgroupDriver": ok(
        "cgroupfs and systemd (slices through systemd's D-Bus API; refused where systemd is "
        "not running); a runtime that reports its driver (CRI RuntimeConfig) wins"
    ),
    "cgroupRoot": ok("the parent of kubepods; start-up stops when it does not exist"),
    "cgroupsPerQOS": ok("kubepods, the QoS cgroups and one cgroup per pod, with their limits"),
    "enforceNodeAllocatable": ok(
        "pods: kubepods limited to allocatable; system-reserved, kube-reserved (and their "
        "-compressible forms): the reserved cgroups limited"
    ),
    "systemReserved": ok("subtracted from allocatable; enforced on systemReservedCgroup"),
    "kubeReserved": ok("subtracted from allocatable; enforced on kubeReservedCgroup"),
    "systemReservedCgroup": ok("limited when enforceNodeAllocatable has system-reserved"),
    "kubeReservedCgroup": ok("limited when enforceNodeAllocatable has kube-reserved"),
    "failSwapOn": ok("start-up stops when /proc/swaps lists a device"),
    "localStorageCapacityIsolation": ok(
        "pods over an emptyDir sizeLimit or an ephemeral-storage limit are evicted"
    ),
    "evictionHard": ok(),
    "evictionSoft": ok(),
    "evictionSoftGracePeriod": ok(),
    "evictionMinimumReclaim": ok(),
    "evictionPressureTransitionPeriod": ok(),
    "evictionMaxPodGracePeriod": ok(),
    "mergeDefaultEvictionSettings": ok("merges the defaults into evictionHard"),
    "registerNode": ok(),
    "registerWithTaints": ok(),
    "providerID": ok(),
    "nodeStatusUpdateFrequency": ok(),
    "nodeStatusReportFrequency": ok(),
    "nodeStatusMaxImages": ok(),
    "nodeLeaseDurationSeconds": ok(),
    "shutdownGracePeriod": ok("through systemd-logind's inhibitor locks, where logind runs"),
    "shutdownGracePeriodCriticalPods": ok(),
    "kubeAPIQPS": ok(),
    "kubeAPIBurst": ok(),
    "eventRecordQPS": ok(),
    "eventBurst": ok(),
    "enableServer": ok(),
    "address": ok(),
    "port": ok(),
    "readOnlyPort": ok(),
    "healthzPort": ok(),
    "healthzBindAddress": ok(),
    "tlsCertFile": ok(),
    "tlsPrivateKeyFile": ok(),
    "tlsCipherSuites": ok(
        "the main port's TLS 1.0-1.2 suites (TLS 1.3's are fixed, as in Go); one OpenSSL "
        "lacks (RC4, 3DES) is named in a warning"
    ),
    "tlsMinVersion": ok(),
    "rotateCertificates": ok(),
    "serverTLSBootstrap": ok(),
    "authentication": ok(),
    "authentication.x509": ok(),
    "authentication.x509.clientCAFile": ok(),
    "authentication.webhook": ok(),
    "authentication.webhook.enabled": ok(),
    "authentication.webhook.cacheTTL": ok(),
    "authentication.anonymous": ok(),
    "authentication.anonymous.enabled": ok(),
    "authorization": ok(),
    "authorization.mode": ok(),
    "authorization.webhook": ok(),
    "authorization.webhook.cacheAuthorizedTTL": ok(),
    "authorization.webhook.cacheUnauthorizedTTL": ok(),
    "enableDebuggingHandlers": ok(),
    "clusterDomain": ok(),
    "clusterDNS": ok(),
    "resolvConf": ok(),
    "oomScoreAdj": ok(
        "written to /proc/self/oom_score_adj at start-up, then again every 5 minutes (every "
        "minute with kubeletCgroups) while the kubelet runs in the host's PID namespace"
    ),
    "featureGates": ok("checked against upstream's gates; see the gate table"),
    "logging": ok(),
    "logging.format": ok(),
    "logging.flushFrequency": ok("every line is written at once, never later than this"),
    "logging.verbosity": ok(),
    "logging.vmodule": ok(),
    "crashLoopBackOff": ok(),
    "crashLoopBackOff.maxContainerRestartPeriod": ok(),
    "seccompDefault": ok(),
    "allowedUnsafeSysctls": ok(),
    # --- upstream keys we do not model (accepted so a kubeadm config loads) --------------------
    "logging.options": missing("alpha logging options are not implemented"),
    "tlsCurvePreferences": ok(
        "the main port's key-exchange groups in TLS 1.2 and 1.3; a curve the TLS library "
        "lacks (post-quantum hybrids before OpenSSL 3.5) stops start-up"
    ),
    "imagePullCredentialsVerificationPolicy": ok("pull records under <root-dir>/image_manager"),
    "preloadedImagesVerificationAllowlist": ok(),
    "enableContentionProfiling": missing("no profiling handlers", _is(False)),
    "streamingConnectionIdleTimeout": ok("closes exec/attach/port-forward streams idle that long"),
    "volumeStatsAggPeriod": ok("a negative period (0 on the command line) turns it off"),
    "kubeletCgroups": ok(
        "the kubelet's process moved into it and its oom_score_adj re-applied every minute; "
        "the summary's `kubelet` system container"
    ),
    "systemCgroups": ok(
        "the root cgroup's non-kernel processes moved into it every minute; the summary's "
        "`misc` system container"
    ),
    "cpuManagerPolicy": ok("none and static (docs/cpu-memory-topology.md)"),
    "singleProcessOOMKill": ok(
        "cgroup v2: unless true, memory.oom.group=1 on containers (and the sandbox's "
        "overhead); false refused on cgroup v1"
    ),
    "cpuManagerPolicyOptions": ok(
        "full-pcpus-only, strict-cpu-reservation, distribute-cpus-across-numa, "
        "align-by-socket, prefer-align-cpus-by-uncorecache; distribute-cpus-across-cores "
        "is refused at start-up"
    ),
    "cpuManagerReconcilePeriod": ok(),
    "draManagerReconcilePeriod": missing(
        "the DRA manager reconciles every 60 s, whatever the period"
    ),
    "memoryManagerPolicy": ok("None and Static (docs/cpu-memory-topology.md)"),
    "topologyManagerPolicy": ok(
        "none, best-effort, restricted, single-numa-node; the CPU manager gives hints "
        "(docs/cpu-memory-topology.md)"
    ),
    "topologyManagerScope": ok("container and pod"),
    "topologyManagerPolicyOptions": ok("prefer-closest-numa-nodes, max-allowable-numa-nodes"),
    "qosReserved": ok(_QOS),
    "hairpinMode": ok("checked as upstream; no effect with a CRI runtime, as upstream"),
    "podCIDR": missing("the pod CIDR is not passed to the runtime", _falsy),
    "cpuCFSQuota": ok("false: no CFS quota on containers (none sent) nor pod cgroups (-1)"),
    "cpuCFSQuotaPeriod": ok("the period of containers and pod cgroups; needs its gate"),
    "maxOpenFiles": ok("RLIMIT_NOFILE set at start; a refusal is logged, as upstream"),
    "contentType": missing(
        "the API server is always spoken to in JSON", _is("", "application/json")
    ),
    "podsPerCore": ok("pods capacity min(podsPerCore × cores, maxPods), as admission counts"),
    "enableControllerAttachDetach": partial(
        "the node is always annotated as controller-managed", _is(True)
    ),
    "protectKernelDefaults": ok(
        "true: start-up stops naming each kernel tunable that differs; false: they are set"
    ),
    "makeIPTablesUtilChains": missing("no iptables chains are made", _is(False)),
    "iptablesMasqueradeBit": missing("no iptables chains are made"),
    "iptablesDropBit": missing("no iptables chains are made"),
    "memorySwap": ok(),
    "memorySwap.swapBehavior": ok("NoSwap / LimitedSwap (cgroup v2) on containers, as upstream"),
    "configMapAndSecretChangeDetectionStrategy": missing(
        "ConfigMaps and Secrets are read again at each pod sync, whatever the strategy"
    ),
    "reservedSystemCPUs": ok(
        "the CPU manager's reserved CPUs; replaces the cpu of kubeReserved and systemReserved"
    ),
    "showHiddenMetricsForVersion": missing("hidden metrics are not shown", _falsy),
    "volumePluginDir": missing("FlexVolume plugins are not supported"),
    "kernelMemcgNotification": ok(
        "the memory threshold notifier is always armed on cgroup v1 (a faster reaction, "
        "not a different one); cgroup v2 has none"
    ),
    "enableSystemLogHandler": ok("/logs/: files and listings under /var/log"),
    "enableSystemLogQuery": ok("/logs/?query=: journalctl, else the /var/log file heuristics"),
    "shutdownGracePeriodByPodPriority": ok(),
    "reservedMemory": ok("the Static memory policy's reservation per NUMA node"),
    "enableProfilingHandler": ok(
        "/debug/pprof/: CPU samples as collapsed stacks, the task tree, live objects"
    ),
    "enableDebugFlagsHandler": ok("PUT /debug/flags/v sets -v at run time"),
    "memoryThrottlingFactor": missing("MemoryQoS is not implemented"),
    "memoryReservationPolicy": missing("MemoryQoS is not implemented"),
    "tracing": ok(
        "OpenTelemetry spans over OTLP/gRPC (needs the kubelet[tracing] extra; start-up "
        "fails without it)"
    ),
    "failCgroupV1": ok(
        "true (the default): a cgroup v1 host stops start-up; false: it runs, with a "
        "CgroupV1 Warning on the Node"
    ),
    "userNamespaces": missing("the user namespace ID range is not configurable"),
}
"""Setting (``--flag`` for flag-only settings, else its path in the config file) → support."""


GATE_SUPPORT: Mapping[str, Support] = {
    "KubeletCrashLoopBackOffMax": ok("crashLoopBackOff.maxContainerRestartPeriod"),
    "ReduceDefaultCrashLoopBackOffDecay": ok("crash-loop back-off from 1s to 60s"),
    "KubeletFineGrainedAuthz": ok("nodes/pods, nodes/healthz, nodes/configz before nodes/proxy"),
    "GracefulNodeShutdown": ok("shutdownGracePeriod"),
    "GracefulNodeShutdownBasedOnPodPriority": ok("shutdownGracePeriodByPodPriority"),
    "RotateKubeletServerCertificate": ok("serverTLSBootstrap"),
    "ChangeContainerStatusOnKubeletRestart": missing(
        "a kubelet restart never changes container status", _is(False)
    ),
    "ContainerCheckpoint": ok("POST /checkpoint/{namespace}/{pod}/{container}"),
    "ContainerRestartRules": ok(
        "a container's restartPolicy and restartPolicyRules (decisions/restart.py); off: "
        "ignored on API pods, refused on static pods"
    ),
    "HostnameOverride": ok("spec.hostnameOverride; off, the field is ignored as upstream does"),
    "CRIListStreaming": missing("the CRI list calls are not streamed", _is(False)),
    "CSIVolumeHealth": partial(
        "a CSI driver's volume condition (VOLUME_CONDITION) is in /stats/summary "
        "volumeHealthStats and kubelet_volume_stats_health_status_abnormal; the pod's "
        "VolumeConditionAbnormal event is not sent",
        _is(False),
    ),
    "ClusterTrustBundleProjection": missing(
        "clusterTrustBundle volumes are not implemented", _is(False)
    ),
    "ContainerStopSignals": missing("lifecycle stopSignal is not implemented", _is(False)),
    "CustomCPUCFSQuotaPeriod": ok("cpuCFSQuotaPeriod"),
    "EnvFiles": ok("env valueFrom.fileKeyRef: a key of an env file in the pod's emptyDir"),
    "EventedPLEG": missing("the PLEG relists; runtime events are not used", _is(False)),
    "ExtendWebSocketsToKubelet": ok(_WS_TO_SPDY),
    "KubeletEnsureSecretPulledImages": ok("images pulled with credentials are checked"),
    "KubeletInUserNamespace": missing("not supported", _is(False)),
    "KubeletRegistrationGetOnExistsOnly": ok(
        "off: a node create refused as Forbidden still adopts an existing Node; on: only "
        "AlreadyExists does"
    ),
    "KubeletSeparateDiskGC": partial(
        "writable layers on a filesystem apart from images are always handled (eviction "
        "signals); the gate's off behaviour (no eviction on such a node) is not implemented",
        _is(True),
    ),
    "ResourceHealthStatus": ok(
        "containerStatuses[].allocatedResourcesStatus: device plugin devices' health "
        "(ListAndWatch) and DRA devices' (each driver's DRAResourceHealth stream)"
    ),
    "ResourceHealthStatusMessage": ok(
        "allocatedResourcesStatus[].resources[].message: what a DRA driver's health stream "
        "says of the device (device plugins give none)"
    ),
    "KubeletPSI": ok("PSI of cgroup v2 in /stats/summary and /metrics/cadvisor"),
    "KubeletPodResourcesDynamicResources": ok(
        "pod-resources dynamic_resources: the ResourceClaims each container uses, with their "
        "devices and CDI IDs"
    ),
    "KubeletPodResourcesGet": ok("pod-resources Get"),
    "LocalStorageCapacityIsolationFSQuotaMonitoring": missing("no quota monitoring", _is(False)),
    "MemoryQoS": missing("MemoryQoS is not implemented", _is(False)),
    "NodeDeclaredFeatures": ok(
        "status.declaredFeatures lists what this kubelet implements (kubelet/node/declared.py);"
        " a pod needing another is refused at admission (PodFeatureUnsupported)"
    ),
    "PLEGOnDemandRelist": missing("the PLEG relists every second only", _is(False)),
    "PodReadyToStartContainersCondition": ok(
        "the pod condition PodReadyToStartContainers; off: neither written nor owned"
    ),
    "PodAndContainerStatsFromCRI": ok(
        "on: pod CPU, memory and network from ListPodSandboxStats; off: from the pod cgroup"
        " and the sandbox's network namespace"
    ),
    "PodLevelResourceManagers": missing("resource managers are not implemented", _is(False)),
    "QOSReserved": ok("qosReserved"),
    "ReloadKubeletClientCAFile": ok("clientCAFile is read again when it changes"),
    "ReloadKubeletServerCertificateFile": ok("tlsCertFile/tlsPrivateKeyFile read again on change"),
    "RuntimeClassInImageCriApi": missing("images are pulled without a runtime handler", _is(False)),
    "SELinuxMount": missing("SELinux mount options are not used", _is(False)),
    "UserNamespacesHostNetworkSupport": missing("not supported", _is(False)),
}
"""Gates whose effect is in the kubelet, and what we do with them.

A gate not listed here has no effect on upstream's kubelet either (it is read by the API
server, the scheduler or a controller), or it switches a pod API field that the pod
validation and admission deal with; setting it is accepted and, like upstream, does nothing here.
"""


@attrs.frozen
class Inert:
    """One setting the user set to a value this kubelet does not act on."""

    key: str
    value: Any
    source: str
    support: Support

    def describe(self) -> str:
        """``cgroupDriver=systemd (--cgroup-driver)``: scalar values shown, sources named."""
        shown = self.key
        if isinstance(self.value, bool):
            shown += "=" + ("true" if self.value else "false")
        elif isinstance(self.value, str | int | float) and self.value != "":
            shown += f"={self.value}"
        return f"{shown} ({self.source})" if self.source else shown


def not_acted_on(
    values: Mapping[str, tuple[Any, str]],
    set_keys: Iterable[str],
    gates: Mapping[str, bool],
    gate_sources: Mapping[str, str],
) -> tuple[list[Inert], list[str]]:
    """The settings listed in the warning: (set to a value we ignore, defaults we lack).

    ``values`` maps every setting key to (its value, where it was set or ""), ``set_keys``
    are those the user set; ``gates`` are the gates set away from their default and
    ``gate_sources`` where each was set.
    """
    chosen = set(set_keys)
    inert: list[Inert] = []
    defaults: list[str] = []
    for key, support in SETTINGS.items():
        if support.status == IMPLEMENTED:
            continue
        value, source = values.get(key, (None, ""))
        if key in chosen:
            if not support.honoured(value):
                inert.append(Inert(key, value, source, support))
        elif support.missing_default:
            defaults.append(support.missing_default)
    for name, value in gates.items():
        gate = GATE_SUPPORT.get(name)
        if gate is not None and gate.status != IMPLEMENTED and not gate.honoured(value):
            inert.append(Inert(f"featureGates.{name}", value, gate_sources.get(name, ""), gate))
    defaults.extend(_gate_defaults_lacked(gates))
    return inert, defaults


def _gate_defaults_lacked(gates: Mapping[str, bool]) -> list[str]:
    """One item naming the gates left at an upstream default whose effect we lack (on by
    default upstream: ``ContainerCheckpoint``, ...)."""
    lacked = [
        name
        for name, gate in GATE_SUPPORT.items()
        if name not in gates
        and name in GATES
        and gate.status != IMPLEMENTED
        and not gate.honoured(GATES[name].default)
    ]
    return [f"the effect of feature gates on by default: {', '.join(lacked)}"] if lacked else []


def warning_text(inert: Iterable[Inert], defaults: Iterable[str]) -> str:
    """The one start-up warning line ("" when there is nothing to say)."""
    parts = []
    listed = [item.describe() for item in inert]
    if listed:
        parts.append("settings accepted but not implemented yet: " + ", ".join(listed))
    missing_defaults = list(defaults)
    if missing_defaults:
        parts.append("upstream defaults not provided: " + ", ".join(missing_defaults))
    return "; ".join(parts)


def detail_lines(inert: Iterable[Inert]) -> list[str]:
    """One line per listed setting, with what is missing (logged at -v=1)."""
    return [
        f"{item.key}: {item.support.status}: {item.support.note}"
        + (f" (set in {item.source})" if item.source else "")
        for item in inert
    ]
