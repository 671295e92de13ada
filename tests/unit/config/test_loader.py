"""Reading --config files: formats, type meta, strictness, error messages, defaulting."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from kubelet.config import ConfigError, load_config_file, resolve

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

KUBEADM_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
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
resolvConf: /run/systemd/resolve/resolv.conf
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
"""
"""What ``kubeadm init`` writes to /var/lib/kubelet/config.yaml: zeros meaning "default"."""


def write(tmp_path: Path, text: str, name: str = "kubelet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(exc: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return [str(p) for p in exc.value.problems]


def test_kubeadm_config_loads_with_upstream_defaults(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, KUBEADM_CONFIG)
    with caplog.at_level(logging.WARNING):
        options = resolve(["--config", str(path)], hostname=lambda: "node-1")
    c = options.config
    assert c.cgroup_driver == "systemd"
    assert c.cluster_dns == ("10.96.0.10",)
    assert c.cluster_domain == "cluster.local"
    assert c.static_pod_path == "/etc/kubernetes/manifests"
    assert c.resolv_conf == "/run/systemd/resolve/resolv.conf"
    assert c.rotate_certificates is True
    assert c.authentication.x509.client_ca_file == "/etc/kubernetes/pki/ca.crt"
    assert c.authentication.anonymous.enabled is False
    # "0s" in a non-pointer field means "use the default", as upstream defaulting does
    assert c.sync_frequency == 60.0
    assert c.file_check_frequency == 20.0
    assert c.runtime_request_timeout == 120.0
    assert c.node_status_update_frequency == 10.0
    assert c.node_status_report_frequency == 300.0
    assert c.authentication.webhook.cache_ttl == 120.0
    assert c.authorization.webhook.cache_unauthorized_ttl == 30.0
    assert c.container_runtime_endpoint == "unix:///run/containerd/containerd.sock"
    assert c.logging.flush_frequency == 5.0
    assert c.shutdown_grace_period == 0.0
    assert c.crash_loop_back_off.max_container_restart_period is None
    # upstream-only fields kubeadm writes are all zeros: nothing worth a warning
    assert options.ignored_fields == ()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_json_config(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "staticPodPath": "/etc/kubelet.d",
        "syncFrequency": "30s",
        "maxPods": 20,
        "staticPodURLHeader": {"Authorization": ["Bearer x"], "X-A": ["1", "2"]},
        "featureGates": {"SidecarContainers": True},
    }
    loaded = load_config_file(write(tmp_path, json.dumps(doc), "kubelet.json"))
    assert loaded.config.static_pod_path == "/etc/kubelet.d"
    assert loaded.config.sync_frequency == 30.0
    assert loaded.config.max_pods == 20
    assert loaded.config.static_pod_url_header == {
        "Authorization": ("Bearer x",),
        "X-A": ("1", "2"),
    }
    assert loaded.config.feature_gates == {"SidecarContainers": True}
    assert "maxPods" in loaded.present


def test_yaml_config(tmp_path: Path) -> None:
    text = HEADER + (
        "fileCheckFrequency: 1m30s\n"
        "port: 11250\n"
        "readOnlyPort: 10255\n"
        "registerWithTaints:\n- {key: dedicated, value: infra, effect: NoSchedule}\n"
        "evictionHard: {memory.available: 200Mi}\n"
        "crashLoopBackOff: {maxContainerRestartPeriod: 30s}\n"
        "logging: {format: json, verbosity: 4, flushFrequency: 2500000000}\n"
        "healthzPort: 0\n"
        "registryPullQPS: 0\n"
    )
    c = load_config_file(write(tmp_path, text)).config
    assert c.file_check_frequency == 90.0
    assert c.port == 11250
    assert c.read_only_port == 10255
    assert c.register_with_taints[0].key == "dedicated"
    assert c.register_with_taints[0].effect == "NoSchedule"
    # evictionHard replaces the default map unless mergeDefaultEvictionSettings is set
    assert c.eviction_hard == {"memory.available": "200Mi"}
    assert c.crash_loop_back_off.max_container_restart_period == 30.0
    assert (c.logging.format, c.logging.verbosity, c.logging.flush_frequency) == ("json", 4, 2.5)
    # pointer fields keep an explicit zero: 0 disables healthz, 0 QPS means unlimited
    assert c.healthz_port == 0
    assert c.registry_pull_qps == 0


def test_merge_default_eviction_settings(tmp_path: Path) -> None:
    text = HEADER + "mergeDefaultEvictionSettings: true\nevictionHard: {memory.available: 1Gi}\n"
    c = load_config_file(write(tmp_path, text)).config
    assert c.eviction_hard["memory.available"] == "1Gi"
    assert c.eviction_hard["nodefs.available"] == "10%"


def test_zero_max_open_files_means_the_default(tmp_path: Path) -> None:
    """maxOpenFiles is a non-pointer field: upstream reads 0 as "use 1000000"."""
    c = load_config_file(write(tmp_path, HEADER + "maxOpenFiles: 0\nhairpinMode: ''\n")).config
    assert (c.max_open_files, c.hairpin_mode) == (1000000, "promiscuous-bridge")
    c = load_config_file(write(tmp_path, HEADER + "maxOpenFiles: 4096\n")).config
    assert c.max_open_files == 4096


def test_the_credentials_policy_default_follows_its_gate(tmp_path: Path) -> None:
    """Upstream defaults imagePullCredentialsVerificationPolicy only with
    KubeletEnsureSecretPulledImages on; with it off the field stays unset (and allowed)."""
    path = write(tmp_path, HEADER)
    on = resolve(["--config", str(path)], hostname=lambda: "n").config
    assert on.image_pull_credentials_verification_policy == "NeverVerifyPreloadedImages"
    off = resolve(
        ["--config", str(path), "--feature-gates=KubeletEnsureSecretPulledImages=false"],
        hostname=lambda: "n",
    ).config
    assert off.image_pull_credentials_verification_policy == ""


def test_dependent_defaults(tmp_path: Path) -> None:
    text = HEADER + "nodeStatusUpdateFrequency: 20s\nmaxParallelImagePulls: 3\n"
    c = load_config_file(write(tmp_path, text)).config
    assert c.node_status_report_frequency == 20.0  # follows an explicit update frequency
    assert c.serialize_image_pulls is False  # parallel pulls asked for


def test_relative_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    text = HEADER + "staticPodPath: manifests\ntlsCertFile: pki/kubelet.crt\npodLogsDir: /logs\n"
    c = load_config_file(write(tmp_path, text)).config
    assert c.static_pod_path == str(tmp_path / "manifests")
    assert c.tls_cert_file == str(tmp_path / "pki" / "kubelet.crt")
    assert c.pod_logs_dir == "/logs"


def test_unknown_field_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "staticPodPth: /etc/kubernetes/manifests\n")
    with pytest.raises(ConfigError) as exc:
        load_config_file(path)
    assert problems(exc) == [f"{path}: staticPodPth: unknown field (did you mean 'staticPodPath'?)"]


def test_unknown_nested_field_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "authentication:\n  webhook:\n    enable: true\n")
    with pytest.raises(ConfigError) as exc:
        load_config_file(path)
    assert problems(exc) == [
        f"{path}: authentication.webhook.enable: unknown field (did you mean 'enabled'?)"
    ]


def test_upstream_fields_we_do_not_implement_are_named_in_one_warning(tmp_path: Path) -> None:
    text = HEADER + (
        "hairpinMode: hairpin-veth\n"  # no effect with a CRI runtime, upstream's too
        "topologyManagerPolicy: best-effort\n"
        "memoryManagerPolicy: Static\n"
        "podCIDR: 10.0.0.0/24\n"
        "streamingConnectionIdleTimeout: 0s\n"  # zero: upstream default, not worth a warning
        "logging:\n  options:\n    json: {splitStream: true}\n"
    )
    path = write(tmp_path, text)
    options = resolve(["--config", str(path)], hostname=lambda: "n")
    assert options.config.hairpin_mode == "hairpin-veth"  # modelled, so that it is checked
    assert options.ignored_fields == ("podCIDR", "logging.options")
    assert options.config.memory_manager_policy == "Static"
    (warning,) = options.warnings
    assert "topologyManagerPolicy" not in warning  # the topology manager honours it
    assert "memoryManagerPolicy" not in warning  # and the memory manager this one
    assert f"logging.options ({path})" in warning
    assert f"podCIDR=10.0.0.0/24 ({path})" in warning
    assert "hairpinMode" not in warning and "streamingConnectionIdleTimeout" not in warning


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("fileCheckFrequency: 20x\n", 'fileCheckFrequency: invalid duration "20x": unknown unit'),
        ("syncFrequency: 20\n", 'syncFrequency: expected a duration such as "20s", got int 20'),
        ("maxPods: many\n", "maxPods: expected an integer, got str 'many'"),
        ("failSwapOn: maybe\n", "failSwapOn: expected a boolean"),
        ("authentication:\n  webhook:\n    cacheTTL: 2q\n", "authentication.webhook.cacheTTL:"),
        ("clusterDNS: 10.96.0.10\n", "clusterDNS: expected a list"),
        ("staticPodURLHeader: {A: [b, {}]}\n", "staticPodURLHeader[A][1]: expected a string"),
        ("authentication: []\n", "authentication: expected an object, got list"),
    ],
)
def test_value_errors_name_file_and_field(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path, HEADER + body)
    with pytest.raises(ConfigError) as exc:
        load_config_file(path)
    (message,) = problems(exc)
    assert message.startswith(f"{path}: {expected}")


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "syncFrequency: 1x\nmaxPods: x\nbogus: 1\n")
    with pytest.raises(ConfigError) as exc:
        load_config_file(path)
    fields = [p.field for p in exc.value.problems]
    assert sorted(fields) == ["bogus", "maxPods", "syncFrequency"]
    assert all(p.source == str(path) for p in exc.value.problems)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: KubeletConfiguration\n", "apiVersion: must be 'kubelet.config.k8s.io/v1beta1'"),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n",
            'kind: no kind "Pod" is registered for version "kubelet.config.k8s.io/v1beta1"',
        ),
        (
            "apiVersion: v1\nkind: KubeletConfiguration\n",
            'apiVersion: no kind "KubeletConfiguration" is registered for version "v1"',
        ),
        ("", "the config file is empty"),
        ("- a\n- b\n", "expected a KubeletConfiguration object"),
        ("a: [\n", "invalid YAML"),
        ('{"a": }', "invalid JSON at line 1"),
    ],
)
def test_document_errors_name_the_file(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_config_file(path)
    assert any(m.startswith(f"{path}: ") and expected in m for m in problems(exc)), problems(exc)


def test_api_version_v1_is_refused(tmp_path: Path) -> None:
    """Upstream's kubelet.config.k8s.io/v1 holds only CredentialProviderConfig."""
    path = write(tmp_path, "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n")
    with pytest.raises(ConfigError) as exc:
        load_config_file(path)
    assert problems(exc) == [
        f'{path}: apiVersion: no kind "KubeletConfiguration" is registered for version '
        '"kubelet.config.k8s.io/v1"; the kubelet reads apiVersion kubelet.config.k8s.io/v1beta1, '
        "kind KubeletConfiguration"
    ]


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as exc:
        load_config_file(path)
    assert problems(exc) == [f"{path}: cannot read the config file: No such file or directory"]


ALIAS_BOMB = (
    HEADER
    + "staticPodURLHeader:\n"
    + "".join(f"  h{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9) if i else 'v'}]\n" for i in range(12))
)
"""A known field whose twelve headers hold nine aliases each: 9^11 values from a kilobyte."""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (ALIAS_BOMB, "YAML aliases expand this to more than 100000 nodes (line "),
        ("[" * 100_000 + "]" * 100_000, "exceeded maximum nesting depth"),  # LibYAML's own
        ("a: " + "[" * 150 + "]" * 150, "the document is nested too deeply (more than 100"),
        ("a:\n" + "".join(" " * i + "- \n" for i in range(1, 2000)), "nested too deeply"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "more than a config file of 100000 nodes"),
        ('{"a": ' * 5_000 + "1" + "}" * 5_000, "the document is nested too deeply"),
        ('{"a": ' * 150 + "1" + "}" * 150, "the document is nested too deeply"),
        (
            "{" + ",".join(f'"k{i}": [1, 2]' for i in range(70_000)) + "}",
            "more than a config file of 100000 nodes",
        ),
        ("a: &a [*a]\n", "a YAML alias refers to itself"),
    ],
)
def test_documents_past_the_bounds_are_config_errors(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_config_file(path)
    assert any(m.startswith(f"{path}: ") and expected in m for m in problems(exc)), problems(exc)


def test_a_config_file_that_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as exc:
        load_config_file(fifo)
    assert problems(exc) == [f"{fifo}: cannot read the config file: {fifo}: not a regular file"]


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ("maxPods: -1\n", "maxPods", "must not be negative, got -1"),
        ("port: 70000\n", "port", "must be between 1 and 65535, inclusive, got 70000"),
        ("readOnlyPort: -5\n", "readOnlyPort", "must be between 0 (disabled) and 65535"),
        ("healthzPort: 65536\n", "healthzPort", "must be between 0 (disabled) and 65535"),
        ("oomScoreAdj: -1001\n", "oomScoreAdj", "must be between -1000 and 1000"),
        ("nodeLeaseDurationSeconds: -3\n", "nodeLeaseDurationSeconds", "must be greater than 0"),
        ("imageGCLowThresholdPercent: 90\n", "imageGCLowThresholdPercent", "must be less than"),
        ("imageGCHighThresholdPercent: 101\n", "imageGCHighThresholdPercent", "between 0 and 100"),
        ("syncFrequency: -1s\n", "syncFrequency", "must not be negative, got -1s"),
        ("authorization:\n  mode: RBAC\n", "authorization.mode", "must be 'AlwaysAllow' or"),
        ("cgroupDriver: cgroupv2\n", "cgroupDriver", "must be 'cgroupfs' or 'systemd'"),
        ("containerLogMaxFiles: 1\n", "containerLogMaxFiles", "must be greater than 1"),
        ("containerLogMaxSize: ten\n", "containerLogMaxSize", "invalid quantity 'ten'"),
        ("podLogsDir: /var/log/../pods\n", "podLogsDir", "must be a normalized path"),
        ("shutdownGracePeriod: 500ms\n", "shutdownGracePeriod", "either zero or otherwise >= 1s"),
        ("enforceNodeAllocatable: [pods, none]\n", "enforceNodeAllocatable", "'none' may not"),
        ("enforceNodeAllocatable: [system-reserved]\n", "enforceNodeAllocatable", "requires"),
        ("clusterDNS: [dns.local]\n", "clusterDNS[0]", "must be an IP address"),
        ("address: localhost\n", "address", "must be an IP address"),
        ("evictionHard: {memory.available: lots}\n", "evictionHard[memory.available]", "must be"),
        ("maxParallelImagePulls: 0\n", "maxParallelImagePulls", "must be a positive number"),
        (
            "serializeImagePulls: true\nmaxParallelImagePulls: 4\n",
            "maxParallelImagePulls",
            "cannot be larger than 1 while serializeImagePulls is true",
        ),
        (
            "crashLoopBackOff: {maxContainerRestartPeriod: 10m}\n",
            "crashLoopBackOff.maxContainerRestartPeriod",
            "must be between 1s and 300s, got 10m0s",
        ),
        (
            "registerWithTaints: [{key: a, effect: Sometimes}]\n",
            "registerWithTaints[0]",
            "taint effect 'Sometimes' must be one of",
        ),
        ("maxOpenFiles: -5\n", "maxOpenFiles", "-5 must not be a negative number"),
        (
            "hairpinMode: bridge\n",
            "hairpinMode",
            'option "bridge" specified for hairpinMode. Valid options are "none", '
            '"hairpin-veth" or "promiscuous-bridge"',
        ),
        (
            "preloadedImagesVerificationAllowlist: [registry.example/app]\n",
            "preloadedImagesVerificationAllowlist",
            "can't set `preloadedImagesVerificationAllowlist` if "
            '`imagePullCredentialsVerificationPolicy` is not "NeverVerifyAllowlistedImages"',
        ),
        (  # the gate as resolved: AllBeta=false turns it off too
            "featureGates: {AllBeta: false}\nimagePullCredentialsVerificationPolicy: NeverVerify\n",
            "imagePullCredentialsVerificationPolicy",
            "`imagePullCredentialsVerificationPolicy` must not be set if "
            "KubeletEnsureSecretPulledImages feature gate is not enabled",
        ),
    ],
)
def test_validation_names_file_and_field(
    tmp_path: Path, body: str, field: str, message: str
) -> None:
    path = write(tmp_path, HEADER + body)
    with pytest.raises(ConfigError) as exc:
        resolve(["--config", str(path)], hostname=lambda: "n")
    assert any(
        p.source == str(path) and p.field == field and message in p.message
        for p in exc.value.problems
    ), problems(exc)
