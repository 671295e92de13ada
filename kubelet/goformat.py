"""Go's ways of printing values, where users read or grep for them: ``%q``, durations.

Messages the kubelet shares with upstream (events, waiting reasons, probe output) are
written as Go writes them; these helpers are the one place that knows how.
"""

from __future__ import annotations

import json

__all__ = ["go_duration", "go_quote"]


def go_quote(text: str) -> str:
    """A double-quoted string as Go's ``%q`` writes it (close enough for messages)."""
    return json.dumps(text, ensure_ascii=False)


def go_duration(seconds: float) -> str:
    """A whole-second duration as Go prints ``time.Duration`` (``1s``, ``1m30s``)."""
    whole = int(seconds)
    if whole != seconds or whole < 60:
        return f"{seconds:g}s"
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{hours}h" if hours else ""
    return f"{text}{minutes}m{secs}s"
