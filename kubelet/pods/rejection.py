"""Why admission refused a pod: the one type every admission handler answers with."""

from __future__ import annotations

import attrs

__all__ = ["Rejection", "rejection_message"]


@attrs.frozen
class Rejection:
    """Why a pod was refused: a one-word reason and a message (upstream's words)."""

    reason: str
    message: str


def rejection_message(rejection: Rejection) -> str:
    """The pod status message of a rejected pod."""
    return f"Pod was rejected: {rejection.message}"
