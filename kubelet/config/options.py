"""From the command line to one ``Options`` object: file, then flags, then checks.

Order, as upstream: v1beta1 defaults (or the legacy flag defaults when there is no
``--config``), the file's values, flags, then validation of the merged result. A problem
is reported against the flag that set the field, else the file, so the message points at
what the operator has to edit.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from kubelet.errors import ConfigError, Problem

from .features import DEFAULT_GATES, FeatureGates, GateError, ResolvedGates, resolve_gates
from .fields import get_by_wire_path, set_by_wire_path
from .flags import (
    BY_NAME,
    DEFAULT_CERT_DIR,
    DEFAULT_ROOT_DIR,
    FLAGS,
    ParsedFlags,
    deprecation_warnings,
    parse_flags,
    parse_value,
)
from .kubeletconfig import (
    KubeletConfiguration,
    effective_defaults,
    gated_defaults,
    legacy_flag_defaults,
)
from .loader import LoadedConfig, load_config_file
from .support import SETTINGS, detail_lines, not_acted_on, warning_text
from .validation import system_cgroups_issues, validate


@attrs.frozen
class Options:
    """Everything the kubelet was told at start-up.

    ``config`` is the final KubeletConfiguration (defaults, file, flags, checked); the
    other fields are upstream's flag-only settings — they identify this node or this
    process, so they do not belong in a config file shared between nodes.
    """

    config: KubeletConfiguration
    node_name: str
    """The Node object's name: the hostname override, else the hostname, lowercased."""
    config_file: str = ""
    kubeconfig: str = ""
    bootstrap_kubeconfig: str = ""
    hostname_override: str = ""
    node_ip: str = ""
    node_labels: Mapping[str, str] = attrs.field(factory=dict)
    root_dir: str = DEFAULT_ROOT_DIR
    cert_dir: str = DEFAULT_CERT_DIR
    cloud_provider: str = ""
    """"" or "external" (a cloud-controller-manager initializes the node)."""
    image_credential_provider_config: str = ""
    image_credential_provider_bin_dir: str = ""
    debug_console_socket: str = ""
    runtime_cgroups: str = ""
    """``--runtime-cgroups``: the runtime's cgroup, the summary's ``runtime`` system container"""
    minimum_container_ttl_duration: float = 0.0
    maximum_dead_containers_per_container: int = 1
    maximum_dead_containers: int = -1
    """container GC's policy (deprecated flags; upstream's defaults)"""
    ignored_fields: tuple[str, ...] = ()
    """Config file keys upstream knows that this kubelet does not model."""
    features: FeatureGates = DEFAULT_GATES
    """The feature gates in force: ask ``options.features.enabled(name)``."""
    warnings: tuple[str, ...] = ()
    """Start-up warnings (upstream's gate warnings, then what is accepted but not acted on)."""
    details: tuple[str, ...] = ()
    """One line per setting named in the warning, logged at -v=1."""

    @property
    def verbosity(self) -> int:
        """klog's ``-v`` level."""
        return self.config.logging.verbosity

    @property
    def standalone(self) -> bool:
        """No ``--kubeconfig``: no API server, static pods only."""
        return not self.kubeconfig


def resolve(argv: Sequence[str], *, hostname: Callable[[], str] | None = None) -> Options:
    """Parse ``argv`` (without the program name) into ``Options``; pure apart from reading
    ``--config``. ``hostname`` replaces the machine's hostname lookup (for tests).

    Raises ``ConfigError`` naming the file and field, or the flag, of every problem.
    """
    return build_options(parse_flags(argv), hostname=hostname)


