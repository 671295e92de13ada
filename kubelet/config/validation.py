"""Checks on the final configuration, after file and flags are merged.

Upstream's cheap rules (ranges, enumerations, cross-field constraints, fields that need
a feature gate), restated. Each problem is (field path, message)
so the caller can say which file or flag the bad value came from.
"""

from __future__ import annotations

import ipaddress
import os.path
import re
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from kubelet.api import parse_quantity, pattern_error

from .duration import format_duration, parse_duration
from .features import (
    CPU_MANAGER_POLICY_ALPHA_OPTIONS,
    CPU_MANAGER_POLICY_BETA_OPTIONS,
    CUSTOM_CPU_CFS_QUOTA_PERIOD,
    DEFAULT_GATES,
    GRACEFUL_NODE_SHUTDOWN,
    KUBELET_CRASH_LOOP_BACK_OFF_MAX,
    KUBELET_ENSURE_SECRET_PULLED_IMAGES,
    ROTATE_KUBELET_SERVER_CERTIFICATE,
    SHUTDOWN_BY_POD_PRIORITY,
    FeatureGates,
)
from .fields import is_duration, key
from .kubeletconfig import KubeletConfiguration, cpu_list_size
from .tlsnames import cipher_suite_problems, curve_problems

TLS_VERSIONS = ("VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13")
"""Go's names for the TLS versions ``tlsMinVersion`` accepts."""

EVICTION_SIGNALS = frozenset(
    [
        "memory.available",
        "allocatableMemory.available",
        "nodefs.available",
        "nodefs.inodesFree",
        "imagefs.available",
        "imagefs.inodesFree",
        "containerfs.available",
        "containerfs.inodesFree",
        "pid.available",
    ]
)
"""The eviction signals upstream's threshold parser knows (Linux)."""

_PERCENT = re.compile(r"^\d+(\.\d+)?%$")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_ENFORCEMENTS = (
    "pods",
    "system-reserved",
    "system-reserved-compressible",
    "kube-reserved",
    "kube-reserved-compressible",
    "none",
)
_HAIRPIN_MODES = ("none", "hairpin-veth", "promiscuous-bridge")
_MUST_BE_POSITIVE = (
    "syncFrequency",
    "fileCheckFrequency",
    "httpCheckFrequency",
    "runtimeRequestTimeout",
    "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency",
)

UINT32_MAX = (1 << 32) - 1
"""Upstream's verbosity levels are uint32: a negative one does not even decode."""

Issue = tuple[str, str]


def is_quantity(text: str) -> bool:
    """Whether ``text`` is a Kubernetes resource quantity ("10Mi", "1.5", "100m")."""
    try:
        parse_quantity(text)
    except ValueError:
        return False
    return True


def validate(config: KubeletConfiguration, gates: FeatureGates = DEFAULT_GATES) -> list[Issue]:
    """Every problem with ``config`` as (field path, message); empty when it is usable.

    ``gates`` are the feature gates in force: some fields may only be set with a gate on.
    """
    issues = list(_durations(config, ""))
    issues += _gated(config, gates)
    issues += _tls(config)
    c = config
    issues += _positive_durations(c)
    issues += _ranges(c)
    issues += _enumerations(c)
    issues += _images(c)
    issues += _pull_credentials(c, gates)
    issues += _logs(c)
    issues += _logging(c)
    if c.run_once:  # upstream removed run-once mode and refuses the field set to true
        issues.append(("runOnce", "Runonce mode has been deprecated and should not be set"))
    issues += _node_allocatable(c)
    issues += _cpu_manager(c, gates)
    issues += _cpu_reservation(c)
    issues += _topology_manager(c)
    issues += _swap(c)
    issues += _eviction(c)
    issues += _shutdown(c)
    issues += _addresses(c)
    issues += _tracing(c)
    for i, pattern in enumerate(c.allowed_unsafe_sysctls):
        problem = pattern_error(pattern)
        if problem is not None:
            issues.append((f"allowedUnsafeSysctls[{i}]", problem))
    for i, taint in enumerate(c.register_with_taints):
        where = f"registerWithTaints[{i}]"
        if not taint.key:
            issues.append((where, "taint key must not be empty"))
        if taint.effect not in _TAINT_EFFECTS:
            issues.append((where, f"taint effect {taint.effect!r} must be one of {_TAINT_EFFECTS}"))
    period = c.crash_loop_back_off.max_container_restart_period
    if period is not None and not 1.0 <= period <= 300.0:
        issues.append(
            (
                "crashLoopBackOff.maxContainerRestartPeriod",
                f"must be between 1s and 300s, got {format_duration(period)}",
            )
        )
    return issues


