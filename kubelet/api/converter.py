"""The one cattrs converter between wire JSON (camelCase) and our attrs objects.

Rules, so every object behaves the same:
* Python names are snake_case; the wire name is camelCase with Kubernetes' acronyms
  (``host_ip`` → ``hostIP``, ``container_id`` → ``containerID``); a field may name its
  wire form explicitly with ``metadata={"wire": ...}`` (``continue_`` → ``continue``).
* Unknown keys are ignored (newer API servers add fields).
* Unstructuring omits None, empty strings and empty collections (Go's ``omitempty``);
  zeros and False are kept, and so is an empty value in a field whose default is None
  (a Go pointer: ``emptyDir: {}`` means "an emptyDir", not "nothing").
* Scalars are checked: a string field takes a string (numbers and booleans are turned
  into strings, as the upstream YAML decoder does for string targets), an int field an
  int, a bool field a bool. A wrong type raises ``WireError`` naming the field path.
  ``strict_strings_converter`` refuses a number or boolean in a string field too, as
  upstream's strict decoding of a config file does; a map's keys stay lenient there, as
  YAML-to-JSON turns them into strings.
"""

from __future__ import annotations

import collections.abc
import functools
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_unstructure_fn, override

T = TypeVar("T")

_ACRONYMS = {
    "id": "ID",
    "ip": "IP",
    "ips": "IPs",
    "pid": "PID",
    "ipc": "IPC",
    "uid": "UID",
    "url": "URL",
    "cidr": "CIDR",
    "cidrs": "CIDRs",
    "uuid": "UUID",
    "dns": "DNS",
    "tls": "TLS",
}


class WireError(ValueError):
    """An object could not be read from its wire form; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


def wire_name(field: attrs.Attribute) -> str:  # type: ignore[type-arg]
    """The JSON key of an attrs field."""
    explicit = field.metadata.get("wire")
    if explicit:
        return str(explicit)
    first, *rest = field.name.rstrip("_").split("_")
    return first + "".join(_ACRONYMS.get(word, word.capitalize()) for word in rest)


def _scalar_str(value: Any, _: type) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise WireError("", f"expected a string, got {type(value).__name__}")


def _only_str(value: Any, _: type) -> str:
    if isinstance(value, str):
        return value
    hint = " (quote it to make it a string)" if isinstance(value, bool | int | float) else ""
    raise WireError("", f"expected a string, got {type(value).__name__} {value!r}{hint}")


def _strict_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WireError("", f"expected an integer, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise WireError("", f"expected an integer, got {value!r}")
    return int(value)


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise WireError("", f"expected a boolean, got {type(value).__name__} {value!r}")
    return value


def _int_or_str(value: Any, _: type) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise WireError("", f"expected an integer or a string, got {type(value).__name__}")
    return value


def _any(value: Any, _: type) -> Any:
    return value


def _is_empty(value: Any) -> bool:
    """Go's omitempty for what we write: None, "" and empty collections (not 0/False)."""
    return value is None or (isinstance(value, str | list | tuple | dict) and not value)


def _join(prefix: str, path: str) -> str:
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def _make_converter(*, strict_strings: bool = False) -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=False)
    conv.register_structure_hook(str, _only_str if strict_strings else _scalar_str)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook(typing.Any, _any)
    conv.register_structure_hook(int | str, _int_or_str)
    conv.register_unstructure_hook(int | str, lambda v: v)
    conv.register_structure_hook_factory(attrs.has, functools.partial(_structure_attrs, conv))
    conv.register_structure_hook_factory(
        _is_homogeneous_tuple, functools.partial(_structure_tuple, conv)
    )
    conv.register_structure_hook_factory(_is_mapping, functools.partial(_structure_mapping, conv))
    conv.register_unstructure_hook_factory(attrs.has, functools.partial(_unstructure_attrs, conv))
    conv.register_unstructure_hook_factory(_is_homogeneous_tuple, lambda _: _unstructure_seq(conv))
    return conv


