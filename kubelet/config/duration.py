"""Go's duration strings ("20s", "1m30s", "1.5h"), as the kubelet's config and flags use them.

Durations are parsed to whole nanoseconds first, exactly as Go does (integer units, the
fractional part truncated), so a value read from a file and written back is the same
string upstream would print. Callers get float seconds, which is what trio wants.
"""

from __future__ import annotations

from kubelet.goformat import format_duration, format_duration_ns

__all__ = ["format_duration", "format_duration_ns", "parse_duration", "parse_duration_ns"]

_NANOSECOND = 1
_MICROSECOND = 1000 * _NANOSECOND
_MILLISECOND = 1000 * _MICROSECOND
_SECOND = 1000 * _MILLISECOND
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE

_UNITS = {
    "ns": _NANOSECOND,
    "us": _MICROSECOND,
    "µs": _MICROSECOND,  # U+00B5 micro sign
    "μs": _MICROSECOND,  # U+03BC Greek small letter mu
    "ms": _MILLISECOND,
    "s": _SECOND,
    "m": _MINUTE,
    "h": _HOUR,
}
_MAX = (1 << 63) - 1  # Go's time.Duration is an int64 of nanoseconds
_DIGITS = "0123456789"


def parse_duration_ns(text: str) -> int:
    """Parse a Go duration string to nanoseconds; ``ValueError`` says what is wrong."""

    def invalid(why: str = "") -> ValueError:
        return ValueError(f'invalid duration "{text}"' + (f": {why}" if why else ""))

    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid()
    total = 0
    while rest:
        whole, rest = _take(rest, _DIGITS)
        fraction = ""
        if rest.startswith("."):
            fraction, rest = _take(rest[1:], _DIGITS)
        if not whole and not fraction:
            raise invalid()
        unit_name, rest = _take_until(rest, _DIGITS + ".")
        if not unit_name:
            raise invalid("missing unit")
        unit = _UNITS.get(unit_name)
        if unit is None:
            raise invalid(f'unknown unit "{unit_name}" (valid units: ns, us, µs, ms, s, m, h)')
        value = int(whole or "0")
        if value > _MAX // unit:
            raise invalid("out of range")
        value *= unit
        value += _fraction_ns(fraction, unit)
        total += value
        if total > _MAX + (1 if negative else 0):
            raise invalid("out of range")
    return -total if negative else total


def parse_duration(text: str) -> float:
    """Parse a Go duration string ("1m30s") to seconds."""
    return parse_duration_ns(text) / _SECOND


def _take(text: str, allowed: str) -> tuple[str, str]:
    """Split off the longest prefix made of ``allowed`` characters."""
    i = 0
    while i < len(text) and text[i] in allowed:
        i += 1
    return text[:i], text[i:]


def _take_until(text: str, stop: str) -> tuple[str, str]:
    """Split off the longest prefix containing none of the ``stop`` characters."""
    i = 0
    while i < len(text) and text[i] not in stop:
        i += 1
    return text[:i], text[i:]


def _fraction_ns(digits: str, unit: int) -> int:
    """The fractional part's nanoseconds, truncated the way Go computes it (in floats)."""
    if not digits:
        return 0
    value, scale = 0, 1
    for ch in digits:
        if value > _MAX // 10:  # Go stops reading digits that would overflow
            break
        value, scale = value * 10 + int(ch), scale * 10
    return int(float(value) * (float(unit) / scale))