def _gated(c: KubeletConfiguration, gates: FeatureGates) -> Iterator[Issue]:
    """Fields upstream refuses unless their feature gate is on."""
    if c.crash_loop_back_off.max_container_restart_period is not None and not gates.enabled(
        KUBELET_CRASH_LOOP_BACK_OFF_MAX
    ):
        yield (
            "crashLoopBackOff.maxContainerRestartPeriod",
            f"must not be set while the feature gate {KUBELET_CRASH_LOOP_BACK_OFF_MAX} is off",
        )
    if (c.shutdown_grace_period or c.shutdown_grace_period_critical_pods) and not gates.enabled(
        GRACEFUL_NODE_SHUTDOWN
    ):
        yield (
            "shutdownGracePeriod",
            f"requires the feature gate {GRACEFUL_NODE_SHUTDOWN} (with "
            "shutdownGracePeriodCriticalPods)",
        )
    if c.shutdown_grace_period_by_pod_priority and not gates.enabled(SHUTDOWN_BY_POD_PRIORITY):
        yield (
            "shutdownGracePeriodByPodPriority",
            f"requires the feature gate {SHUTDOWN_BY_POD_PRIORITY}",
        )
    if c.server_tls_bootstrap and not gates.enabled(ROTATE_KUBELET_SERVER_CERTIFICATE):
        yield (
            "serverTLSBootstrap",
            f"requires the feature gate {ROTATE_KUBELET_SERVER_CERTIFICATE}",
        )
    yield from _cfs_period(c, gates)


def _cfs_period(c: KubeletConfiguration, gates: FeatureGates) -> Iterator[Issue]:
    """Upstream: a period other than 100ms needs the gate; with it, 1ms to 1s."""
    period = c.cpu_cfs_quota_period
    shown = format_duration(period)
    if not gates.enabled(CUSTOM_CPU_CFS_QUOTA_PERIOD):
        if round(period * 1e9) != 100_000_000:
            yield (
                "cpuCFSQuotaPeriod",
                f"{shown} requires feature gate {CUSTOM_CPU_CFS_QUOTA_PERIOD}",
            )
    elif not 1_000_000 <= round(period * 1e9) <= 1_000_000_000:
        yield "cpuCFSQuotaPeriod", f"{shown} must be between 1ms and 1sec, inclusive"


def _tls(c: KubeletConfiguration) -> Iterator[Issue]:
    if c.tls_min_version and c.tls_min_version not in TLS_VERSIONS:
        yield (
            "tlsMinVersion",
            f"unknown TLS version {c.tls_min_version!r}; valid: {', '.join(TLS_VERSIONS)}",
        )
    for problem in cipher_suite_problems(c.tls_cipher_suites):
        yield "tlsCipherSuites", problem
    for problem in curve_problems(c.tls_curve_preferences):
        yield "tlsCurvePreferences", problem


_NEGATIVE_MEANS_OFF = frozenset(["volumeStatsAggPeriod"])
"""Durations where upstream documents a negative value as "off"."""


def _durations(obj: Any, path: str) -> Iterator[Issue]:
    """No duration anywhere may be negative (but those where negative means off)."""
    for field in attrs.fields(type(obj)):
        value = getattr(obj, field.name)
        where = f"{path}{key(field)}"
        if where in _NEGATIVE_MEANS_OFF:
            continue
        if is_duration(field) and value is not None and value < 0:
            yield where, f"must not be negative, got {format_duration(value)}"
        elif attrs.has(type(value)):
            yield from _durations(value, where + ".")


