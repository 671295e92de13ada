"""From the command line to one ``Options`` object: file, then flags, then checks.

Order, as upstream: v1beta1 defaults (or the legacy flag defaults when there is no
``--config``), the file's values, flags, then validation of the merged result. A problem
is reported against the flag that set the field, else the file, so the message points at
what the operator has to edit.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from .errors import ConfigError, Problem
from .fields import get_by_wire_path, set_by_wire_path
from .flags import (
    DEFAULT_CERT_DIR,
    DEFAULT_ROOT_DIR,
    FLAGS,
    ParsedFlags,
    parse_flags,
    parse_value,
)
from .kubeletconfig import KubeletConfiguration, effective_defaults, legacy_flag_defaults
from .loader import load_config_file
from .validation import validate

log = logging.getLogger(__name__)


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
    debug_console_socket: str = ""
    ignored_fields: tuple[str, ...] = ()
    """Config file fields upstream knows that this kubelet does not implement (warned)."""

    @property
    def run_once(self) -> bool:
        """``--runonce``: start the static pods once and exit."""
        return self.config.run_once

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
    ignored: tuple[str, ...] = ()
    if config_file:
        loaded = load_config_file(config_file)
        config, ignored = loaded.config, loaded.ignored
        if ignored:
            log.warning(
                "%s: ignoring fields this kubelet does not implement yet: %s",
                config_file,
                ", ".join(ignored),
            )
    else:
        config = legacy_flag_defaults(KubeletConfiguration())
    config, set_by_flag = _apply_flags(config, flags)
    config = effective_defaults(config)
    _check(config, set_by_flag, config_file)
    override = str(flag_only.get("hostname_override", ""))
    return Options(
        config=config,
        node_name=_node_name(override, hostname or socket.gethostname),
        config_file=config_file,
        kubeconfig=str(flag_only.get("kubeconfig", "")),
        bootstrap_kubeconfig=str(flag_only.get("bootstrap_kubeconfig", "")),
        hostname_override=override,
        node_ip=str(flag_only.get("node_ip", "")),
        node_labels=flag_only.get("node_labels", {}),
        root_dir=str(flag_only.get("root_dir", DEFAULT_ROOT_DIR)),
        cert_dir=str(flag_only.get("cert_dir", DEFAULT_CERT_DIR)),
        debug_console_socket=str(flag_only.get("debug_console_socket", "")),
        ignored_fields=ignored,
    )


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


def _check(config: KubeletConfiguration, set_by_flag: Mapping[str, str], config_file: str) -> None:
    problems = [
        Problem(_source(path, set_by_flag, config_file), path, message)
        for path, message in validate(config)
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
