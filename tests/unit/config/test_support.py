"""No inert settings: every flag and field is classified, and what is not acted on is named."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from kubelet.cli import main
from kubelet.config import (
    FLAGS,
    GATE_SUPPORT,
    GATES,
    IMPLEMENTED,
    NOT_IMPLEMENTED,
    SETTINGS,
    ConfigError,
    KubeletConfiguration,
    Options,
    build_parser,
    resolve,
    support_key,
)
from kubelet.config.fields import key
from kubelet.config.upstream import (
    KUBELET_CONFIGURATION_FIELDS,
    LOGGING_CONFIGURATION_FIELDS,
)
from kubelet.process import log_settings_warnings

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

KUBEADM = (
    HEADER
    + """\
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionHard:
  memory.available: 200Mi
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
"""
)


def field_paths(cls: type, prefix: str = "") -> Iterator[str]:
    for field in attrs.fields(attrs.resolve_types(cls)):
        path = prefix + key(field)
        yield path
        if attrs.has(field.type):
            yield from field_paths(field.type, path + ".")


def test_every_flag_is_classified() -> None:
    missing = [spec.name for spec in FLAGS if support_key(spec) not in SETTINGS]
    assert missing == []


def test_every_config_field_is_classified() -> None:
    keys = {
        *field_paths(KubeletConfiguration),
        *KUBELET_CONFIGURATION_FIELDS,
        *(f"logging.{name}" for name in LOGGING_CONFIGURATION_FIELDS),
    }
    assert sorted(keys - set(SETTINGS)) == []


def test_the_table_names_nothing_that_does_not_exist() -> None:
    flags = {f"--{spec.name}" for spec in FLAGS if spec.field is None}
    fields = {
        *field_paths(KubeletConfiguration),
        *KUBELET_CONFIGURATION_FIELDS,
        *(f"logging.{name}" for name in LOGGING_CONFIGURATION_FIELDS),
    }
    assert sorted(set(SETTINGS) - flags - fields) == []
    assert sorted(set(GATE_SUPPORT) - set(GATES)) == []


def test_help_promises_nothing_that_is_not_done() -> None:
    helps = {a.dest: a.help or "" for a in build_parser()._actions}
    for spec in FLAGS:
        support = SETTINGS[support_key(spec)]
        if support.status == NOT_IMPLEMENTED:
            assert "Not implemented yet" in helps[spec.dest], spec.name
    assert "Not implemented" not in helps["bootstrap_kubeconfig"]
    assert "Not implemented yet" not in helps["eviction_hard"]  # eviction is implemented
    assert "Not implemented" not in helps["pod_manifest_path"]


def run(*argv: str) -> Options:
    return resolve(list(argv), hostname=lambda: "n")


def settings_warnings(options: Options) -> tuple[str, ...]:
    """The warnings but pflag's "Flag --x has been deprecated" lines (config flags)."""
    return tuple(w for w in options.warnings if not w.startswith("Flag --"))