def _structure_attrs(conv: cattrs.Converter, cls: type) -> Any:
    fields = [
        (f.name, wire_name(f), f.type, f.default is attrs.NOTHING)
        for f in attrs.fields(attrs.resolve_types(cls))
    ]

    def structure(value: Any, _: type) -> Any:
        if not isinstance(value, Mapping):
            raise WireError("", f"expected an object, got {type(value).__name__}")
        kwargs = {}
        for name, wire, typ, required in fields:
            raw = value.get(wire)
            if raw is None:
                if required:
                    raise WireError(wire, "required value")
                continue
            try:
                kwargs[name] = conv.structure(raw, typ)
            except WireError as exc:
                raise WireError(_join(wire, exc.path), exc.message) from None
        return cls(**kwargs)

    return structure


def _structure_tuple(conv: cattrs.Converter, tp: type) -> Any:
    args = typing.get_args(tp)
    item = args[0]

    def structure(value: Any, _: type) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise WireError("", f"expected a list, got {type(value).__name__}")
        out = []
        for i, raw in enumerate(value):
            try:
                out.append(conv.structure(raw, item))
            except WireError as exc:
                raise WireError(_join(f"[{i}]", exc.path), exc.message) from None
        return tuple(out)

    return structure


def _structure_mapping(conv: cattrs.Converter, tp: type) -> Any:
    key_type, value_type = typing.get_args(tp)

    def structure(value: Any, _: type) -> dict[Any, Any]:
        if not isinstance(value, Mapping):
            raise WireError("", f"expected an object, got {type(value).__name__}")
        out = {}
        for key, raw in value.items():
            try:
                name = _scalar_str(key, str) if key_type is str else conv.structure(key, key_type)
                out[name] = conv.structure(raw, value_type)
            except WireError as exc:
                raise WireError(_join(f"[{key}]", exc.path), exc.message) from None
        return out

    return structure


def _unstructure_attrs(conv: cattrs.Converter, cls: type) -> Any:
    fields = attrs.fields(cls)
    overrides = {f.name: override(rename=wire_name(f)) for f in fields}
    inner: Any = make_dict_unstructure_fn(cls, conv, **overrides)  # type: ignore[arg-type]
    # A field whose default is None is a Go pointer: only nil is omitted, so a set but
    # empty value (``emptyDir: {}``) survives. Other fields drop their empty values.
    pointer_like = {wire_name(f) for f in fields if f.default is None}

    def unstructure(obj: Any) -> dict[str, Any]:
        # _is_empty inlined: most fields of an object are empty, and this runs for every
        # object a pod is made of (a static pod's UID hashes its whole wire form)
        return {
            k: v
            for k, v in inner(obj).items()
            if v is not None
            and (k in pointer_like or v or not isinstance(v, str | list | tuple | dict))
        }

    return unstructure


def _is_homogeneous_tuple(tp: Any) -> bool:
    args = typing.get_args(tp)
    return typing.get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis


def _is_mapping(tp: Any) -> bool:
    return typing.get_origin(tp) in (dict, Mapping, collections.abc.Mapping)


def _unstructure_seq(conv: cattrs.Converter) -> Any:
    def unstructure(value: Any) -> list[Any]:
        return [conv.unstructure(v) for v in value] if value else []

    return unstructure


converter = _make_converter()
strict_strings_converter = _make_converter(strict_strings=True)


def from_wire(cls: type[T], data: Any, *, strict_strings: bool = False) -> T:
    """Build ``cls`` from decoded JSON/YAML; ``WireError`` names the bad field.
    ``strict_strings``: a number or boolean in a string field is an error, not text."""
    conv = strict_strings_converter if strict_strings else converter
    try:
        return conv.structure(data, cls)
    except WireError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise WireError("", str(exc)) from exc


def to_wire(obj: Any) -> Any:
    """The JSON-ready form of an object (camelCase keys, empty fields omitted)."""
    return converter.unstructure(obj)
