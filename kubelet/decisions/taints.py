"""Whether a pod tolerates a node's taints (upstream ``ToleratesTaint``): the one rule that
admission's taint check and eviction's memory-pressure admission both read."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from kubelet.api import Taint, Toleration

__all__ = ["tolerates", "untolerated_taint"]

_DECIMAL_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
_INT64 = 1 << 63


def _decimal(text: str) -> int | None:
    """A canonical decimal int64 (no sign but '-', no leading zeros), else None."""
    if not _DECIMAL_INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if -_INT64 <= value < _INT64 else None


def tolerates(toleration: Toleration, taint: Taint, *, comparison_operators: bool = False) -> bool:
    """Effect and key when set, then the operator (empty is Equal; Gt/Lt compare integers,
    only with the ``TaintTolerationComparisonOperators`` gate)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    op = toleration.operator
    if op in ("", "Equal"):
        return toleration.value == taint.value
    if op == "Exists":
        return True
    if op in ("Gt", "Lt") and comparison_operators:
        mine, theirs = _decimal(toleration.value), _decimal(taint.value)
        if mine is None or theirs is None:
            return False
        return theirs > mine if op == "Gt" else theirs < mine
    return False


def untolerated_taint(
    taints: Iterable[Taint],
    tolerations: Sequence[Toleration],
    *,
    effects: Iterable[str] = ("NoExecute",),
    comparison_operators: bool = False,
) -> Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates."""
    chosen = set(effects)
    for taint in taints:
        if taint.effect not in chosen:
            continue
        if not any(
            tolerates(t, taint, comparison_operators=comparison_operators) for t in tolerations
        ):
            return taint
    return None
