"""Configuration classes to and from their file form, strictly, with field paths.

Unlike API objects (kubelet.api.converter ignores unknown keys because newer servers add
fields), a config file is written by a person: an unknown key is reported, not dropped,
and so is a key written twice. Scalars, lists and maps are read by the project's
converter, so type errors read the same everywhere, with upstream's strict decoding of
strings: ``clusterDomain: off`` is a boolean, refused, not the text "false". This module
adds what config needs on top: Go durations, upstream's zero-means-default rule, and
telling upstream-only keys from typos.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import attrs

from kubelet.api import WireError, from_wire, to_wire

from .document import Fields, repeated_message
from .duration import format_duration, parse_duration, parse_duration_ns
from .fields import NANOS_OK, ZERO_UNSET, is_duration, key
from .upstream import UPSTREAM_FIELDS

T = TypeVar("T")

_Field = tuple["attrs.Attribute[Any]", str, Any]


@attrs.frozen
class Decoded(Generic[T]):
    """A decoded object and what the input said about it.

    ``present`` holds the paths the input set (zero values upstream treats as unset
    excluded), so later defaulting can ask "did the file set this?". ``ignored`` lists
    upstream-only keys with non-zero values and ``unmodelled`` their values as written;
    ``problems`` is (path, message) pairs.
    """

    value: T
    present: frozenset[str]
    ignored: tuple[str, ...]
    problems: tuple[tuple[str, str], ...]
    unmodelled: Mapping[str, Any] = attrs.field(factory=dict)


def decode(cls: type[T], data: Any) -> Decoded[T]:
    """Read ``cls`` from decoded YAML/JSON, collecting every problem instead of stopping."""
    reader = _Reader()
    value = reader.read_object(cls, data, "")
    return Decoded(
        value=value,
        present=frozenset(reader.present),
        ignored=tuple(reader.ignored),
        problems=tuple(reader.problems),
        unmodelled=dict(reader.unmodelled),
    )


def encode(obj: Any) -> dict[str, Any]:
    """The file form of a config object (durations as Go strings), e.g. for ``/configz``."""
    out: dict[str, Any] = {}
    for field, name, _ in _fields(type(obj)):
        value = getattr(obj, field.name)
        if value is None:
            continue
        if is_duration(field):
            out[name] = format_duration(value)
        elif attrs.has(type(value)):
            out[name] = encode(value)
        elif isinstance(value, Mapping):
            out[name] = {k: to_wire(v) for k, v in value.items()}
        else:
            out[name] = to_wire(value)
    return out


def join(path: str, name: str) -> str:
    """``a.b`` for fields, ``a[k]`` for map keys and list indexes."""
    if not path or not name:
        return path or name
    return path + name if name.startswith("[") else f"{path}.{name}"


def is_zero(value: Any) -> bool:
    """Go's zero value as written in a file: "", 0, "0s", empty, or made only of zeros."""
    if value is None:
        return True
    if isinstance(value, bool):
        return False  # false may differ from a true default; never hide it
    if isinstance(value, int | float):
        return value == 0
    if isinstance(value, str):
        return value == "" or _zero_duration(value)
    if isinstance(value, Mapping):
        return all(is_zero(v) for v in value.values())
    if isinstance(value, list | tuple):
        return not value
    return False


def _zero_duration(text: str) -> bool:
    try:
        return parse_duration_ns(text) == 0
    except ValueError:
        return False


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _fields(cls: type) -> tuple[_Field, ...]:
    """(field, file key, type without ``| None``) per field, resolved once per class."""
    found = _FIELDS.get(cls)
    if found is None:
        resolved = attrs.fields(attrs.resolve_types(cls))
        found = _FIELDS[cls] = tuple((f, key(f), _without_none(f.type)) for f in resolved)
    return found


