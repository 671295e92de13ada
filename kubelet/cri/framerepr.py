"""A cheaper description of HTTP/2 frames, for h2's trace log that nobody reads.

h2 formats ``repr(frame)`` for every frame it receives, before its (no-op) logger is even
called. hyperframe describes a DATA frame by hexlifying its whole payload and keeping the
first 20 hex digits: for the PLEG's list answers (hundreds of KiB a second with 500 pods)
that was a few per cent of the kubelet's steady CPU. :func:`install` swaps in a version
that hexlifies only the bytes it shows; the text is the same.
"""

from __future__ import annotations

import binascii

from hyperframe import frame

_SHOWN = 10
"""Bytes hyperframe shows (20 hex digits); one more tells whether it adds "..."."""


def raw_data_repr(data: bytes | None) -> str:
    """hyperframe's ``_raw_data_repr``, reading at most ``_SHOWN + 1`` bytes."""
    if not data:
        return "None"
    shown = binascii.hexlify(data[: _SHOWN + 1]).decode("ascii")
    if len(shown) > 2 * _SHOWN:
        shown = shown[: 2 * _SHOWN] + "..."
    return "<hex:" + shown + ">"


def install() -> None:
    """Idempotent; hyperframe's frame classes look the function up at each call."""
    frame._raw_data_repr = raw_data_repr
