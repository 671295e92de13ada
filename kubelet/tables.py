"""Plain-text tables for the command-line tools (crictl-like output)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns, two spaces apart, like crictl's output."""
    lines = [list(header), *(list(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def age(created_ns: int, now: float | None = None) -> str:
    """How long ago ``created_ns`` was, compactly ("42s ago", "3h ago")."""
    if created_ns <= 0:
        return "-"
    seconds = max(0.0, (time.time() if now is None else now) - created_ns / 1e9)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{int(seconds)}s ago"
