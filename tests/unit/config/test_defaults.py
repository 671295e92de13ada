"""KubeletConfiguration names and defaults are upstream v1beta1 ones (SetDefaults)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kubelet.config import KubeletConfiguration, encode, validate
from kubelet.config.fields import get_by_wire_path, key
from kubelet.config.kubeletconfig import effective_defaults, legacy_flag_defaults
from kubelet.config.upstream import (
    KUBELET_CONFIGURATION_FIELDS,
    LOGGING_CONFIGURATION_FIELDS,
)

UPSTREAM_DEFAULTS: list[tuple[str, Any]] = [
    ("enableServer", True),
    ("staticPodPath", ""),
    ("staticPodURL", ""),
    ("staticPodURLHeader", {}),
    ("syncFrequency", 60.0),
    ("fileCheckFrequency", 20.0),
    ("httpCheckFrequency", 20.0),
    ("address", "0.0.0.0"),
    ("port", 10250),
    ("readOnlyPort", 0),
    ("healthzPort", 10248),
    ("healthzBindAddress", "127.0.0.1"),
    ("authentication.anonymous.enabled", False),
    ("authentication.webhook.enabled", True),
    ("authentication.webhook.cacheTTL", 120.0),
    ("authentication.x509.clientCAFile", ""),
    ("authorization.mode", "Webhook"),
    ("authorization.webhook.cacheAuthorizedTTL", 300.0),
    ("authorization.webhook.cacheUnauthorizedTTL", 30.0),
    ("registryPullQPS", 5),
    ("registryBurst", 10),
    ("eventRecordQPS", 50),
    ("eventBurst", 100),
    ("kubeAPIQPS", 50),
    ("kubeAPIBurst", 100),
    ("enableDebuggingHandlers", True),
    ("oomScoreAdj", -999),
    ("clusterDomain", ""),
    ("clusterDNS", ()),
    ("resolvConf", "/etc/resolv.conf"),
    ("nodeStatusUpdateFrequency", 10.0),
    ("nodeStatusReportFrequency", 300.0),
    ("nodeLeaseDurationSeconds", 40),
    ("nodeStatusMaxImages", 50),
    ("imageMinimumGCAge", 120.0),
    ("imageMaximumGCAge", 0.0),
    ("imageGCHighThresholdPercent", 85),
    ("imageGCLowThresholdPercent", 80),
    ("cgroupsPerQOS", True),
    ("cgroupDriver", "cgroupfs"),
    ("cgroupRoot", ""),
    ("runtimeRequestTimeout", 120.0),
    ("maxPods", 110),
    ("podPidsLimit", -1),
    ("serializeImagePulls", True),
    ("maxParallelImagePulls", None),
    (
        "evictionHard",
        {
            "memory.available": "100Mi",
            "nodefs.available": "10%",
            "nodefs.inodesFree": "5%",
            "imagefs.available": "15%",
            "imagefs.inodesFree": "5%",
        },
    ),
    ("evictionPressureTransitionPeriod", 300.0),
    ("mergeDefaultEvictionSettings", False),
    ("failSwapOn", True),
    ("containerLogMaxSize", "10Mi"),
    ("containerLogMaxFiles", 5),
    ("containerLogMaxWorkers", 1),
    ("containerLogMonitorInterval", 10.0),
    ("enforceNodeAllocatable", ("pods",)),
    ("registerNode", True),
    ("registerWithTaints", ()),
    ("localStorageCapacityIsolation", True),
    ("containerRuntimeEndpoint", "unix:///run/containerd/containerd.sock"),
    ("imageServiceEndpoint", ""),
    ("podLogsDir", "/var/log/pods"),
    ("logging.format", "text"),
    ("logging.flushFrequency", 5.0),
    ("logging.verbosity", 0),
    ("shutdownGracePeriod", 0.0),
    ("shutdownGracePeriodCriticalPods", 0.0),
    ("crashLoopBackOff.maxContainerRestartPeriod", None),
    ("rotateCertificates", False),
    ("serverTLSBootstrap", False),
    ("runOnce", False),
    ("featureGates", {}),
    ("providerID", ""),
    ("maxOpenFiles", 1000000),
    ("hairpinMode", "promiscuous-bridge"),
    ("imagePullCredentialsVerificationPolicy", ""),  # gated_defaults sets it, gate on
]


@pytest.mark.parametrize(("path", "expected"), UPSTREAM_DEFAULTS)
def test_default(path: str, expected: Any) -> None:
    assert get_by_wire_path(KubeletConfiguration(), tuple(path.split("."))) == expected


def test_defaults_are_valid() -> None:
    assert validate(effective_defaults(KubeletConfiguration())) == []
    assert validate(effective_defaults(legacy_flag_defaults(KubeletConfiguration()))) == []


def test_cgroup_root_defaults_to_slash_with_qos_cgroups() -> None:
    assert effective_defaults(KubeletConfiguration()).cgroup_root == "/"
    config = KubeletConfiguration(cgroups_per_qos=False)
    assert effective_defaults(config).cgroup_root == ""


def test_legacy_flag_defaults() -> None:
    """Without --config upstream keeps the old flag defaults (open auth, read-only port)."""
    config = legacy_flag_defaults(KubeletConfiguration())
    assert config.read_only_port == 10255
    assert config.authentication.anonymous.enabled is True
    assert config.authentication.webhook.enabled is False
    assert config.authorization.mode == "AlwaysAllow"


def test_top_level_names_are_upstream_names() -> None:
    ours = {key(f) for f in attrs.fields(KubeletConfiguration)}
    assert ours <= KUBELET_CONFIGURATION_FIELDS
    for wire in ("staticPodURL", "clusterDNS", "healthzBindAddress", "tlsCertFile", "kubeAPIQPS"):
        assert wire in ours


def test_nested_names_are_upstream_names() -> None:
    wire = encode(KubeletConfiguration())
    assert set(wire["authentication"]) == {"x509", "webhook", "anonymous"}
    assert set(wire["authentication"]["x509"]) == {"clientCAFile"}
    assert set(wire["authentication"]["webhook"]) == {"enabled", "cacheTTL"}
    assert set(wire["authorization"]["webhook"]) == {"cacheAuthorizedTTL", "cacheUnauthorizedTTL"}
    assert set(wire["logging"]) <= LOGGING_CONFIGURATION_FIELDS
    assert set(wire["crashLoopBackOff"]) <= {"maxContainerRestartPeriod"}


def test_encode_writes_go_durations() -> None:
    wire = encode(KubeletConfiguration())
    assert wire["syncFrequency"] == "1m0s"
    assert wire["fileCheckFrequency"] == "20s"
    assert wire["authentication"]["webhook"]["cacheTTL"] == "2m0s"
    assert wire["port"] == 10250
    assert wire["enforceNodeAllocatable"] == ["pods"]
