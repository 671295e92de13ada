"""``$(VAR)`` references, expanded as upstream's ``expansion.Expand`` does, with a bound.

Used for a container's env, command and args, for probes and hooks, and for
``subPathExpr``. A value may refer to an earlier one twice (``B=$(A)$(A)``), so a pod of a
few kilobytes can ask for values that double at every step: upstream has no explicit
bound (Go fails on its own, much later). Here one expanded value may be at most
``MAX_EXPANDED_VALUE`` characters and all of one container's at most
``MAX_EXPANDED_TOTAL``; expansion stops at the first character past either, so its work
is bounded by its input plus the bound. No running container can use more anyway: Linux
refuses an ``execve`` whose single variable passes 128 KiB or whose environment and
arguments together pass a quarter of the stack limit (2 MiB by default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = [
    "MAX_EXPANDED_TOTAL",
    "MAX_EXPANDED_VALUE",
    "OFFLOAD_REFERENCES",
    "ExpansionBudget",
    "ExpansionTooLarge",
    "expand_all",
    "expand_env",
]

MAX_EXPANDED_VALUE = 1 << 20
"""Characters one expanded value may have (1 Mi)."""

MAX_EXPANDED_TOTAL = 4 << 20
"""Characters all expanded values of one container (its env, or its command and args)
may have together (4 Mi)."""

OFFLOAD_REFERENCES = 4096
"""``$`` signs past which expanding one text is worth a worker thread: each costs a few
Python steps, the text between them is copied at C speed."""


class ExpansionTooLarge(ValueError):
    """Expanding would make a value, or a container's values together, too long."""


class ExpansionBudget:
    """The characters left for one container's expanded values."""

    def __init__(self, total: int = MAX_EXPANDED_TOTAL) -> None:
        self.total = total
        self.left = total

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise ExpansionTooLarge(
                f"the expanded values together would be longer than {self.total} characters"
            )


def expand_env(
    text: str,
    env: Mapping[str, str],
    *,
    limit: int = MAX_EXPANDED_VALUE,
    budget: ExpansionBudget | None = None,
) -> str:
    """Kubernetes ``$(VAR)`` expansion: unknown references stay as written, ``$$`` is ``$``.

    ``ExpansionTooLarge`` as soon as the result would pass ``limit`` characters or what
    is left of ``budget``.
    """
    most = limit if budget is None else min(limit, budget.left)
    if "$(" not in text:  # no reference: only "$$" to fold, left to right, at C speed
        folded = text.replace("$$", "$")
        if len(folded) > most:
            raise _too_large(limit, budget, len(folded))
        if budget is not None:
            budget.spend(len(folded))
        return folded
    out: list[str] = []
    size = i = 0
    n = len(text)
    while i < n:
        at = text.find("$", i)
        if at == -1 or at + 1 >= n:  # no reference left: the rest is literal
            piece, i = text[i:], n
        elif at > i:
            piece, i = text[i:at], at
        else:
            piece, i = _reference(text, i, env)
        size += len(piece)
        if size > most:
            raise _too_large(limit, budget, size)
        out.append(piece)
    if budget is not None:
        budget.spend(size)
    return "".join(out)


def _reference(text: str, i: int, env: Mapping[str, str]) -> tuple[str, int]:
    """What the ``$`` at ``i`` (not the last character) stands for, and where to go on."""
    nxt = text[i + 1]
    if nxt == "$":
        return "$", i + 2
    if nxt != "(":
        return "$" + nxt, i + 2
    end = text.find(")", i + 2)
    if end == -1:  # unterminated: "$(" kept, scanning goes on after it
        return "$(", i + 2
    name = text[i + 2 : end]
    return (env[name] if name in env else text[i : end + 1]), end + 1


def _too_large(limit: int, budget: ExpansionBudget | None, size: int) -> ExpansionTooLarge:
    if budget is not None and size > budget.left:
        return ExpansionTooLarge(
            f"the expanded values together would be longer than {budget.total} characters"
        )
    return ExpansionTooLarge(f"the expanded value would be longer than {limit} characters")


def expand_all(
    texts: Iterable[str], env: Mapping[str, str], budget: ExpansionBudget | None = None
) -> list[str]:
    """Each of ``texts`` expanded, all sharing one budget (a command, or its args)."""
    shared = budget if budget is not None else ExpansionBudget()
    return [expand_env(text, env, budget=shared) for text in texts]
