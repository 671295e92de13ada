"""Validation gaps closed: fields that need a gate, TLS versions, eviction signals; and
the crash-loop back-off limits the gates select."""

from __future__ import annotations

import attrs

from kubelet.config import CrashLoopBackOffConfig, KubeletConfiguration, validate
from kubelet.config.features import resolve_gates
from kubelet.decisions import crash_loop_limits

BASE = KubeletConfiguration()


def test_crash_loop_max_needs_its_gate() -> None:
    c = attrs.evolve(BASE, crash_loop_back_off=CrashLoopBackOffConfig(30.0))
    assert validate(c) == []
    off = resolve_gates({"KubeletCrashLoopBackOffMax": False}).gates
    assert validate(c, off) == [
        (
            "crashLoopBackOff.maxContainerRestartPeriod",
            "must not be set while the feature gate KubeletCrashLoopBackOffMax is off",
        )
    ]


def test_shutdown_and_server_bootstrap_need_their_gates() -> None:
    gates = resolve_gates(
        {
            "GracefulNodeShutdown": False,
            "GracefulNodeShutdownBasedOnPodPriority": False,
            "WindowsGracefulNodeShutdown": False,
            "RotateKubeletServerCertificate": False,
        }
    ).gates
    c = attrs.evolve(BASE, shutdown_grace_period=30.0, server_tls_bootstrap=True)
    paths = [path for path, _ in validate(c, gates)]
    assert paths == ["shutdownGracePeriod", "serverTLSBootstrap"]
    assert validate(c) == []


def test_tls_min_version_must_be_a_go_name() -> None:
    assert validate(attrs.evolve(BASE, tls_min_version="VersionTLS13")) == []
    assert validate(attrs.evolve(BASE, tls_min_version="1.3")) == [
        (
            "tlsMinVersion",
            "unknown TLS version '1.3'; valid: VersionTLS10, VersionTLS11, VersionTLS12, "
            "VersionTLS13",
        )
    ]


def test_eviction_signals_must_be_known() -> None:
    c = attrs.evolve(
        BASE,
        eviction_hard={"memory.available": "100Mi", "memory.avail": "1Gi"},
        eviction_soft={"nodefs.available": "15%"},
    )
    assert validate(c) == [
        ("evictionHard[memory.avail]", "unsupported eviction signal memory.avail"),
        (
            "evictionSoft[nodefs.available]",
            "a soft eviction threshold needs a grace period in evictionSoftGracePeriod",
        ),
    ]
    c = attrs.evolve(c, eviction_hard={}, eviction_soft_grace_period={"nodefs.available": "1x"})
    assert validate(c) == [("evictionSoftGracePeriod[nodefs.available]", "invalid duration '1x'")]


def test_crash_loop_limits_follow_the_gates() -> None:
    defaults = resolve_gates({}).gates
    assert crash_loop_limits(defaults, None) == (10.0, 300.0)
    assert crash_loop_limits(defaults, 30.0) == (10.0, 30.0)
    assert crash_loop_limits(defaults, 5.0) == (5.0, 5.0)
    reduced = resolve_gates({"ReduceDefaultCrashLoopBackOffDecay": True}).gates
    assert crash_loop_limits(reduced, None) == (1.0, 60.0)
    assert crash_loop_limits(reduced, 120.0) == (1.0, 120.0)
    off = resolve_gates({"KubeletCrashLoopBackOffMax": False}).gates
    assert crash_loop_limits(off, 30.0) == (10.0, 300.0)


def test_a_custom_cfs_period_needs_its_gate_and_a_range() -> None:
    """Upstream: 100ms unless CustomCPUCFSQuotaPeriod is on; with it, 1ms to 1s."""
    short = attrs.evolve(BASE, cpu_cfs_quota_period=0.05)
    assert validate(short) == [
        ("cpuCFSQuotaPeriod", "50ms requires feature gate CustomCPUCFSQuotaPeriod")
    ]
    on = resolve_gates({"CustomCPUCFSQuotaPeriod": True}).gates
    assert validate(short, on) == []
    assert validate(attrs.evolve(BASE, cpu_cfs_quota_period=2.0), on) == [
        ("cpuCFSQuotaPeriod", "2s must be between 1ms and 1sec, inclusive")
    ]
    assert validate(attrs.evolve(BASE, cpu_cfs_quota_period=0.0005), on) != []
    assert validate(BASE) == []


def _static(**options: str) -> KubeletConfiguration:
    return attrs.evolve(BASE, cpu_manager_policy="static", cpu_manager_policy_options=dict(options))


def test_cpu_manager_options_are_checked_as_upstream() -> None:
    assert validate(_static(**{"distribute-cpus-across-numa": "true"})) == []
    assert validate(_static(**{"prefer-align-cpus-by-uncorecache": "True"})) == []
    assert validate(_static(**{"no-such-option": "true"})) == [
        (
            "cpuManagerPolicyOptions[no-such-option]",
            'unknown CPU Manager Policy option: "no-such-option"',
        )
    ]
    assert validate(_static(**{"full-pcpus-only": "yes"})) == [
        (
            "cpuManagerPolicyOptions[full-pcpus-only]",
            'bad value for option "full-pcpus-only": strconv.ParseBool: parsing "yes": '
            "invalid syntax",
        )
    ]


def test_cpu_manager_options_need_their_maturity_gate() -> None:
    assert validate(_static(**{"align-by-socket": "true"})) == [
        (
            "cpuManagerPolicyOptions[align-by-socket]",
            'CPU Manager Policy Alpha-level Options not enabled, but option "align-by-socket" '
            "provided",
        )
    ]
    alpha = resolve_gates({"CPUManagerPolicyAlphaOptions": True}).gates
    assert validate(_static(**{"align-by-socket": "true"}), alpha) == []
    no_beta = resolve_gates({"CPUManagerPolicyBetaOptions": False}).gates
    c = _static(**{"distribute-cpus-across-numa": "true", "full-pcpus-only": "true"})
    assert validate(c, no_beta) == [
        (
            "cpuManagerPolicyOptions[distribute-cpus-across-numa]",
            "CPU Manager Policy Beta-level Options not enabled, but option "
            '"distribute-cpus-across-numa" provided',
        )
    ]  # full-pcpus-only is stable: no gate


def test_cpu_manager_options_that_exclude_each_other_are_refused() -> None:
    both = _static(
        **{"prefer-align-cpus-by-uncorecache": "true", "distribute-cpus-across-numa": "true"}
    )
    assert validate(both) == [
        (
            "cpuManagerPolicyOptions",
            "static policy options prefer-align-cpus-by-uncorecache and "
            "distribute-cpus-across-numa can not be used at the same time",
        )
    ]
    one_off = _static(
        **{"prefer-align-cpus-by-uncorecache": "true", "distribute-cpus-across-numa": "false"}
    )
    assert validate(one_off) == []
