"""Whether an object from a list or a watch can be used at all, decided once for every
consumer.

The API server's answers are outside data: a broken or hostile server (or a proxy in
between) can send an object whose ``metadata`` is a string, a name of megabytes that
would overflow the URL of the next request about it, or a resourceVersion that would
overflow the next watch's. Upstream's decoder fails such an object, logs it and goes on;
so does the client here, before any consumer (pods, the node, Services, RuntimeClasses,
certificate requests) sees it. What a kind adds (a pod's name is a DNS-1123 subdomain)
is its decoder's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .dnsname import LABEL_MAX_LENGTH, LABEL_RE, SUBDOMAIN_MAX_LENGTH

__all__ = ["MAX_TOKEN_LENGTH", "describe", "object_problem", "shorten"]

MAX_TOKEN_LENGTH = 1024
"""Characters of a resourceVersion or continue token the client carries into its next
request (etcd's revisions are decimal numbers; the API server's tokens a few hundred)."""

_STRING_FIELDS = ("name", "generateName", "namespace", "uid", "resourceVersion")
_MAPS = ("metadata", "spec", "status")


def shorten(text: str, most: int = 120) -> str:
    """``text`` for a log line: its start, and how long it was when that is not all."""
    return text if len(text) <= most else f"{text[:most]}…({len(text)} characters)"


def describe(obj: Any) -> str:
    """``namespace/name`` of an object for a log line, whatever its shape."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return "an object without metadata"
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    name = shorten(str(name))  # each part shortened first: a name may be megabytes
    return f"{shorten(str(namespace))}/{name}" if namespace else name


def _name_problem(name: str) -> str | None:
    """Upstream's ``IsValidPathSegmentName`` and the longest name any kind has."""
    if len(name) > SUBDOMAIN_MAX_LENGTH:
        return f"metadata.name is {len(name)} characters, more than {SUBDOMAIN_MAX_LENGTH}"
    if name in (".", "..") or "/" in name or "%" in name:
        return f"metadata.name {shorten(name)!r} cannot be a path segment"
    return None


def _meta_problem(meta: Mapping[str, Any]) -> str | None:
    for key in _STRING_FIELDS:
        if key in meta and not isinstance(meta[key], str):
            return f"metadata.{key} is a {type(meta[key]).__name__}, not a string"
    name, namespace = meta.get("name", ""), meta.get("namespace", "")
    problem = _name_problem(name)
    if problem is not None:
        return problem
    if namespace and (len(namespace) > LABEL_MAX_LENGTH or not LABEL_RE.fullmatch(namespace)):
        return f"metadata.namespace {shorten(namespace)!r} is not a DNS-1123 label"
    for key in ("uid", "resourceVersion"):
        if len(meta.get(key, "")) > MAX_TOKEN_LENGTH:
            return f"metadata.{key} is more than {MAX_TOKEN_LENGTH} characters"
    return None


def object_problem(obj: Any) -> str | None:
    """Why ``obj`` cannot be an item of a list or the object of a watch event, or None:
    not a JSON object; ``metadata``, ``spec`` or ``status`` not an object; a name, namespace,
    uid or resourceVersion that is not a string, or could not be sent back in a URL."""
    if not isinstance(obj, Mapping):
        return f"a {type(obj).__name__}, not an object"
    for key in _MAPS:
        value = obj.get(key)
        if value is not None and not isinstance(value, Mapping):
            return f"{key} is a {type(value).__name__}, not an object"
    meta = obj.get("metadata")
    return _meta_problem(meta) if meta is not None else None