def _positive_durations(c: KubeletConfiguration) -> Iterator[Issue]:
    """Loop periods of zero would spin; upstream re-defaults zero from a file, flags may not."""
    values = {
        "syncFrequency": c.sync_frequency,
        "fileCheckFrequency": c.file_check_frequency,
        "httpCheckFrequency": c.http_check_frequency,
        "runtimeRequestTimeout": c.runtime_request_timeout,
        "nodeStatusUpdateFrequency": c.node_status_update_frequency,
        "nodeStatusReportFrequency": c.node_status_report_frequency,
    }
    for name in _MUST_BE_POSITIVE:
        if values[name] == 0:
            yield name, "must be greater than zero"


def _ranges(c: KubeletConfiguration) -> Iterator[Issue]:
    if not 1 <= c.port <= 65535:
        yield "port", f"must be between 1 and 65535, inclusive, got {c.port}"
    for name, port in (("readOnlyPort", c.read_only_port), ("healthzPort", c.healthz_port)):
        if not 0 <= port <= 65535:
            yield name, f"must be between 0 (disabled) and 65535, inclusive, got {port}"
    if not -1000 <= c.oom_score_adj <= 1000:
        yield "oomScoreAdj", f"must be between -1000 and 1000, inclusive, got {c.oom_score_adj}"
    if c.node_lease_duration_seconds <= 0:
        yield "nodeLeaseDurationSeconds", "must be greater than 0"
    if c.node_status_max_images < -1:
        yield "nodeStatusMaxImages", f"must be -1 or greater, got {c.node_status_max_images}"
    if c.max_open_files < 0:
        yield "maxOpenFiles", f"{c.max_open_files} must not be a negative number"
    for name, value in (
        ("maxPods", c.max_pods),
        ("podsPerCore", c.pods_per_core),
        ("registryPullQPS", c.registry_pull_qps),
        ("registryBurst", c.registry_burst),
        ("eventRecordQPS", c.event_record_qps),
        ("eventBurst", c.event_burst),
        ("kubeAPIQPS", c.kube_api_qps),
        ("kubeAPIBurst", c.kube_api_burst),
    ):
        if value < 0:
            yield name, f"must not be negative, got {value}"


def _enumerations(c: KubeletConfiguration) -> Iterator[Issue]:
    if c.cgroup_driver not in ("cgroupfs", "systemd"):
        yield "cgroupDriver", f"must be 'cgroupfs' or 'systemd', got {c.cgroup_driver!r}"
    if c.authorization.mode not in ("AlwaysAllow", "Webhook"):
        yield (
            "authorization.mode",
            f"must be 'AlwaysAllow' or 'Webhook', got {c.authorization.mode!r}",
        )
    if c.logging.format not in ("text", "json"):
        yield "logging.format", f"must be 'text' or 'json', got {c.logging.format!r}"
    if not c.container_runtime_endpoint:
        yield "containerRuntimeEndpoint", "must not be empty"
    if c.hairpin_mode not in _HAIRPIN_MODES:
        yield (
            "hairpinMode",
            f'option "{c.hairpin_mode}" specified for hairpinMode. Valid options are "none", '
            '"hairpin-veth" or "promiscuous-bridge"',
        )


def _images(c: KubeletConfiguration) -> Iterator[Issue]:
    high, low = c.image_gc_high_threshold_percent, c.image_gc_low_threshold_percent
    for name, value in (("imageGCHighThresholdPercent", high), ("imageGCLowThresholdPercent", low)):
        if not 0 <= value <= 100:
            yield name, f"must be between 0 and 100, inclusive, got {value}"
    if low >= high:
        yield (
            "imageGCLowThresholdPercent",
            f"must be less than imageGCHighThresholdPercent ({high}), got {low}",
        )
    if 0 < c.image_maximum_gc_age <= c.image_minimum_gc_age:
        yield (
            "imageMaximumGCAge",
            f"must be greater than imageMinimumGCAge ({format_duration(c.image_minimum_gc_age)})",
        )
    pulls = c.max_parallel_image_pulls
    if pulls is not None and pulls < 1:
        yield "maxParallelImagePulls", f"must be a positive number, got {pulls}"
    if pulls is not None and pulls > 1 and c.serialize_image_pulls:
        yield "maxParallelImagePulls", "cannot be larger than 1 while serializeImagePulls is true"


_CREDENTIAL_POLICIES = (
    "NeverVerify",
    "NeverVerifyPreloadedImages",
    "NeverVerifyAllowlistedImages",
    "AlwaysVerify",
)


