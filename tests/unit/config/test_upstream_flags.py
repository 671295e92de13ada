"""Our flag set against upstream kubelet v1.36's: names, types, defaults, deprecations.

The upstream list is a fixture derived from upstream's source (see its header); a flag
upstream has that we lack, or a type, default or deprecation that differs, fails here
unless it is one of the documented differences below.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from kubelet.config import (
    FLAGS,
    ConfigError,
    FlagSpec,
    KubeletConfiguration,
    Options,
    format_duration,
    resolve,
)
from kubelet.config import flagvalues as fv
from kubelet.config.fields import get_by_wire_path
from kubelet.config.flags import CONFIG_FLAG_DEPRECATION, GC_FLAG_DEPRECATION, REMOVAL_DEPRECATION
from kubelet.config.kubeletconfig import MemoryReservation, legacy_flag_defaults

FIXTURE = Path(__file__).parent / "data" / "upstream-kubelet-flags-1.36.txt"

OURS_ONLY = {"debug-console-socket"}
"""Flags upstream does not have (docs/configuration.md, "Flags")."""

GO_TYPES: dict[Callable[[str], Any], str] = {
    fv.go_bool: "bool",
    fv.int32: "int32",
    fv.int64: "int",
    fv.uint32: "int",
    fv.duration: "duration",
    fv.string_list: "strings",
    fv.ip_list: "strings",
    fv.ip: "string",
    fv.node_ips: "string",
    fv.key_value_map: "mapStringString",
    fv.langle_map: "mapStringString",
    fv.one_pair: "mapStringString",
    fv.node_labels: "mapStringString",
    fv.bool_map: "mapStringBool",
    fv.header_multimap: "colonSeparatedMultimapStringString",
    fv.taints: "[]v1.Taint",
    fv.reserved_memory: "reserved-memory",
    fv.quantity: "quantity",
    fv.vmodule: "pattern=N,...",
    fv.version_mode: "version",
}
DEPRECATIONS = {
    "": "-",
    CONFIG_FLAG_DEPRECATION: "config",
    GC_FLAG_DEPRECATION: "gc",
    REMOVAL_DEPRECATION: "removal",
    REMOVAL_DEPRECATION + " in favor of using CSI.": "removal",
}
_ZERO = {"", "0", "0s", "false"}
_PROSE_NONE = {"none", '""', "the hostname", "auto-detected", "off"}
"""What our --help says where pflag prints no default."""


@attrs.frozen
class Upstream:
    type: str
    default: str
    deprecated: str


def upstream_flags() -> dict[str, Upstream]:
    flags = {}
    for line in FIXTURE.read_text().splitlines():
        if line and not line.startswith("#"):
            name, go_type, default, deprecated = line.split("\t")
            flags[name] = Upstream(go_type, default, deprecated)
    return flags


def go_type(spec: FlagSpec) -> str:
    return GO_TYPES.get(spec.parse, "string")


def go_default(spec: FlagSpec) -> str:
    """The default pflag prints for our flag ("-" for none), from the legacy flag defaults."""
    if go_type(spec).startswith(("map", "colon", "[]", "reserved")):
        return "-"  # pflag prints no default for map-typed values
    value: Any = "" if spec.default in _PROSE_NONE else spec.default
    if spec.field is not None:  # unless upstream's field is not modelled (help states it)
        with contextlib.suppress(KeyError):
            value = get_by_wire_path(
                legacy_flag_defaults(KubeletConfiguration()), tuple(spec.field.split("."))
            )
    if spec.parse is fv.duration and isinstance(value, float):
        value = format_duration(value)
    elif isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, tuple):
        value = ",".join(value)
    text = str(value)
    return "-" if text in _ZERO else text


def ours() -> dict[str, Upstream]:
    flags = {
        spec.name: Upstream(go_type(spec), go_default(spec), DEPRECATIONS[spec.deprecated])
        for spec in FLAGS
    }
    flags["help"] = Upstream("bool", "-", "-")  # argparse's -h/--help
    return flags


def test_the_fixture_lists_upstreams_flags() -> None:
    flags = upstream_flags()
    assert len(flags) == 130
    assert "pod-infra-container-image" not in flags  # removed in 1.35
    assert flags["config-dir"].type == "string"


def test_we_have_every_upstream_flag_and_no_other() -> None:
    upstream, mine = upstream_flags(), ours()
    assert sorted(set(upstream) - set(mine)) == []
    assert sorted(set(mine) - set(upstream)) == sorted(OURS_ONLY)


def test_types_defaults_and_deprecations_are_upstreams() -> None:
    upstream, mine = upstream_flags(), ours()
    differ = {
        name: (mine[name], theirs) for name, theirs in upstream.items() if mine[name] != theirs
    }
    assert differ == {}


def run(*argv: str) -> Options:
    return resolve(list(argv), hostname=lambda: "node")


def test_resource_manager_flags_set_their_config_fields() -> None:
    config = run(
        "--cpu-manager-policy=static",
        "--cpu-manager-policy-options=full-pcpus-only=true",
        "--cpu-manager-policy-options=strict-cpu-reservation=true",
        "--cpu-manager-reconcile-period=5s",
        "--reserved-cpus=0-1,4",
        "--memory-manager-policy=Static",
        "--reserved-memory=0:memory=1Gi,hugepages-1Mi=2Gi",
        "--reserved-memory",
        "1:memory=2Gi",
        "--topology-manager-policy=single-numa-node",
        "--topology-manager-scope=pod",
        "--topology-manager-policy-options=prefer-closest-numa-nodes=true",
    ).config
    assert config.cpu_manager_policy == "static"
    assert config.cpu_manager_policy_options == {
        "full-pcpus-only": "true",
        "strict-cpu-reservation": "true",
    }
    assert config.cpu_manager_reconcile_period == 5.0
    assert config.reserved_system_cpus == "0-1,4"
    assert config.memory_manager_policy == "Static"
    assert config.reserved_memory == (
        MemoryReservation(numa_node=0, limits={"memory": "1Gi", "hugepages-1Mi": "2Gi"}),
        MemoryReservation(numa_node=1, limits={"memory": "2Gi"}),
    )
    assert config.topology_manager_policy == "single-numa-node"
    assert config.topology_manager_scope == "pod"
    assert config.topology_manager_policy_options == {"prefer-closest-numa-nodes": "true"}


def test_reconcile_period_follows_the_status_frequency_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "nodeStatusUpdateFrequency: 20s\n"
    )
    assert run(f"--config={path}").config.cpu_manager_reconcile_period == 20.0
    assert run().config.cpu_manager_reconcile_period == 10.0


def test_flags_for_fields_that_already_worked() -> None:
    config = run(
        "--node-status-max-images=-1",
        "--kube-reserved-cgroup=/kube.slice",
        "--system-reserved-cgroup=/system.slice",
        "--tls-min-version=VersionTLS13",
        "--hairpin-mode=none",
        "--authentication-token-webhook-cache-ttl=10s",
        "--authorization-webhook-cache-authorized-ttl=1m",
        "--authorization-webhook-cache-unauthorized-ttl=2s",
    ).config
    assert config.node_status_max_images == -1
    assert (config.kube_reserved_cgroup, config.system_reserved_cgroup) == (
        "/kube.slice",
        "/system.slice",
    )
    assert config.tls_min_version == "VersionTLS13"
    assert config.hairpin_mode == "none"
    assert config.authentication.webhook.cache_ttl == 10.0
    assert config.authorization.webhook.cache_authorized_ttl == 60.0
    assert config.authorization.webhook.cache_unauthorized_ttl == 2.0


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--reserved-memory=0memory=1Gi"], "--reserved-memory: invalid value"),
        (["--reserved-memory=x:memory=1Gi"], "failed to convert the NUMA node ID"),
        (["--reserved-memory=0:memory=lots"], "invalid quantity"),
        (["--cpu-manager-policy-options=nopair"], "--cpu-manager-policy-options: invalid"),
        (["--node-status-max-images=-2"], "--node-status-max-images: nodeStatusMaxImages"),
        (["--tls-min-version=TLS9"], "--tls-min-version: tlsMinVersion"),
        (["--log-text-info-buffer-size=1X"], "--log-text-info-buffer-size: invalid value"),
    ],
)
def test_bad_values_name_the_flag(argv: list[str], expected: str) -> None:
    with pytest.raises(ConfigError) as exc:
        run(*argv)
    assert expected in str(exc.value), str(exc.value)


def test_flags_we_do_not_act_on_are_named_in_the_warning() -> None:
    options = run(
        "--kube-api-content-type=application/vnd.kubernetes.protobuf",
        "--pod-cidr=10.0.0.0/24",
        "--log-text-split-stream",
        "--experimental-mounter-path=/bin/mount",
    )
    (warning,) = [w for w in options.warnings if "not implemented yet" in w]
    for item in (
        "contentType=application/vnd.kubernetes.protobuf (--kube-api-content-type)",
        "podCIDR=10.0.0.0/24 (--pod-cidr)",
        "--log-text-split-stream=true (--log-text-split-stream)",
        "--experimental-mounter-path=/bin/mount (--experimental-mounter-path)",
    ):
        assert item in warning, warning
    deprecated = [w for w in options.warnings if w.startswith("Flag --experimental-mounter")]
    assert deprecated == [
        "Flag --experimental-mounter-path has been deprecated, will be removed in 1.25 or "
        "later. in favor of using CSI."
    ]
    for honoured in ("--protect-kernel-defaults=false", "--kube-api-content-type=application/json"):
        assert not [w for w in run(honoured).warnings if "not impl" in w]
