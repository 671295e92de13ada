"""``$(VAR)`` references, expanded as upstream's ``expansion.Expand`` does.

Used for a container's env, command and args, for probes and hooks, and for
``subPathExpr``.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["expand_env"]


def expand_env(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: unknown references stay as written, ``$$`` is ``$``."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char != "$" or i + 1 >= n:
            out.append(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = text.find(")", i + 2)
            if end == -1:  # unterminated: "$(" kept, scanning goes on after it
                out.append("$(")
                i += 2
                continue
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)
