"""Reading the ``--config`` file: YAML or JSON, checked, defaulted the way upstream does.

The loader is pure (no logging); ``LoadedConfig.ignored`` carries the upstream keys we
do not model (and ``unmodelled`` their values) so the caller can warn once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import attrs

from kubelet.boundedio import InputRefused, read_regular_file
from kubelet.errors import ConfigError, Problem

from .document import Fields, parse_document
from .fields import get_by_wire_path, set_by_wire_path
from .kubeletconfig import (
    API_VERSION,
    DEFAULT_EVICTION_HARD,
    KIND,
    KubeletConfiguration,
)
from .wire import decode

RELATIVE_TO_FILE = (
    ("staticPodPath",),
    ("authentication", "x509", "clientCAFile"),
    ("tlsCertFile",),
    ("tlsPrivateKeyFile",),
    ("resolvConf",),
    ("podLogsDir",),
)
"""Path fields resolved against the config file's directory (upstream's path refs)."""


MAX_CONFIG_BYTES = 10 * 1024 * 1024
"""The largest config file read (a KubeletConfiguration is a few kilobytes); a FIFO or a
device is refused before a byte is read."""


@attrs.frozen
class LoadedConfig:
    """A config file's content: the defaulted configuration and what the file itself set."""

    path: str
    config: KubeletConfiguration
    present: frozenset[str]
    """Field paths the file set (``authentication.webhook.cacheTTL``), zero values excluded."""
    ignored: tuple[str, ...]
    """Upstream keys we do not model that the file set (non-zero values)."""
    unmodelled: Mapping[str, Any] = attrs.field(factory=dict)
    """Those keys' values as written, for the start-up warning."""


def load_config_file(path: str | os.PathLike[str]) -> LoadedConfig:
    """Read a KubeletConfiguration file; ``ConfigError`` names the file and the field."""
    name = os.fspath(path)
    try:
        text = read_regular_file(name, MAX_CONFIG_BYTES).decode("utf-8")
    except InputRefused as exc:
        raise ConfigError.single(name, "", f"cannot read the config file: {exc}") from exc
    except OSError as exc:
        raise ConfigError.single(name, "", f"cannot read the config file: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError.single(name, "", "the config file is not UTF-8 text") from exc
    return parse_config(text, name)


def parse_config(text: str, source: str) -> LoadedConfig:
    """Parse config file text; ``source`` names it in errors and anchors relative paths."""
    if not text.strip():
        raise ConfigError.single(source, "", "the config file is empty")
    data = parse_document(text, source)
    if not isinstance(data, Mapping):
        raise ConfigError.single(source, "", f"expected a {KIND} object")
    _check_type_meta(data, source)
    body = Fields((k, v) for k, v in data.items() if k not in ("apiVersion", "kind"))
    body.repeated = data.repeated if isinstance(data, Fields) else ()
    decoded = decode(KubeletConfiguration, body)
    if decoded.problems:
        raise ConfigError(*(Problem(source, p, m) for p, m in decoded.problems))
    config = _resolve_relative_paths(decoded.value, decoded.present, source)
    config = _dependent_defaults(config, decoded.present)
    return LoadedConfig(
        path=source,
        config=config,
        present=decoded.present,
        ignored=decoded.ignored,
        unmodelled=decoded.unmodelled,
    )


def _check_type_meta(data: Mapping[str, Any], source: str) -> None:
    """Only v1beta1 holds a KubeletConfiguration (v1 has CredentialProviderConfig alone);
    another version or kind gets upstream's message, and what the kubelet reads."""
    kind, version = data.get("kind"), data.get("apiVersion")
    problems = [
        Problem(source, name, f"must be {wanted!r}, it is missing")
        for name, value, wanted in (("kind", kind, KIND), ("apiVersion", version, API_VERSION))
        if value is None
    ]
    if not problems and (kind, version) != (KIND, API_VERSION):
        problems.append(
            Problem(
                source,
                "apiVersion" if version != API_VERSION else "kind",
                f"no kind {_go_quote(kind)} is registered for version {_go_quote(version)}; "
                f"the kubelet reads apiVersion {API_VERSION}, kind {KIND}",
            )
        )
    if problems:
        raise ConfigError(*problems)


def _go_quote(value: Any) -> str:
    """Go's %q of a value as the file wrote it."""
    return json.dumps(value if isinstance(value, str) else str(value))


def _resolve_relative_paths(
    config: KubeletConfiguration, present: frozenset[str], source: str
) -> KubeletConfiguration:
    """A relative path in the file is relative to the file, not to the kubelet's cwd."""
    base = os.path.dirname(os.path.abspath(source))
    for wire_path in RELATIVE_TO_FILE:
        if ".".join(wire_path) not in present:
            continue
        value = get_by_wire_path(config, wire_path)
        if value and not os.path.isabs(value):
            config = set_by_wire_path(config, wire_path, os.path.join(base, value))
    return config


def _dependent_defaults(
    config: KubeletConfiguration, present: frozenset[str]
) -> KubeletConfiguration:
    """Defaults upstream derives from other fields the file set."""
    changes: dict[str, Any] = {}
    if "nodeStatusReportFrequency" not in present and "nodeStatusUpdateFrequency" in present:
        changes["node_status_report_frequency"] = config.node_status_update_frequency
    if "cpuManagerReconcilePeriod" not in present:
        changes["cpu_manager_reconcile_period"] = config.node_status_update_frequency
    pulls = config.max_parallel_image_pulls
    if "serializeImagePulls" not in present and pulls is not None and pulls >= 2:
        changes["serialize_image_pulls"] = False
    if "evictionHard" in present and config.merge_default_eviction_settings:
        changes["eviction_hard"] = {**DEFAULT_EVICTION_HARD, **config.eviction_hard}
    if config.pod_pids_limit < 0:
        changes["pod_pids_limit"] = -1
    return attrs.evolve(config, **changes) if changes else config
