"""Label and field selectors, parsed and matched as the API server does.

Labels: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x,y)``, ``a`` (exists),
``!a`` (does not exist), ``a>1``, ``a<1``, comma-separated and all required. ``!=`` and
``notin`` also match objects without the label, as upstream.

Fields: ``path=value``, ``path==value``, ``path!=value`` on the field labels a resource
supports (``metadata.name``, ``spec.nodeName``...); any other label is a 400, as upstream
("field label not supported"). A missing field reads as "" (so ``spec.nodeName=`` finds
unscheduled pods) and booleans as "true"/"false".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .apierrors import StatusError

__all__ = ["Matcher", "field_selector", "label_selector"]

Matcher = Callable[[Mapping[str, Any]], bool]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^)]*)\)$")
_EQ = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_CMP = re.compile(rf"^({_KEY})\s*([<>])\s*(-?[0-9]+)$")
_EXISTS = re.compile(rf"^(!?)\s*({_KEY})$")
_FALSE_IF_MISSING = {"spec.hostNetwork", "spec.unschedulable"}


def _split(text: str) -> list[str]:
    """Split on commas that are not inside a parenthesised value set."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts]


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, dict) else {}


def _requirement(text: str) -> Matcher:
    if m := _SET.match(text):
        key, op, raw = m.groups()
        values = {v.strip() for v in raw.split(",")}
        if op == "in":
            return lambda o: key in _labels(o) and _labels(o)[key] in values
        return lambda o: key not in _labels(o) or _labels(o)[key] not in values
    if m := _EQ.match(text):
        key, op, value = m.groups()
        if op == "!=":
            return lambda o: _labels(o).get(key) != value
        return lambda o: _labels(o).get(key) == value
    if m := _CMP.match(text):
        key, op, number = m.groups()
        bound = int(number)

        def compare(o: Mapping[str, Any]) -> bool:
            try:
                have = int(_labels(o)[key])
            except (KeyError, ValueError):
                return False
            return have > bound if op == ">" else have < bound

        return compare
    if m := _EXISTS.match(text):
        negated, key = m.groups()
        if negated:
            return lambda o: key not in _labels(o)
        return lambda o: key in _labels(o)
    raise StatusError.bad_request(f"unable to parse requirement: {text!r}")


def _all(matchers: Iterable[Matcher]) -> Matcher:
    found = list(matchers)
    return lambda o: all(m(o) for m in found)


def label_selector(text: str | None) -> Matcher:
    """A matcher for ``labelSelector``; empty matches everything. Raises StatusError 400."""
    if not text or not text.strip():
        return lambda o: True
    return _all(_requirement(part) for part in _split(text))


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string a field selector compares: "" when missing, "true"/"false" for bools."""
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        return "false" if path in _FALSE_IF_MISSING else ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _split_fields(text: str) -> list[str]:
    return [p for p in re.split(r"(?<!\\),", text) if p.strip()]


def _field_term(path: str, value: str, *, negated: bool) -> Matcher:
    def match(obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, path) == value) != negated

    return match


def field_selector(text: str | None, supported: Iterable[str]) -> Matcher:
    """A matcher for ``fieldSelector`` over the ``supported`` field labels."""
    if not text or not text.strip():
        return lambda o: True
    allowed = set(supported)
    matchers: list[Matcher] = []
    for term in _split_fields(text):
        m = re.match(r"^\s*([^!=]+?)\s*(==|=|!=)(.*)$", term)
        if m is None:
            raise StatusError.bad_request(f"invalid selector: {term!r}; can't understand {term!r}")
        path, op, raw = m.group(1), m.group(2), _unescape(m.group(3).strip())
        if path not in allowed:
            raise StatusError.bad_request(f"field label not supported: {path}")
        matchers.append(_field_term(path, raw, negated=op == "!="))
    return _all(matchers)