def _pull_credentials(c: KubeletConfiguration, gates: FeatureGates) -> Iterator[Issue]:
    """imagePullCredentialsVerificationPolicy and its allowlist: read only with
    KubeletEnsureSecretPulledImages on, and refused with it off (upstream's messages)."""
    policy = c.image_pull_credentials_verification_policy
    allowlist = c.preloaded_images_verification_allowlist
    if not gates.enabled(KUBELET_ENSURE_SECRET_PULLED_IMAGES):
        for name, value in (
            ("imagePullCredentialsVerificationPolicy", policy),
            ("preloadedImagesVerificationAllowlist", allowlist),
        ):
            if value:
                gate = KUBELET_ENSURE_SECRET_PULLED_IMAGES
                yield name, f"`{name}` must not be set if {gate} feature gate is not enabled"
        return
    if policy and policy not in _CREDENTIAL_POLICIES:  # "": not defaulted yet, the default
        yield (
            "imagePullCredentialsVerificationPolicy",
            f'option "{policy}" specified for imagePullCredentialsVerificationPolicy. Valid '
            'options are "NeverVerify", "NeverVerifyPreloadedImages", '
            '"NeverVerifyAllowlistedImages" or "AlwaysVerify"',
        )
    if allowlist and policy != "NeverVerifyAllowlistedImages":
        yield (
            "preloadedImagesVerificationAllowlist",
            "can't set `preloadedImagesVerificationAllowlist` if "
            '`imagePullCredentialsVerificationPolicy` is not "NeverVerifyAllowlistedImages"',
        )
        return
    for i, pattern in enumerate(allowlist):
        problem = _allowlist_problem(pattern)
        if problem:
            yield f"preloadedImagesVerificationAllowlist[{i}]", problem


def _allowlist_problem(pattern: str) -> str:
    """Upstream's rules: a full image name without tag or digest, or a prefix ending in
    ``/*`` that names at least a registry; "" when ``pattern`` is fine."""
    if pattern != pattern.strip():
        return f"leading/trailing spaces are not allowed: {pattern}"
    wildcard = pattern.endswith("/*")
    trimmed = pattern[:-1] if wildcard else pattern
    if not trimmed:
        return f"the supplied pattern is too short: {pattern}"
    if "*" in trimmed:
        return (
            f"not a valid wildcard pattern, only patterns ending with '/*' are allowed: {pattern}"
        )
    if wildcard:
        return "at least registry hostname is required" if len(trimmed) == 1 else ""
    first, _, rest = trimmed.partition("/")
    registry_like = "." in first or ":" in first or first == "localhost"
    if (
        "@" in trimmed
        or ":" in trimmed.rsplit("/", 1)[-1]
        or not rest
        or not registry_like
        or (first == "docker.io" and "/" not in rest)
    ):
        return f"neither tag nor digest is accepted in an image reference: {pattern}"
    return ""


def _logs(c: KubeletConfiguration) -> Iterator[Issue]:
    if not is_quantity(c.container_log_max_size):
        yield "containerLogMaxSize", f"invalid quantity {c.container_log_max_size!r}"
    if c.container_log_max_files <= 1:
        yield "containerLogMaxFiles", f"must be greater than 1, got {c.container_log_max_files}"
    if c.container_log_max_workers < 1:
        yield "containerLogMaxWorkers", "must be greater than or equal to 1"
    if c.container_log_monitor_interval < 3:
        yield "containerLogMonitorInterval", "must be at least 3s"
    d = c.pod_logs_dir
    if not d.startswith("/"):
        yield "podLogsDir", f"must be an absolute path, got {d!r}"
    elif os.path.normpath(d) != d:
        yield "podLogsDir", f"must be a normalized path, got {d!r}"
    elif not d.isascii():
        yield "podLogsDir", f"must contain ASCII characters only, got {d!r}"


def _logging(c: KubeletConfiguration) -> Iterator[Issue]:
    """Verbosity levels: unsigned 32-bit, as upstream's (there -1 fails to parse)."""
    levels = [("logging.verbosity", c.logging.verbosity)]
    levels += [
        (f"logging.vmodule[{i}].verbosity", item.verbosity)
        for i, item in enumerate(c.logging.vmodule)
    ]
    for where, level in levels:
        if not 0 <= level <= UINT32_MAX:
            yield where, f"must be an unsigned integer (0 to {UINT32_MAX}), got {level}"


