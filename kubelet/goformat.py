"""Go's ways of printing values, where users read or grep for them: ``%q``, times, durations.

Messages the kubelet shares with upstream (events, waiting reasons, probe output) are
written as Go writes them; these helpers are the one place that knows how. So is the
checksum upstream's checkpoints and container hashes share (``spew_checksum``).
"""

from __future__ import annotations

import datetime
import functools
import json
from typing import Any

__all__ = [
    "format_duration",
    "format_duration_ns",
    "go_duration_ms",
    "go_json",
    "go_quote",
    "parse_rfc3339",
    "parse_time",
    "parse_zoned_time",
    "rfc3339",
    "spew_checksum",
]


_GO_ESCAPES = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n"}
_GO_ESCAPES |= {"\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """A string as Go's ``%q`` writes it: the one quoting of user text in messages,
    label and annotation maps, paths."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
_JSON_ESCAPES |= {"\u2028": "\\u2028", "\u2029": "\\u2029"}


def go_json(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON as Go's ``json.Marshal`` writes it: HTML characters and the two line
    separators escaped, other text as it is. ``sort_keys``: a Go map's (sorted) order."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys)
    for char, escape in _JSON_ESCAPES.items():
        text = text.replace(char, escape)
    return text


_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def spew_checksum(rendered: str) -> int:
    """Upstream's checksum (``hashutil.DeepHashObject`` into FNV-32a, the value of
    ``checkpointmanager/checksum.New``) of a Go value, given as go-spew's ``%#v``
    rendering of it: the type in parentheses, then the value, strings as they are
    (unquoted), map keys sorted, nil slices and maps ``<nil>``. A ``string`` ``s``
    renders ``"(string)" + s``; a ``[]byte`` ``"([]uint8)[" + decimal bytes + "]"``."""
    h = _FNV32_OFFSET
    for byte in rendered.encode("utf-8"):
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


_MICROSECOND = 1000
_MILLISECOND = 1000 * _MICROSECOND
_SECOND = 1000 * _MILLISECOND


def format_duration_ns(ns: int) -> str:
    """Go's ``Duration.String``: "1h0m0s", "1m30s", "1.5s", "300ms", "0s"."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < _MICROSECOND:
        return f"{sign}{u}ns"
    if u < _MILLISECOND:
        return f"{sign}{_with_fraction(u, 3)}µs"
    if u < _SECOND:
        return f"{sign}{_with_fraction(u, 6)}ms"
    whole_seconds = u // _SECOND
    text = f"{whole_seconds % 60}{_fraction_digits(u % _SECOND, 9)}s"
    minutes = whole_seconds // 60
    if minutes:
        text = f"{minutes % 60}m{text}"
        hours = minutes // 60
        if hours:
            text = f"{hours}h{text}"
    return sign + text


def format_duration(seconds: float) -> str:
    """Seconds as Go's ``Duration.String`` prints them ("1m30s" for 90, "1m30.5s" for
    90.5): the one writer of durations in messages, flags and the config file."""
    return format_duration_ns(round(seconds * _SECOND))


def _fraction_digits(remainder: int, precision: int) -> str:
    """ ".5" for 500000000 at precision 9; "" when there is no fraction."""
    digits = str(remainder).rjust(precision, "0").rstrip("0")
    return f".{digits}" if digits else ""


def _with_fraction(value: int, precision: int) -> str:
    scale = 10**precision
    return f"{value // scale}{_fraction_digits(value % scale, precision)}"


def go_duration_ms(seconds: float) -> str:
    """A duration truncated to the millisecond as Go prints it (``567ms``, ``1.234s``,
    ``2m3.4s``, ``0s``): upstream's ``d.Truncate(time.Millisecond)`` in a message."""
    return format_duration_ns(max(int(seconds * 1000), 0) * _MILLISECOND)


def rfc3339(seconds: float) -> str:
    """A time as the API writes ``metav1.Time``: RFC 3339, whole seconds, UTC."""
    return _rfc3339(int(seconds))


@functools.lru_cache(maxsize=4096)
def _rfc3339(seconds: int) -> str:
    """Cached: the summary alone formats a few "now"s and each container's start, five
    times per pod and pass (2 µs each; a cache hit is 0.05 µs)."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.lru_cache(maxsize=256)
def parse_time(text: str | None) -> float | None:
    """An RFC 3339 time, with or without a fraction (``config.seen``'s microseconds, the
    API's whole seconds), to seconds since the epoch (UTC when no zone is given); None
    when unset or not a time. Cached: a stats summary's stamps are mostly the same few."""
    moment = parse_zoned_time(text, default_zone=datetime.UTC)
    return None if moment is None else moment.timestamp()


def parse_zoned_time(
    text: str | None, *, default_zone: datetime.tzinfo | None = None
) -> datetime.datetime | None:
    """An RFC 3339 time as an aware datetime; without a zone in ``text``, ``default_zone``
    or (when that is None) no time at all. None when unset or not a time."""
    if not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        if default_zone is None:
            return None
        moment = moment.replace(tzinfo=default_zone)
    return moment


def parse_rfc3339(text: str) -> float | None:
    """``rfc3339``'s form back to seconds since the epoch; None when it is not that form."""
    try:
        moment = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return moment.replace(tzinfo=datetime.UTC).timestamp()
