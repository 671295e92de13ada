"""Node selector terms (a required node affinity's, a PersistentVolume's) against a
node's labels and name: upstream's ``MatchNodeSelectorTerms`` for one term, where a
term the API would refuse matches no node."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubelet.api import is_qualified_name

__all__ = ["node_selector_term_matches", "node_selector_terms_match"]

_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = 1 << 63


class _ParseError(ValueError):
    """A node selector term the API would refuse: it matches no node."""


def _label_value_ok(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


def _go_int64(text: str) -> int | None:
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -_INT64 <= value < _INT64 else None


def _requirement(expr: Any) -> tuple[str, str, list[str]]:
    if not isinstance(expr, Mapping):
        raise _ParseError("not a requirement")
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if not isinstance(key, str) or not is_qualified_name(key):
        raise _ParseError(f"invalid key {key!r}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _ParseError("values must be strings")
    if op in ("In", "NotIn"):
        if not values:
            raise _ParseError("for 'in', 'notin' operators, values set can't be empty")
    elif op in ("Exists", "DoesNotExist"):
        if values:
            raise _ParseError("values set must be empty for exists and does not exist")
    elif op in ("Gt", "Lt"):
        if len(values) != 1 or _go_int64(values[0]) is None:
            raise _ParseError("for 'Gt', 'Lt' operators, exactly one integer value is required")
    else:
        raise _ParseError(f"unsupported operator {op!r}")
    if not all(_label_value_ok(v) for v in values):
        raise _ParseError("invalid label value")
    return key, str(op), list(values)


def _label_match(key: str, op: str, values: list[str], labels: Mapping[str, str]) -> bool:
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if not present:
        return False
    have, bound = _go_int64(labels[key]), _go_int64(values[0])
    if have is None or bound is None:
        return False
    return have > bound if op == "Gt" else have < bound


def _field_match(expr: Any, fields: Mapping[str, str]) -> bool:
    if not isinstance(expr, Mapping):
        raise _ParseError("not a requirement")
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op not in ("In", "NotIn"):
        raise _ParseError(f"unsupported operator {op!r}")
    if not isinstance(values, list) or len(values) != 1:
        raise _ParseError("must have one element")
    equal = fields.get(str(key), "") == values[0]
    return equal if op == "In" else not equal


def node_selector_term_matches(term: Any, labels: Mapping[str, str], node_name: str | None) -> bool:
    """One ``nodeSelectorTerm``: its label expressions and field expressions, ANDed; a
    term that does not parse matches nothing. ``node_name`` "" leaves the fields
    unjudged (the name is not known yet); None is a Node without a name, which no field
    expression matches (upstream's check of a PersistentVolume's affinity)."""
    if not isinstance(term, Mapping):
        return False
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        return False
    try:
        requirements = [_requirement(e) for e in expressions]
        field_results = [_field_match(f, {"metadata.name": node_name or ""}) for f in fields]
    except _ParseError:
        return False
    if not all(_label_match(k, op, v, labels) for k, op, v in requirements):
        return False
    # Fields are only judged when the node has a name to judge them by.
    return node_name == "" or all(field_results)


def node_selector_terms_match(terms: Any, labels: Mapping[str, str], node_name: str | None) -> bool:
    """A ``NodeSelector``'s terms, ORed; empty terms (or none) match nothing."""
    if not isinstance(terms, list):
        return False
    return any(
        node_selector_term_matches(term, labels, node_name)
        for term in terms
        if isinstance(term, Mapping) and (term.get("matchExpressions") or term.get("matchFields"))
    )
