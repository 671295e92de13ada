"""A config file's text to plain data, remembering the keys a mapping writes twice.

Upstream decodes a config file strictly first, and a key written twice fails that
decoding as an unknown one does. This kubelet refuses both, naming the field, so a file
never silently means one of two values; every mapping is therefore read as ``Fields``,
which keeps the repeated keys for the decoder (``wire``) to report with their paths.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import yaml

from kubelet.boundedio import (
    DocumentRefused,
    check_json_cost,
    measure_json,
    measure_yaml,
    too_deep,
)
from kubelet.errors import ConfigError


class Fields(dict[Any, Any]):
    """One mapping as written; ``repeated`` is (key, line) for each key written again
    (line 0 when the parser does not say: JSON)."""

    repeated: tuple[tuple[str, int], ...] = ()


def repeated_message(line: int) -> str:
    """The problem for a key written twice, with where when the parser says."""
    return "duplicate field" + (f" (written again on line {line})" if line else "")


MAX_NODES = 100_000
"""Values, lists and maps a config file may have, each YAML alias counted as what it
expands to (a KubeletConfiguration has a few hundred): an alias bomb is refused after a
few events instead of hanging the start."""

MAX_DEPTH = 100
"""Levels of nesting a config file may have (a KubeletConfiguration needs about 5)."""


def parse_document(text: str, source: str) -> Any:
    """JSON when the text starts with ``{``, else YAML; ``ConfigError`` on bad syntax and
    on a document past ``MAX_NODES`` or ``MAX_DEPTH``, measured before it is built."""
    try:
        if text.lstrip().startswith("{"):
            return _parse_json(text, source)
        return _parse_yaml(text, source)
    except DocumentRefused as exc:
        where = f" (line {exc.line})" if exc.line else ""
        raise ConfigError.single(source, "", f"{exc.reason}{where}") from None


def _parse_json(text: str, source: str) -> Any:
    check_json_cost(text, max_nodes=MAX_NODES, what="config file")
    try:
        data = json.loads(text, object_pairs_hook=_json_fields)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ConfigError.single(source, "", f"invalid JSON at {where}: {exc.msg}") from None
    except RecursionError:
        raise DocumentRefused(too_deep(MAX_DEPTH)) from None
    measure_json(data, max_nodes=MAX_NODES, max_depth=MAX_DEPTH, what="config file")
    return data


def _parse_yaml(text: str, source: str) -> Any:
    try:
        counter = _Loader(text)
        try:
            measure_yaml(counter, max_nodes=MAX_NODES, max_depth=MAX_DEPTH, what="config file")
        finally:
            counter.dispose()
        return yaml.load(text, Loader=_Loader)  # a SafeLoader: plain data only
    except yaml.YAMLError as exc:
        raise ConfigError.single(
            source, "", f"invalid YAML: {' '.join(str(exc).split())}"
        ) from None


def _again(keys: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    seen: set[str] = set()
    found = []
    for key, line in keys:
        if key in seen:
            found.append((key, line))
        seen.add(key)
    return tuple(found)


def _json_fields(pairs: list[tuple[str, Any]]) -> Fields:
    data = Fields(pairs)
    data.repeated = _again((key, 0) for key, _ in pairs)
    return data


class _Loader(yaml.CSafeLoader):
    """LibYAML's parser and PyYAML's safe constructor, building every mapping as
    ``Fields``."""


_MERGE = "tag:yaml.org,2002:merge"


def _construct_fields(loader: _Loader, node: yaml.MappingNode) -> Iterator[Fields]:
    data = Fields()
    yield data
    own = [
        (str(loader.construct_object(k)), k.start_mark.line + 1)
        for k, _ in node.value
        if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE
    ]
    data.update(loader.construct_mapping(node))
    data.repeated = _again(own)


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_fields)