MAX_SAMPLING_RATE_PER_MILLION = 1_000_000
_TRACING_SCHEMES = ("dns", "unix", "unix-abstract")


def _tracing(c: KubeletConfiguration) -> Iterator[Issue]:
    """component-base's tracing checks: the rate within one million, a gRPC target."""
    if c.tracing is None:
        return
    rate = c.tracing.sampling_rate_per_million
    if rate is not None and rate < 0:
        yield "tracing.samplingRatePerMillion", "sampling rate must be positive"
    if rate is not None and rate > MAX_SAMPLING_RATE_PER_MILLION:
        yield (
            "tracing.samplingRatePerMillion",
            "sampling rate per million must be less than or equal to one million",
        )
    if c.tracing.endpoint is not None:
        scheme = grpc_target_scheme(c.tracing.endpoint)
        if scheme not in _TRACING_SCHEMES:
            yield (
                "tracing.endpoint",
                f"unsupported scheme: {scheme}.  Options are none, dns, unix, or unix-abstract."
                "  See https://github.com/grpc/grpc/blob/master/doc/naming.md",
            )


def grpc_target_scheme(endpoint: str) -> str:
    """The name-resolver scheme of a gRPC target: ``dns`` for a bare ``host:port``."""
    if "//" not in endpoint:
        return "dns"
    scheme, sep, _ = endpoint.partition(":")
    return scheme.lower() if sep else ""


def _node_allocatable(c: KubeletConfiguration) -> Iterator[Issue]:
    where = "enforceNodeAllocatable"
    chosen = c.enforce_node_allocatable
    if len(set(chosen)) != len(chosen):
        yield where, f"must not repeat an enforcement, got {list(chosen)}"
    for value in chosen:
        if value not in _ENFORCEMENTS:
            yield where, f"unknown enforcement {value!r}; valid: {', '.join(_ENFORCEMENTS)}"
        elif value == "none":
            if len(chosen) > 1:
                yield where, "'none' may not be combined with other enforcements"
            continue
        elif value.startswith("system-reserved") and not c.system_reserved_cgroup:
            yield where, f"{value!r} requires systemReservedCgroup"
        elif value.startswith("kube-reserved") and not c.kube_reserved_cgroup:
            yield where, f"{value!r} requires kubeReservedCgroup"
        if value in _ENFORCEMENTS and not c.cgroups_per_qos:
            yield where, f"{value!r} requires cgroupsPerQOS to be true"
    for name in ("system-reserved", "kube-reserved"):
        if name in chosen and f"{name}-compressible" in chosen:
            yield where, f"{name!r} and '{name}-compressible' cannot be used together"
    yield from _qos_reserved(c)
    for name, reserved in (
        ("systemReserved", c.system_reserved),
        ("kubeReserved", c.kube_reserved),
    ):
        for resource, amount in reserved.items():
            if not is_quantity(amount):
                yield f"{name}[{resource}]", f"invalid quantity {amount!r}"


CPU_MANAGER_ALPHA_OPTIONS = frozenset({"align-by-socket", "distribute-cpus-across-cores"})
CPU_MANAGER_BETA_OPTIONS = frozenset(
    {"strict-cpu-reservation", "distribute-cpus-across-numa", "prefer-align-cpus-by-uncorecache"}
)
CPU_MANAGER_OPTIONS = CPU_MANAGER_ALPHA_OPTIONS | CPU_MANAGER_BETA_OPTIONS | {"full-pcpus-only"}
"""The static policy's options upstream knows, by maturity (the rest are stable)."""
CPU_MANAGER_OPTIONS_NOT_IMPLEMENTED = frozenset({"distribute-cpus-across-cores"})
_CPU_MANAGER_OPTION_CONFLICTS = (
    ("full-pcpus-only", "distribute-cpus-across-cores"),
    ("distribute-cpus-across-numa", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-numa"),
)
"""Options upstream refuses together (when both are true)."""
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
GO_BOOL = GO_TRUE | {"0", "f", "F", "FALSE", "false", "False"}
"""What Go's ``strconv.ParseBool`` accepts."""


def _cpu_manager(c: KubeletConfiguration, gates: FeatureGates) -> Iterator[Issue]:
    """Upstream's checks of the CPU manager's settings (validation and ``NewManager``);
    options this kubelet does not implement are refused rather than ignored."""
    if c.cpu_manager_policy not in ("none", "static"):
        yield "cpuManagerPolicy", f'unknown policy: "{c.cpu_manager_policy}"'
    options = c.cpu_manager_policy_options
    if options and c.cpu_manager_policy == "none":
        shown = " ".join(f"{k}:{v}" for k, v in sorted(options.items()))
        yield "cpuManagerPolicyOptions", f"None policy: received unsupported options=map[{shown}]"
    if c.cpu_manager_policy == "static":
        yield from _cpu_manager_options(options, gates)


def _cpu_manager_options(options: Mapping[str, str], gates: FeatureGates) -> Iterator[Issue]:
    """Upstream's ``NewStaticPolicyOptions``: known names, their maturity gate, a
    boolean value, no two options that exclude each other."""
    for name, value in sorted(options.items()):
        where = f"cpuManagerPolicyOptions[{name}]"
        if name not in CPU_MANAGER_OPTIONS:
            yield where, f'unknown CPU Manager Policy option: "{name}"'
        elif (level := _maturity_gate_off(name, gates)) is not None:
            yield (
                where,
                (
                    f"CPU Manager Policy {level}-level Options not enabled, "
                    f'but option "{name}" provided'
                ),
            )
        elif name in CPU_MANAGER_OPTIONS_NOT_IMPLEMENTED:
            yield where, f'CPU Manager Policy option "{name}" is not implemented by this kubelet'
        elif value not in GO_BOOL:
            yield (
                where,
                (
                    f'bad value for option "{name}": strconv.ParseBool: parsing "{value}": '
                    "invalid syntax"
                ),
            )
    for first, second in _CPU_MANAGER_OPTION_CONFLICTS:
        if options.get(first) in GO_TRUE and options.get(second) in GO_TRUE:
            yield (
                "cpuManagerPolicyOptions",
                f"static policy options {first} and {second} can not be used at the same time",
            )


def _maturity_gate_off(name: str, gates: FeatureGates) -> str | None:
    """ "Alpha" or "Beta" when the option's maturity gate is off, else None."""
    if name in CPU_MANAGER_ALPHA_OPTIONS and not gates.enabled(CPU_MANAGER_POLICY_ALPHA_OPTIONS):
        return "Alpha"
    if name in CPU_MANAGER_BETA_OPTIONS and not gates.enabled(CPU_MANAGER_POLICY_BETA_OPTIONS):
        return "Beta"
    return None


def _cpu_reservation(c: KubeletConfiguration) -> Iterator[Issue]:
    """Upstream's checks of ``reservedSystemCPUs``."""
    cpus = c.reserved_system_cpus
    if cpus and not cpu_list_size(cpus):
        yield "reservedSystemCPUs", f"unable to parse reservedSystemCPUs (--reserved-cpus) {cpus}"
    if cpus and (c.system_reserved_cgroup or c.kube_reserved_cgroup):
        yield (
            "reservedSystemCPUs",
            "can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup "
            "(--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)",
        )


TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


def _topology_manager(c: KubeletConfiguration) -> Iterator[Issue]:
    """Upstream's checks of the topology manager's policy and scope."""
    if c.topology_manager_policy not in TOPOLOGY_POLICIES:
        shown = "[" + " ".join(TOPOLOGY_POLICIES) + "]"
        yield (
            "topologyManagerPolicy",
            f"topologyManagerPolicy (--topology-manager-policy) "
            f'"{c.topology_manager_policy}" must be one of: {shown}',
        )
    if c.topology_manager_scope not in ("container", "pod"):
        yield (
            "topologyManagerScope",
            f'topologyManagerScope (--topology-manager-scope) "{c.topology_manager_scope}" '
            'must be one of: "container", or "pod"',
        )


def system_cgroups_issues(c: KubeletConfiguration) -> list[Issue]:
    """Upstream checks ``systemCgroups`` against ``cgroupRoot`` as written, before the
    root defaults to "/" (the caller runs this before ``effective_defaults``)."""
    if c.system_cgroups and not c.cgroup_root:
        return [
            (
                "systemCgroups",
                "systemCgroups (--system-cgroups) was specified and cgroupRoot "
                "(--cgroup-root) was not specified",
            )
        ]
    if c.system_cgroups.strip() == "/":
        return [("systemCgroups", 'system container cannot be root ("/")')]
    return []


def _swap(c: KubeletConfiguration) -> Iterator[Issue]:
    behavior = c.memory_swap.swap_behavior
    if behavior not in ("", "NoSwap", "LimitedSwap"):
        yield (
            "memorySwap.swapBehavior",
            f'"{behavior}" must be one of: "", "LimitedSwap" or "NoSwap"',
        )


def _qos_reserved(c: KubeletConfiguration) -> Iterator[Issue]:
    """Upstream's ParseQOSReserved (whether or not the QOSReserved gate is on): memory
    only, as a whole percentage from 0 to 100."""
    for resource, value in c.qos_reserved.items():
        where = f"qosReserved[{resource}]"
        if resource != "memory":
            yield where, f'cannot reserve "{resource}" resource'
        elif not value.endswith("%"):
            yield where, f"percentage expected, got '{value}'"
        elif not re.fullmatch(r"[+-]?\d+", value[:-1]):
            yield where, f"invalid number in percentage '{value}'"
        elif not 0 <= int(value[:-1]) <= 100:
            yield where, "percentage must be between 0 and 100"


def _eviction(c: KubeletConfiguration) -> Iterator[Issue]:
    for name, thresholds in (
        ("evictionHard", c.eviction_hard),
        ("evictionSoft", c.eviction_soft),
        ("evictionSoftGracePeriod", c.eviction_soft_grace_period),
        ("evictionMinimumReclaim", c.eviction_minimum_reclaim),
    ):
        for signal, value in thresholds.items():
            if signal not in EVICTION_SIGNALS:
                yield f"{name}[{signal}]", f"unsupported eviction signal {signal}"
            elif name == "evictionSoftGracePeriod":
                if not _valid_duration(value):
                    yield f"{name}[{signal}]", f"invalid duration {value!r}"
            elif not (is_quantity(value) or _PERCENT.match(value)):
                yield f"{name}[{signal}]", f"must be a quantity or a percentage, got {value!r}"
    for signal in c.eviction_soft:
        if signal in EVICTION_SIGNALS and signal not in c.eviction_soft_grace_period:
            yield (
                f"evictionSoft[{signal}]",
                "a soft eviction threshold needs a grace period in evictionSoftGracePeriod",
            )


def _valid_duration(text: str) -> bool:
    try:
        parse_duration(text)
    except ValueError:
        return False
    return True


def _shutdown(c: KubeletConfiguration) -> Iterator[Issue]:
    for name, value in (
        ("shutdownGracePeriod", c.shutdown_grace_period),
        ("shutdownGracePeriodCriticalPods", c.shutdown_grace_period_critical_pods),
    ):
        if 0 < value < 1:
            yield name, f"must be either zero or otherwise >= 1s, got {format_duration(value)}"
    if c.shutdown_grace_period_critical_pods > c.shutdown_grace_period:
        yield "shutdownGracePeriodCriticalPods", "must not exceed shutdownGracePeriod"
    if c.shutdown_grace_period_by_pod_priority and (
        c.shutdown_grace_period or c.shutdown_grace_period_critical_pods
    ):
        yield (
            "shutdownGracePeriodByPodPriority",
            "Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at "
            "the same time",
        )
    for i, entry in enumerate(c.shutdown_grace_period_by_pod_priority):
        if entry.shutdown_grace_period_seconds < 0:
            yield (
                f"shutdownGracePeriodByPodPriority[{i}].shutdownGracePeriodSeconds",
                "must be >= 0",
            )


def _addresses(c: KubeletConfiguration) -> Iterator[Issue]:
    for name, value in (("address", c.address), ("healthzBindAddress", c.healthz_bind_address)):
        if not is_ip(value):
            yield name, f"must be an IP address, got {value!r}"
    for i, server in enumerate(c.cluster_dns):
        if not is_ip(server):
            yield f"clusterDNS[{i}]", f"must be an IP address, got {server!r}"


def is_ip(text: str) -> bool:
    """Whether ``text`` is an IPv4 or IPv6 address."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