def _without_none(tp: Any) -> Any:
    """``X | None`` → ``X``: absence is handled before a value is read."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


class _Bad:
    """Marks a value that could not be read (its problem is already recorded)."""


_BAD = _Bad()


class _Reader:
    def __init__(self) -> None:
        self.present: set[str] = set()
        self.ignored: list[str] = []
        self.unmodelled: dict[str, Any] = {}
        self.problems: list[tuple[str, str]] = []

    def read_object(self, cls: type[T], data: Any, path: str) -> T:
        if not isinstance(data, Mapping):
            self.problems.append((path, f"expected an object, got {_describe(data)}"))
            return cls()
        fields = _fields(cls)
        if isinstance(data, Fields):  # the fields' own values are checked as they are read
            self.problems += [(join(path, k), repeated_message(n)) for k, n in data.repeated]
        known = {name for _, name, _ in fields}
        upstream = UPSTREAM_FIELDS.get(cls, frozenset())
        for name, raw in data.items():
            if name in known:
                continue
            if name in upstream:
                self.problems.extend(_repeated_keys(Any, raw, join(path, str(name))))
                if not is_zero(raw):
                    self.ignored.append(join(path, str(name)))
                    self.unmodelled[join(path, str(name))] = raw
                continue
            hint = difflib.get_close_matches(str(name), sorted(known | upstream), n=1)
            message = "unknown field" + (f" (did you mean {hint[0]!r}?)" if hint else "")
            self.problems.append((join(path, str(name)), message))
        kwargs: dict[str, Any] = {}
        for field, name, tp in fields:
            raw = data.get(name)
            if raw is None:
                continue
            where = join(path, name)
            value = self._read_value(field, tp, raw, where)
            if value is _BAD or (field.metadata.get(ZERO_UNSET) and is_zero(value)):
                continue
            kwargs[field.name] = value
            self.present.add(where)
        return cls(**kwargs)

    def _read_value(self, field: attrs.Attribute[Any], tp: Any, raw: Any, path: str) -> Any:
        if is_duration(field):
            return self._read_duration(raw, path, nanos_ok=bool(field.metadata.get(NANOS_OK)))
        if attrs.has(tp):
            return self.read_object(tp, raw, path)
        self.problems.extend(_repeated_keys(tp, raw, path))
        try:
            return from_wire(tp, raw, strict_strings=True)
        except WireError as exc:
            self.problems.append((join(path, exc.path), exc.message))
            return _BAD

    def _read_duration(self, raw: Any, path: str, *, nanos_ok: bool) -> Any:
        if isinstance(raw, str):
            try:
                return parse_duration(raw)
            except ValueError as exc:
                self.problems.append((path, str(exc)))
                return _BAD
        if nanos_ok and isinstance(raw, int) and not isinstance(raw, bool):
            return raw / 1e9
        self.problems.append((path, f'expected a duration such as "20s", got {_describe(raw)}'))
        return _BAD


def _repeated_keys(tp: Any, raw: Any, path: str) -> list[tuple[str, str]]:
    """(path, problem) for each key written twice in ``raw`` (read as ``tp``) or below."""
    found: list[tuple[str, str]] = []
    if isinstance(raw, Fields):
        struct = attrs.has(tp)
        types = {name: inner for _, name, inner in _fields(tp)} if struct else {}
        for name, line in raw.repeated:
            found.append((join(path, name if struct else f"[{name}]"), repeated_message(line)))
        for name, value in raw.items():
            inner = types.get(name, Any) if struct else _inner(tp, 1)
            found += _repeated_keys(inner, value, join(path, name if struct else f"[{name}]"))
    elif isinstance(raw, list):
        for i, item in enumerate(raw):
            found += _repeated_keys(_inner(tp, 0), item, join(path, f"[{i}]"))
    return found


def _inner(tp: Any, index: int) -> Any:
    """The item type of ``tuple[X, ...]`` (index 0) or the value type of a mapping (1)."""
    args = typing.get_args(tp)
    return args[index] if len(args) == 2 and args[index] is not Ellipsis else Any


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"
