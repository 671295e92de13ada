"""Field metadata for configuration classes: how a field is spelled and read on the wire.

Kept apart from the classes so the decoder, encoder and validator agree on one vocabulary.
"""

from __future__ import annotations

from typing import Any

import attrs

from kubelet.api import wire_name

WIRE = "wire"
DURATION = "duration"
"""A Go duration string on the wire ("20s"); float seconds in Python."""
NANOS_OK = "nanos_ok"
"""A duration that may also be written as an integer of nanoseconds (``flushFrequency``)."""
ZERO_UNSET = "zero_unset"
"""Upstream replaces a zero value with the default (a non-pointer Go field): "0s" means 1m."""


def meta(
    *,
    wire: str | None = None,
    duration: bool = False,
    nanos_ok: bool = False,
    zero_unset: bool = False,
) -> dict[str, Any]:
    """The metadata dict for ``attrs.field(metadata=...)``."""
    out: dict[str, Any] = {}
    if wire:
        out[WIRE] = wire
    if duration or nanos_ok:
        out[DURATION] = True
    if nanos_ok:
        out[NANOS_OK] = True
    if zero_unset:
        out[ZERO_UNSET] = True
    return out


def is_duration(field: attrs.Attribute) -> bool:  # type: ignore[type-arg]
    """Whether the field holds seconds read from a Go duration."""
    return bool(field.metadata.get(DURATION))


def key(field: attrs.Attribute) -> str:  # type: ignore[type-arg]
    """The field's key in the config file (the project's camelCase rule, or its override)."""
    return wire_name(field)


def get_by_wire_path(obj: Any, wire_path: tuple[str, ...]) -> Any:
    """The value at a wire path such as ("authentication", "x509", "clientCAFile")."""
    for name in wire_path:
        obj = getattr(obj, _attr_name(type(obj), name))
    return obj


def set_by_wire_path(obj: Any, wire_path: tuple[str, ...], value: Any) -> Any:
    """A copy of frozen ``obj`` with the value at ``wire_path`` replaced."""
    name = _attr_name(type(obj), wire_path[0])
    if len(wire_path) > 1:
        value = set_by_wire_path(getattr(obj, name), wire_path[1:], value)
    return attrs.evolve(obj, **{name: value})


def _attr_name(cls: type, wire: str) -> str:
    for field in attrs.fields(cls):
        if key(field) == wire:
            return str(field.name)
    raise KeyError(f"{cls.__name__} has no field {wire!r}")
