"""The one error a manifest can give: where it is, and what is wrong, in one line."""

from __future__ import annotations

MAX_REASON = 2048
"""Characters of a reason kept in full; a longer one (a 9 MiB name quoted back) keeps its
start and its end, which say what is wrong, so one log line stays one readable line."""


def shorten(text: str, most: int = MAX_REASON) -> str:
    """``text`` itself, or its first and last parts with how much was left out between."""
    if len(text) <= most:
        return text
    head, tail = most * 2 // 3, most // 3
    omitted = len(text) - head - tail
    return f"{text[:head]}…({omitted} characters omitted)…{text[-tail:]}"


class ManifestError(ValueError):
    """A manifest that cannot become a pod: ``<path>:<line>: <reason>``.

    For a URL the line reads ``<url> (line <n>): <reason>``.
    """

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        reason = shorten(reason)
        if not line:
            where = path
        elif "://" in path:  # "http://host:8080/pods:12" would read as a port
            where = f"{path} (line {line})"
        else:
            where = f"{path}:{line}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason
