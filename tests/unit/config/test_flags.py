"""Flags: upstream names, Go spellings, precedence over the file, errors naming the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet.api.ratelimit import DEFAULT_BURST, DEFAULT_QPS
from kubelet.config import FLAGS, ConfigError, Options, Taint, build_parser, parse_flags, resolve
from kubelet.config.flags import CONFIG_FLAG_DEPRECATION, GC_FLAG_DEPRECATION

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def run(*argv: str, host: str = "Node-1") -> Options:
    return resolve(list(argv), hostname=lambda: host)


def config_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "kubelet.yaml"
    path.write_text(HEADER + body)
    return str(path)


def test_no_flags() -> None:
    options = run()
    assert options.config_file == ""
    assert options.root_dir == "/var/lib/kubelet"
    assert options.cert_dir == "/var/lib/kubelet/pki"
    assert options.kubeconfig == ""
    assert options.standalone
    assert options.verbosity == 0
    assert options.config.cgroup_root == "/"
    # upstream's legacy defaults apply when there is no config file
    assert options.config.read_only_port == 10255
    assert options.config.authorization.mode == "AlwaysAllow"


def test_node_name_is_lowercased_hostname_or_override() -> None:
    assert run().node_name == "node-1"
    assert run("--hostname-override", " Worker-7.Example ").node_name == "worker-7.example"
    with pytest.raises(ConfigError, match="--hostname-override: empty hostname"):
        run("--hostname-override", "  ")


def test_flag_only_settings(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubelet.conf"
    kubeconfig.write_text("")
    options = run(
        f"--kubeconfig={kubeconfig}",
        "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
        "--root-dir=/srv/kubelet",
        "--cert-dir",
        "/srv/pki",
        "--node-ip=10.0.0.5,fd00::5",
        "--node-labels=role=edge,node.kubernetes.io/pool=a",
        "-v",
        "4",
    )
    assert options.kubeconfig == str(kubeconfig)
    assert not options.standalone
    assert options.bootstrap_kubeconfig == "/etc/kubernetes/bootstrap-kubelet.conf"
    assert options.root_dir == "/srv/kubelet"
    assert options.cert_dir == "/srv/pki"
    assert options.node_ip == "10.0.0.5,fd00::5"
    assert options.node_labels == {"role": "edge", "node.kubernetes.io/pool": "a"}
    assert options.verbosity == 4


@pytest.mark.parametrize("argv", [["-v", "3"], ["-v=3"], ["--v=3"], ["--v", "3"], ["-v3"]])
def test_verbosity_spellings(argv: list[str]) -> None:
    assert run(*argv).verbosity == 3


def test_flags_override_the_file(tmp_path: Path) -> None:
    path = config_file(
        tmp_path,
        "staticPodPath: /etc/kubelet.d\nsyncFrequency: 30s\nmaxPods: 50\nregisterNode: true\n"
        "featureGates: {EventedPLEG: true, MemoryQoS: true}\nstaticPodURLHeader: {X-Old: [a]}\n",
    )
    options = run(
        f"--config={path}",
        "--pod-manifest-path=/srv/manifests",
        "--sync-frequency=10s",
        "--register-node=false",
        "--feature-gates=MemoryQoS=false,QOSReserved=true",
        "--manifest-url-header=X-New:b",
    )
    c = options.config
    assert c.static_pod_path == "/srv/manifests"
    assert c.sync_frequency == 10.0
    assert c.max_pods == 50  # from the file
    assert c.register_node is False
    # merged, flags winning
    assert c.feature_gates == {"EventedPLEG": True, "MemoryQoS": False, "QOSReserved": True}
    assert options.features.enabled("EventedPLEG") and not options.features.enabled("MemoryQoS")
    assert c.static_pod_url_header == {"X-New": ("b",)}  # the flag replaces the file's map
    # with a file, the v1beta1 defaults apply, not the legacy flag defaults
    assert c.read_only_port == 0
    assert c.authorization.mode == "Webhook"


def test_many_config_flags() -> None:
    c = run(
        "--container-runtime-endpoint=unix:///tmp/cri.sock",
        "--image-service-endpoint=unix:///tmp/img.sock",
        "--file-check-frequency=5s",
        "--http-check-frequency=1m",
        "--manifest-url=http://10.0.0.1/pods",
        "--max-pods=12",
        "--cgroup-driver=systemd",
        "--runtime-request-timeout=30s",
        "--port=11250",
        "--healthz-port=0",
        "--healthz-bind-address=0.0.0.0",
        "--read-only-port=0",
        "--address=::",
        "--cluster-dns=10.96.0.10,10.96.0.11",
        "--cluster-dns=fd00::a",
        "--cluster-domain=cluster.local",
        "--fail-swap-on=false",
        "--logging-format=json",
        "--register-with-taints=dedicated=infra:NoSchedule,edge:NoExecute",
        "--eviction-hard=memory.available<1Gi",
        "--anonymous-auth=false",
        "--authorization-mode=Webhook",
        "--oom-score-adj=-999",
    ).config
    assert c.container_runtime_endpoint == "unix:///tmp/cri.sock"
    assert c.image_service_endpoint == "unix:///tmp/img.sock"
    assert (c.file_check_frequency, c.http_check_frequency) == (5.0, 60.0)
    assert c.static_pod_url == "http://10.0.0.1/pods"
    assert c.max_pods == 12
    assert c.cgroup_driver == "systemd"
    assert c.runtime_request_timeout == 30.0
    assert (c.port, c.healthz_port, c.read_only_port) == (11250, 0, 0)
    assert (c.address, c.healthz_bind_address) == ("::", "0.0.0.0")
    assert c.cluster_dns == ("10.96.0.10", "10.96.0.11", "fd00::a")
    assert c.cluster_domain == "cluster.local"
    assert c.fail_swap_on is False
    assert c.logging.format == "json"
    assert c.register_with_taints == (
        Taint(key="dedicated", value="infra", effect="NoSchedule"),
        Taint(key="edge", value="", effect="NoExecute"),
    )
    assert c.eviction_hard == {"memory.available": "1Gi"}
    assert c.authentication.anonymous.enabled is False
    assert c.authorization.mode == "Webhook"
    assert c.oom_score_adj == -999


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--seccomp-default"], True),
        (["--seccomp-default=true"], True),
        (["--seccomp-default=1"], True),
        (["--seccomp-default=T"], True),
        (["--seccomp-default=false"], False),
        (["--seccomp-default=0"], False),
        (["--seccomp-default", "--seccomp-default=false"], False),
        ([], False),
    ],
)
def test_go_booleans(argv: list[str], expected: bool) -> None:
    assert run(*argv).config.seccomp_default is expected


def test_go_boolean_does_not_take_a_separate_value() -> None:
    """The stray word is a command to the kubelet, which has none."""
    with pytest.raises(ConfigError) as exc:
        run("--register-node", "false")
    assert str(exc.value) == "unknown command false"


def test_manifest_url_header() -> None:
    headers = run(
        "--manifest-url-header",
        "a:hello,b:again,c:world",
        "--manifest-url-header",
        "b:beautiful",
        "--manifest-url-header=Authorization: Basic dXNlcjpwYXNz",
        "--manifest-url-header=X-Url:http://x:1/y",
    ).config.static_pod_url_header
    assert headers == {
        "a": ("hello",),
        "b": ("again", "beautiful"),
        "c": ("world",),
        "Authorization": ("Basic dXNlcjpwYXNz",),
        "X-Url": ("http://x:1/y",),
    }


def test_manifest_url_header_needs_a_colon() -> None:
    with pytest.raises(ConfigError) as exc:
        run("--manifest-url-header=novalue")
    assert str(exc.value) == (
        '--manifest-url-header: invalid value "novalue": '
        "malformed pair 'novalue', expected key:value"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--max-pods=many"], '--max-pods: invalid value "many": expected an integer'),
        (["--max-pods=99999999999"], "--max-pods: invalid value"),
        (["--sync-frequency=10"], '--sync-frequency: invalid value "10": invalid duration'),
        (["--register-node=maybe"], "--register-node: invalid value"),
        (["--address=localhost"], "--address: invalid value"),
        (["--cluster-dns=10.0.0.1,nope"], "--cluster-dns: invalid value"),
        (["--node-ip=1.1.1.1,2.2.2.2,3.3.3.3"], "--node-ip: invalid value"),
        (["--node-labels=kubernetes.io/role=x"], "--node-labels: invalid value"),
        (["--node-labels=novalue"], "--node-labels: invalid value"),
        (["--register-with-taints=key=value"], "--register-with-taints: invalid value"),
        (["--feature-gates=A=yes"], "--feature-gates: invalid value"),
        (["--max-pods=-1"], "--max-pods: maxPods: must not be negative, got -1"),
        (["--port=0"], "--port: port: must be between 1 and 65535"),
        (["--sync-frequency=0s"], "--sync-frequency: syncFrequency: must be greater than zero"),
        (["--image-gc-low-threshold=90"], "--image-gc-low-threshold: imageGCLowThresholdPercent"),
        (["--bogus"], "unknown flag: --bogus"),
        (["--max-pod=3"], "unknown flag: --max-pod"),  # no abbreviations
        (["-x"], "unknown shorthand flag: 'x' in -x"),
        (["--max-pods=3", "--", "pods"], "unknown command pods"),
        (["--max-pods"], "argument --max-pods: expected one argument"),
    ],
)
def test_bad_flags_are_named(argv: list[str], expected: str) -> None:
    with pytest.raises(ConfigError) as exc:
        run(*argv)
    assert str(exc.value).startswith(expected), str(exc.value)


def test_problem_from_file_names_file_even_with_other_flags(tmp_path: Path) -> None:
    path = config_file(tmp_path, "imageGCLowThresholdPercent: 90\n")
    with pytest.raises(ConfigError) as exc:
        run(f"--config={path}", "--max-pods=5")
    assert str(exc.value).startswith(f"{path}: imageGCLowThresholdPercent: must be less than")


def test_version_flag() -> None:
    assert parse_flags(["--version"]).version == "true"
    assert parse_flags(["--version=raw"]).version == "raw"
    assert not parse_flags(["--version=false"]).version
    assert not parse_flags([]).version


def test_help_documents_every_flag_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # help text wraps lines
    for spec in FLAGS:  # upstream's kubelet shows its deprecated flags too
        assert f"--{spec.name}" in text
    assert text.count("(default: ") == len(FLAGS)
    assert text.count("(DEPRECATED: ") == sum(1 for spec in FLAGS if spec.deprecated)
    assert "--register-node[=true|false]" in text
    assert "(default: 20s)" in text  # --file-check-frequency
    assert "(default: 110)" in text  # --max-pods
    assert "(default: unix:///run/containerd/containerd.sock)" in text


def test_flag_names_are_unique() -> None:
    names = [spec.name for spec in FLAGS]
    assert len(names) == len(set(names))


def test_volume_stats_agg_period(tmp_path: Path) -> None:
    """A zero in the file means the default (1m), as upstream's defaulting; a negative
    period, or 0 given on the command line, turns volume measuring off."""
    assert run().config.volume_stats_agg_period == 60.0
    zero = config_file(tmp_path, "volumeStatsAggPeriod: 0s\n")
    assert run(f"--config={zero}").config.volume_stats_agg_period == 60.0
    off = config_file(tmp_path, "volumeStatsAggPeriod: -1s\n")
    assert run(f"--config={off}").config.volume_stats_agg_period == -1.0
    assert run("--volume-stats-agg-period=0").config.volume_stats_agg_period == 0.0
    assert run("--volume-stats-agg-period=2m").config.volume_stats_agg_period == 120.0


def test_deprecated_container_gc_flags_act_and_warn() -> None:
    """Upstream's three deprecated container GC flags: accepted with pflag's warning."""
    options = run(
        "--minimum-container-ttl-duration=1m",
        "--maximum-dead-containers-per-container=3",
        "--maximum-dead-containers=100",
    )
    assert options.minimum_container_ttl_duration == 60.0
    assert options.maximum_dead_containers_per_container == 3
    assert options.maximum_dead_containers == 100
    note = "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version."
    for name in ("minimum-container-ttl-duration", "maximum-dead-containers-per-container",
                 "maximum-dead-containers"):  # fmt: skip
        assert f"Flag --{name} has been deprecated, {note}" in options.warnings
    plain = run()
    assert (plain.minimum_container_ttl_duration, plain.maximum_dead_containers_per_container,
            plain.maximum_dead_containers) == (0.0, 1, -1)  # fmt: skip
    assert not any("deprecated" in w for w in plain.warnings)


NOT_DEPRECATED = {"v", "vmodule", "log-flush-frequency", "provider-id", "seccomp-default"}
"""Upstream's config flags left undeprecated (AddKubeletConfigFlags' exceptions), and
--seccomp-default, which upstream registers with its own flags."""


def helps() -> dict[str, str]:
    return {a.dest: a.help or "" for a in build_parser()._actions}


def test_config_flags_are_deprecated_as_upstreams() -> None:
    for spec in FLAGS:
        if spec.field is not None:
            expected = "" if spec.name in NOT_DEPRECATED else CONFIG_FLAG_DEPRECATION
            assert spec.deprecated == expected, spec.name


def test_a_deprecated_flag_warns_once_and_says_so_in_help() -> None:
    options = run("--max-pods=5", "--max-pods=6", "-v=2", "--provider-id=x", "--runonce=false")
    assert options.config.max_pods == 6
    assert options.warnings.count(
        "Flag --max-pods has been deprecated, This parameter should be set via the config file "
        "specified by the Kubelet's --config flag. See https://kubernetes.io/docs/tasks/"
        "administer-cluster/kubelet-config-file/ for more information."
    ) == 1
    assert "Flag --runonce has been deprecated, " + CONFIG_FLAG_DEPRECATION in options.warnings
    assert not any(w.startswith(("Flag --v ", "Flag --provider-id ")) for w in options.warnings)
    text = helps()
    assert text["max_pods"].endswith(f"(default: 110) (DEPRECATED: {CONFIG_FLAG_DEPRECATION})")
    assert text["minimum_container_ttl_duration"].endswith(f"(DEPRECATED: {GC_FLAG_DEPRECATION})")
    for dest in ("v", "vmodule", "log_flush_frequency", "provider_id", "seccomp_default"):
        assert "DEPRECATED" not in text[dest], dest


def test_qps_help_says_what_zero_means() -> None:
    """0 is client-go's default (what kubelet.api.ratelimit does), not "unlimited"."""
    text = helps()
    for dest in ("event_qps", "kube_api_qps"):
        assert f"0 means client-go's default, {DEFAULT_QPS:g}." in text[dest], dest
    for dest in ("event_burst", "kube_api_burst"):
        assert f"0 means client-go's default, {DEFAULT_BURST}" in text[dest], dest
    assert not any("unlimited" in text[d] for d in ("event_qps", "event_burst", "kube_api_qps"))


def test_runonce_true_is_refused(tmp_path: Path) -> None:
    """Upstream removed run-once mode: true is a validation error, false is accepted."""
    message = "runOnce: Runonce mode has been deprecated and should not be set"
    for argv in (["--runonce"], ["--runonce=true"], ["--runonce=false", "--runonce"]):
        with pytest.raises(ConfigError) as exc:
            run(*argv)
        assert str(exc.value) == f"--runonce: {message}"
    on = config_file(tmp_path, "runOnce: true\n")
    with pytest.raises(ConfigError) as exc:
        run(f"--config={on}")
    assert str(exc.value) == f"{on}: {message}"
    assert run(f"--config={on}", "--runonce=false").config.run_once is False
    off = config_file(tmp_path, "runOnce: false\n")
    assert run(f"--config={off}").config.run_once is False


def test_pod_infra_container_image_is_gone(tmp_path: Path) -> None:
    """Removed upstream in 1.35 (an unknown flag); its config key was ours, and an unknown
    key stops start-up like any other."""
    for argv in (
        ["--pod-infra-container-image=registry.k8s.io/pause:3.10"],
        ["--pod-infra-container-image", "registry.k8s.io/pause:3.10"],
    ):
        with pytest.raises(ConfigError) as exc:
            run(*argv)
        assert str(exc.value) == "unknown flag: --pod-infra-container-image"
    path = config_file(tmp_path, "podInfraContainerImage: registry.k8s.io/pause:3.10\n")
    with pytest.raises(ConfigError) as exc:
        run(f"--config={path}")
    assert str(exc.value).startswith(f"{path}: podInfraContainerImage: unknown field")
    assert "pod_infra_container_image" not in helps()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-v=-1"], '--v: invalid value "-1": must be an unsigned integer (0 to 4294967295)'),
        (["-v", "-1"], '--v: invalid value "-1"'),
        (["--v=-3"], '--v: invalid value "-3"'),
        (["-v=+1"], '--v: invalid value "+1"'),
        (["-v=4294967296"], '--v: invalid value "4294967296"'),
        (["--vmodule=agent=-1"], "--vmodule: invalid value \"agent=-1\": invalid verbosity '-1'"),
    ],
)
def test_negative_verbosity_flag_is_refused(argv: list[str], expected: str) -> None:
    """Upstream's verbosity is unsigned: a negative level does not parse."""
    with pytest.raises(ConfigError) as exc:
        run(*argv)
    assert str(exc.value).startswith(expected), str(exc.value)


def test_negative_verbosity_in_the_file_is_refused(tmp_path: Path) -> None:
    path = config_file(
        tmp_path, "logging:\n  verbosity: -1\n  vmodule: [{filePattern: agent, verbosity: -2}]\n"
    )
    with pytest.raises(ConfigError) as exc:
        run(f"--config={path}")
    assert [str(p) for p in exc.value.problems] == [
        f"{path}: logging.verbosity: must be an unsigned integer (0 to 4294967295), got -1",
        f"{path}: logging.vmodule[0].verbosity: must be an unsigned integer (0 to 4294967295), "
        "got -2",
    ]
    assert run("-v=4294967295").verbosity == 4294967295