def build_options(flags: ParsedFlags, *, hostname: Callable[[], str] | None = None) -> Options:
    """``Options`` from already collected flags (``cli.main`` checks ``--version`` first)."""
    flag_only = {
        spec.dest: parse_value(spec, flags.raw(spec.name))
        for spec in FLAGS
        if spec.field is None and flags.raw(spec.name)
    }
    config_file = str(flag_only.get("config", ""))
    loaded = load_config_file(config_file) if config_file else None
    default = legacy_flag_defaults(KubeletConfiguration())
    config = loaded.config if loaded is not None else default
    config, set_by_flag = _apply_flags(config, flags)
    _raise(system_cgroups_issues(config), set_by_flag, config_file)
    config = effective_defaults(config)
    resolved = _feature_gates(config, flags, config_file)
    config = gated_defaults(config, resolved.gates)
    _check(config, resolved.gates, set_by_flag, config_file)
    kubeconfig = str(flag_only.get("kubeconfig", ""))
    bootstrap = str(flag_only.get("bootstrap_kubeconfig", ""))
    _check_bootstrap(kubeconfig, bootstrap)
    override = str(flag_only.get("hostname_override", ""))
    inert, missing_defaults = not_acted_on(
        _setting_values(config, flags, flag_only, set_by_flag, loaded),
        _set_keys(flags, set_by_flag, loaded),
        resolved.gates.non_default(),
        _gate_sources(resolved, flags, config_file),
    )
    warning = warning_text(inert, missing_defaults)
    return Options(
        config=config,
        node_name=_node_name(override, hostname or socket.gethostname),
        config_file=config_file,
        kubeconfig=kubeconfig,
        bootstrap_kubeconfig=bootstrap,
        hostname_override=override,
        node_ip=str(flag_only.get("node_ip", "")),
        node_labels=flag_only.get("node_labels", {}),
        root_dir=str(flag_only.get("root_dir", DEFAULT_ROOT_DIR)),
        cert_dir=str(flag_only.get("cert_dir", DEFAULT_CERT_DIR)),
        cloud_provider=_cloud_provider(str(flag_only.get("cloud_provider", ""))),
        image_credential_provider_config=str(flag_only.get("image_credential_provider_config", "")),
        image_credential_provider_bin_dir=str(
            flag_only.get("image_credential_provider_bin_dir", "")
        ),
        debug_console_socket=str(flag_only.get("debug_console_socket", "")),
        runtime_cgroups=str(flag_only.get("runtime_cgroups", "")),
        minimum_container_ttl_duration=flag_only.get("minimum_container_ttl_duration", 0.0),
        maximum_dead_containers_per_container=flag_only.get(
            "maximum_dead_containers_per_container", 1
        ),
        maximum_dead_containers=flag_only.get("maximum_dead_containers", -1),
        ignored_fields=loaded.ignored if loaded is not None else (),
        features=resolved.gates,
        warnings=(
            *deprecation_warnings(flags),
            *resolved.warnings,
            *([warning] if warning else []),
        ),
        details=tuple(detail_lines(inert)),
    )


def _feature_gates(
    config: KubeletConfiguration, flags: ParsedFlags, config_file: str
) -> ResolvedGates:
    """The gates, or ``ConfigError`` naming the flag or the file that set the refused one."""
    try:
        return resolve_gates(config.feature_gates)
    except GateError as exc:
        from_flag: set[str] = set()
        if flags.raw("feature-gates"):
            from_flag = set(parse_value(BY_NAME["feature-gates"], flags.raw("feature-gates")))
        problems = [
            Problem("--feature-gates", "", p.message)
            if from_flag.intersection(p.gates) or not config_file
            else Problem(config_file, "featureGates", p.message)
            for p in exc.problems
        ]
        raise ConfigError(*problems) from None


def _gate_sources(resolved: ResolvedGates, flags: ParsedFlags, config_file: str) -> dict[str, str]:
    """Where each gate was set: the flag when it names the gate, else the file."""
    raw = flags.raw("feature-gates")
    from_flag = set(parse_value(BY_NAME["feature-gates"], raw)) if raw else set()
    return {
        name: "--feature-gates" if name in from_flag or not config_file else config_file
        for name in resolved.gates.explicit
    }


