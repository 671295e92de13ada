"""Reading docker credential files: the ``.dockercfg`` and ``.dockerconfigjson`` formats.

A pull secret holds one of two JSON shapes: ``kubernetes.io/dockercfg`` is a map from
registry to entry, ``kubernetes.io/dockerconfigjson`` wraps that map in ``{"auths":
...}``. Each entry gives ``username`` and ``password``, or ``auth`` (base64 of
``username:password``, which then wins); ``email`` is kept only because upstream's
credential hash includes it. Other fields (``identitytoken``, ``registrytoken``...) are
ignored, as upstream's reader does. Keys match case-insensitively and a JSON ``null``
leaves a field empty, as Go's decoder does.

A malformed document raises ``DockerConfigError`` whose message names what is wrong and
never the content: it ends up in the kubelet's log.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["DockerConfigEntry", "DockerConfigError", "parse_dockercfg", "parse_dockerconfigjson"]


class DockerConfigError(ValueError):
    """The document is not a docker config; the message never quotes secret content."""


@attrs.frozen
class DockerConfigEntry:
    """One registry's credentials. Secret fields stay out of ``repr``."""

    username: str = attrs.field(default="", repr=False)
    password: str = attrs.field(default="", repr=False)
    email: str = attrs.field(default="", repr=False)


def parse_dockercfg(data: bytes) -> list[tuple[str, DockerConfigEntry]]:
    """``.dockercfg``: ``{"registry": {entry}, ...}`` → (registry key, entry) pairs."""
    return _entries(_load(data), "the document")


def parse_dockerconfigjson(data: bytes) -> list[tuple[str, DockerConfigEntry]]:
    """``.dockerconfigjson``: ``{"auths": {"registry": {entry}}}`` → (key, entry) pairs."""
    doc = _load(data)
    if doc is None:
        return []
    if not isinstance(doc, dict):
        raise DockerConfigError(f"expected a JSON object, got {_kind(doc)}")
    headers = _field(doc, "HttpHeaders")
    if headers is not None and (
        not isinstance(headers, dict)
        or not all(isinstance(v, str) or v is None for v in headers.values())
    ):
        raise DockerConfigError("HttpHeaders: expected an object of strings")
    return _entries(_field(doc, "auths"), "auths")


def _load(data: bytes) -> Any:
    # Go's decoder replaces invalid UTF-8 rather than failing
    try:
        return json.loads(data.decode("utf-8", errors="replace"))
    except ValueError:
        raise DockerConfigError("not valid JSON") from None


def _entries(doc: Any, where: str) -> list[tuple[str, DockerConfigEntry]]:
    if doc is None:
        return []
    if not isinstance(doc, dict):
        raise DockerConfigError(f"{where}: expected a JSON object, got {_kind(doc)}")
    return [(str(key), _entry(value, safe_key(str(key)))) for key, value in doc.items()]


def _entry(value: Any, key: str) -> DockerConfigEntry:
    if value is None:
        return DockerConfigEntry()
    if not isinstance(value, dict):
        raise DockerConfigError(f"entry {key!r}: expected a JSON object, got {_kind(value)}")
    fields = {}
    for name in ("username", "password", "email", "auth"):
        found = _field(value, name)
        if found is not None and not isinstance(found, str):
            raise DockerConfigError(f"entry {key!r}: {name}: expected a string, got {_kind(found)}")
        fields[name] = found or ""
    if fields["auth"]:
        username, password = _decode_auth(fields["auth"], key)
    else:
        username, password = fields["username"], fields["password"]
    return DockerConfigEntry(username, password, fields["email"])


def _decode_auth(field: str, key: str) -> tuple[str, str]:
    """base64(``username:password``), padded or not, as upstream accepts it."""
    text = field.replace("\r", "").replace("\n", "")  # Go's decoder skips line breaks
    if field.strip().endswith("="):
        padded = text
    else:
        if len(text) % 4 == 1 or "=" in text:
            raise DockerConfigError(f"entry {key!r}: auth is not valid base64")
        padded = text + "=" * (-len(text) % 4)
    try:
        decoded = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        raise DockerConfigError(f"entry {key!r}: auth is not valid base64") from None
    username, colon, password = decoded.decode("utf-8", errors="replace").partition(":")
    if not colon:
        raise DockerConfigError(
            f"entry {key!r}: unable to parse auth field, must be formatted as "
            "base64(username:password)"
        )
    return username, password


def _field(obj: Mapping[str, Any], name: str) -> Any:
    """The value of ``name`` matched case-insensitively, the last one winning (Go)."""
    found = None
    lowered = name.lower()
    for key, value in obj.items():
        if key.lower() == lowered:
            found = value
    return found


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else "null"


def safe_key(key: str) -> str:
    """A registry key fit for a log line: user information in a URL key is dropped."""
    scheme, sep, rest = key.partition("://")
    body = rest if sep else key
    authority, slash, path = body.partition("/")
    if "@" in authority:
        authority = "…@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{path}" if sep else f"{authority}{slash}{path}"