def test_no_warning_for_honoured_settings(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.yaml"
    honoured = (
        HEADER + "cgroupDriver: cgroupfs\npodPidsLimit: -1\nimageGCHighThresholdPercent: 100\n"
        "oomScoreAdj: -999\nstaticPodPath: /etc/kubelet.d\n"
        "cpuManagerPolicy: none\ncpuCFSQuota: true\n"
    )
    path.write_text(honoured)
    # nothing listed, and no upstream default missing: every gate upstream turns on has its
    # effect here (the last ones: the v5/tunnel translation, declared features, checkpoint,
    # pod-resources Get, certificate and CA reload)
    assert run(f"--config={path}").warnings == ()
    path.write_text(honoured + "failSwapOn: false\n")
    assert run(f"--config={path}").warnings == ()


def test_a_default_gate_whose_effect_is_lacking_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mechanism stays for the next gate upstream turns on: named while at its
    default, not named when turned off (upstream's behaviour without it is ours)."""
    from kubelet.config import support

    lacking = support.missing("not yet", lambda value: value is False)
    monkeypatch.setitem(support.GATE_SUPPORT, "ExtendWebSocketsToKubelet", lacking)  # type: ignore[arg-type]
    path = tmp_path / "kubelet.yaml"
    path.write_text(HEADER + "cgroupDriver: cgroupfs\n")
    gates = "the effect of feature gates on by default: ExtendWebSocketsToKubelet"
    assert run(f"--config={path}").warnings == (f"upstream defaults not provided: {gates}",)
    gate_off = run(f"--config={path}", "--feature-gates=ExtendWebSocketsToKubelet=false")
    assert settings_warnings(gate_off) == ()


def test_kubeadm_config_gives_one_warning_naming_each_setting(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(KUBEADM)
    options = run(f"--config={path}", "--registry-qps=10", "--feature-gates=MemoryQoS=true")
    (warning,) = settings_warnings(options)
    listed, _, defaults = warning.partition("; upstream defaults not provided: ")
    assert listed.startswith("settings accepted but not implemented yet: ")
    assert "registryPullQPS=10 (--registry-qps)" in listed
    assert "cgroupDriver" not in listed  # implemented now
    assert "rotateCertificates" not in listed  # implemented now
    assert "evictionHard" not in listed  # implemented
    assert "featureGates.MemoryQoS=true (--feature-gates)" in listed
    for honoured in (
        "clusterDNS",
        "authentication",
        "staticPodPath",
        "healthz",
        "logging",
        "shutdownGracePeriod",
        "streamingConnectionIdleTimeout",
        "memorySwap",
    ):
        assert honoured not in listed, honoured
    assert listed.count("registryPullQPS") == 1
    assert "image garbage collection" not in defaults  # implemented
    assert "cgroupsPerQOS" not in defaults and "enforceNodeAllocatable" not in defaults
    assert "hard eviction" not in defaults  # set by the file: listed above instead
    assert options.details and all(": " in line for line in options.details)
    assert any(line.startswith("registryPullQPS: not implemented: ") for line in options.details)


def test_warnings_are_logged_once_with_details_at_v1(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    options = run("--registry-qps=10", "--feature-gates=KubeletFineGrainedAuthz=true")
    with caplog.at_level(1):
        log_settings_warnings(options)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w.partition(" has")[0] for w in warnings[:2]] == [
        "Flag --registry-qps",
        "Flag --feature-gates",
    ]  # pflag's deprecation lines come first, as upstream prints them while parsing
    assert warnings[2].startswith("Setting GA feature gate KubeletFineGrainedAuthz=true.")
    assert warnings[3].count("registryPullQPS=10") == 1
    assert len(warnings) == 4
    verbose = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO - 1]
    assert any(line.startswith("registryPullQPS: not implemented") for line in verbose)


def test_node_ip_pairs_must_be_of_different_families() -> None:
    assert run("--node-ip=10.0.0.5,fd00::5").node_ip == "10.0.0.5,fd00::5"
    assert run("--node-ip=fd00::5").node_ip == "fd00::5"
    for bad in ("10.0.0.5,10.0.0.6", "fd00::5,fd00::6", "10.0.0.5,fd00::5,10.0.0.7"):
        with pytest.raises(ConfigError) as exc:
            run(f"--node-ip={bad}")
        assert str(exc.value) == (
            f'--node-ip: invalid value "{bad}": '
            "must contain either a single IP or a dual-stack pair of IPs"
        )
    with pytest.raises(
        ConfigError, match=re.escape("dual-stack node IP cannot include '0.0.0.0' or '::'")
    ):
        run("--node-ip=0.0.0.0,fd00::5")
    with pytest.raises(ConfigError, match="could not parse 'node-a'"):
        run("--node-ip=node-a")


def test_bootstrap_kubeconfig_needs_a_kubeconfig_path_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kubelet: --bootstrap-kubeconfig: --kubeconfig must be given too")
    absent = tmp_path / "kubelet.conf"
    options = run(f"--kubeconfig={absent}", "--bootstrap-kubeconfig=/b.conf")
    assert options.bootstrap_kubeconfig == "/b.conf"
    assert not any("bootstrap" in w for w in options.warnings)


def test_cloud_provider_external_or_none() -> None:
    assert run("--cloud-provider=external").cloud_provider == "external"
    assert run("--cloud-provider=").cloud_provider == ""
    with pytest.raises(ConfigError) as exc:
        run("--cloud-provider=aws")
    assert str(exc.value) == (
        "--cloud-provider: cloud provider 'aws' was specified, but built-in cloud providers "
        "are disabled. Please set --cloud-provider=external and migrate to an external cloud "
        "provider"
    )


def test_implemented_gates_are_not_listed() -> None:
    for name, support in GATE_SUPPORT.items():
        if support.status == IMPLEMENTED:
            value = not GATES[name].default
            gates = f"{name}={'true' if value else 'false'}"
            if name == "GracefulNodeShutdown":  # its dependants go with it
                gates += ",GracefulNodeShutdownBasedOnPodPriority=false"
                gates += ",WindowsGracefulNodeShutdown=false"
            if name == "NodeDeclaredFeatures":  # its dependants go with it
                gates += ",InPlacePodLevelResourcesVerticalScaling=false"
                gates += ",RestartAllContainersOnContainerExits=false"
            if name == "ContainerRestartRules":
                gates += ",RestartAllContainersOnContainerExits=false"
            if name == "ResourceHealthStatus":
                gates += ",ResourceHealthStatusMessage=false"
            options = run(f"--feature-gates={gates}")
            unhonoured = [
                w for w in options.warnings if "not implemented" in w or "not provided" in w
            ]
            assert all(name not in w for w in unhonoured), (name, unhonoured)


def test_oom_score_adj_is_written_at_start_up(tmp_path: Path) -> None:
    from kubelet.process import apply_oom_score_adj

    target = tmp_path / "oom_score_adj"
    target.write_text("0\n")
    assert apply_oom_score_adj(-999, str(target))
    assert target.read_text() == "-999\n"
    assert not apply_oom_score_adj(-999, str(tmp_path / "missing" / "oom_score_adj"))


def test_gates_are_named_with_where_they_were_set(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text(HEADER + "featureGates: {MemoryQoS: true}\n")
    (warning,) = settings_warnings(run(f"--config={path}", "--feature-gates=EventedPLEG=true"))
    assert f"featureGates.MemoryQoS=true ({path})" in warning
    assert "featureGates.EventedPLEG=true (--feature-gates)" in warning
