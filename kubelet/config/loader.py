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
import yaml

from kubelet.errors import ConfigError, Problem

from .fields import get_by_wire_path, set_by_wire_path
from .kubeletconfig import (
    API_VERSIONS,
    DEFAULT_EVICTION_HARD,
    KIND,
    KubeletConfiguration,
)
from .wire import decode

_RELATIVE_TO_FILE = (
    ("staticPodPath",),
    ("authentication", "x509", "clientCAFile"),
    ("tlsCertFile",),
    ("tlsPrivateKeyFile",),
    ("resolvConf",),
    ("podLogsDir",),
)
"""Path fields resolved against the config file's directory (upstream's path refs)."""


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
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError.single(name, "", f"cannot read the config file: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError.single(name, "", "the config file is not UTF-8 text") from exc
    return parse_config(text, name)


def parse_config(text: str, source: str) -> LoadedConfig:
    """Parse config file text; ``source`` names it in errors and anchors relative paths."""
    if not text.strip():
        raise ConfigError.single(source, "", "the config file is empty")
    data = _parse_document(text, source)
    if not isinstance(data, Mapping):
        raise ConfigError.single(source, "", f"expected a {KIND} object")
    _check_type_meta(data, source)
    body = {k: v for k, v in data.items() if k not in ("apiVersion", "kind")}
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


def _parse_document(text: str, source: str) -> Any:
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno} column {exc.colno}"
            raise ConfigError.single(source, "", f"invalid JSON at {where}: {exc.msg}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError.single(
            source, "", f"invalid YAML: {' '.join(str(exc).split())}"
        ) from None


def _check_type_meta(data: Mapping[str, Any], source: str) -> None:
    problems = []
    kind = data.get("kind")
    if kind != KIND:
        got = "it is missing" if kind is None else f"got {kind!r}"
        problems.append(Problem(source, "kind", f"must be {KIND!r}, {got}"))
    version = data.get("apiVersion")
    if version not in API_VERSIONS:
        got = "it is missing" if version is None else f"got {version!r}"
        problems.append(Problem(source, "apiVersion", f"must be {API_VERSIONS[0]!r}, {got}"))
    if problems:
        raise ConfigError(*problems)


def _resolve_relative_paths(
    config: KubeletConfiguration, present: frozenset[str], source: str
) -> KubeletConfiguration:
    """A relative path in the file is relative to the file, not to the kubelet's cwd."""
    base = os.path.dirname(os.path.abspath(source))
    for wire_path in _RELATIVE_TO_FILE:
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
    pulls = config.max_parallel_image_pulls
    if "serializeImagePulls" not in present and pulls is not None and pulls >= 2:
        changes["serialize_image_pulls"] = False
    if "evictionHard" in present and config.merge_default_eviction_settings:
        changes["eviction_hard"] = {**DEFAULT_EVICTION_HARD, **config.eviction_hard}
    if config.pod_pids_limit < 0:
        changes["pod_pids_limit"] = -1
    return attrs.evolve(config, **changes) if changes else config