def _check_bootstrap(kubeconfig: str, bootstrap: str) -> None:
    """TLS bootstrap writes the kubeconfig it obtains to --kubeconfig: it needs that path."""
    if bootstrap and not kubeconfig:
        raise ConfigError.single(
            "--bootstrap-kubeconfig",
            "",
            "--kubeconfig must be given too: TLS bootstrap writes the kubeconfig presenting "
            "the node's client certificate there",
        )


def _cloud_provider(name: str) -> str:
    """Only an external cloud provider exists (the built-in ones were removed)."""
    if name not in ("", "external"):
        raise ConfigError.single(
            "--cloud-provider",
            "",
            f"cloud provider {name!r} was specified, but built-in cloud providers are "
            "disabled. Please set --cloud-provider=external and migrate to an external cloud "
            "provider",
        )
    return name


def _set_keys(
    flags: ParsedFlags, set_by_flag: Mapping[str, str], loaded: LoadedConfig | None
) -> set[str]:
    """Settings the user chose: flags given, fields the file set (at any depth)."""
    keys = {f"--{spec.name}" for spec in FLAGS if spec.field is None and flags.raw(spec.name)}
    keys |= set(set_by_flag)
    if loaded is not None:
        for path in (*loaded.present, *loaded.ignored):
            parts = path.split(".")
            keys |= {".".join(parts[: i + 1]) for i in range(len(parts))}
    return keys


def _setting_values(
    config: KubeletConfiguration,
    flags: ParsedFlags,
    flag_only: Mapping[str, Any],
    set_by_flag: Mapping[str, str],
    loaded: LoadedConfig | None,
) -> dict[str, tuple[Any, str]]:
    """Every setting's value in force and where it was set (flag, file, or "")."""
    source_file = loaded.path if loaded is not None else ""
    values: dict[str, tuple[Any, str]] = {}
    for key in SETTINGS:
        if key.startswith("--"):
            dest = key[2:].replace("-", "_")
            values[key] = (flag_only.get(dest), key if flags.raw(key[2:]) else "")
            continue
        try:
            value = get_by_wire_path(config, tuple(key.split(".")))
        except (KeyError, AttributeError):
            value = loaded.unmodelled.get(key) if loaded is not None else None
        values[key] = (value, set_by_flag.get(key, source_file))
    return values


def _apply_flags(
    config: KubeletConfiguration, flags: ParsedFlags
) -> tuple[KubeletConfiguration, dict[str, str]]:
    """Flags override the file; returns the config and field path → flag that set it."""
    set_by: dict[str, str] = {}
    for spec in FLAGS:
        values = flags.raw(spec.name)
        if spec.field is None or not values:
            continue
        value: Any = parse_value(spec, values)
        path = tuple(spec.field.split("."))
        if spec.field == "featureGates":  # merged over the file's gates, flags winning
            value = {**get_by_wire_path(config, path), **value}
        config = set_by_wire_path(config, path, value)
        set_by[spec.field] = f"--{spec.name}"
    return config, set_by


def _check(
    config: KubeletConfiguration,
    gates: FeatureGates,
    set_by_flag: Mapping[str, str],
    config_file: str,
) -> None:
    _raise(validate(config, gates), set_by_flag, config_file)


def _raise(
    issues: list[tuple[str, str]], set_by_flag: Mapping[str, str], config_file: str
) -> None:
    problems = [
        Problem(_source(path, set_by_flag, config_file), path, message)
        for path, message in issues
    ]
    if problems:
        raise ConfigError(*problems)


def _source(path: str, set_by_flag: Mapping[str, str], config_file: str) -> str:
    for field, flag in set_by_flag.items():
        if path == field or path.startswith((f"{field}.", f"{field}[")):
            return flag
    return config_file


def _node_name(override: str, hostname: Callable[[], str]) -> str:
    name = (override or hostname()).strip().lower()
    if not name:
        raise ConfigError.single("--hostname-override" if override else "", "", "empty hostname")
    return name
