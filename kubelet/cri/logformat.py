"""The CRI container log format: ``<RFC3339Nano> <stdout|stderr> <P|F> <message>``.

Each line is one chunk of output; ``P`` marks a partial line continued by the next
chunk, ``F`` a full one. Runtimes write it, the kubelet reads it (``kubectl logs``).
"""

from __future__ import annotations

import datetime as dt

import attrs

STDOUT = "stdout"
STDERR = "stderr"
TAG_PARTIAL = "P"
TAG_FULL = "F"


def rfc3339nano(ns: int) -> str:
    """UTC timestamp with nanoseconds, trailing zeros dropped (Go's RFC3339Nano)."""
    seconds, frac = divmod(ns, 1_000_000_000)
    stamp = dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    digits = f"{frac:09d}".rstrip("0")
    return f"{stamp}.{digits}Z" if digits else f"{stamp}Z"


def parse_rfc3339nano(text: str) -> int:
    """Nanoseconds since the epoch from an RFC3339 timestamp with up to 9 fraction digits."""
    main, _, rest = text.partition(".")
    frac = ""
    tz = "Z"
    if rest:
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        frac, tz = rest[:i], rest[i:]
    else:
        for sep in ("Z", "+", "-"):
            idx = main.find(sep, 10)
            if idx != -1:
                main, tz = main[:idx], main[idx:]
                break
    offset = dt.UTC if tz in ("Z", "z", "") else dt.datetime.strptime(tz, "%z").tzinfo
    base = dt.datetime.strptime(main, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=offset)
    return int(base.timestamp()) * 1_000_000_000 + int((frac + "000000000")[:9])


def format_line(ns: int, stream: str, message: bytes, *, partial: bool = False) -> bytes:
    """One log line (newline included) for ``message`` (which carries no newline)."""
    tag = TAG_PARTIAL if partial else TAG_FULL
    return f"{rfc3339nano(ns)} {stream} {tag} ".encode() + message + b"\n"


@attrs.frozen
class LogLine:
    """A parsed line: when, which stream, whether partial, the bytes written."""

    ns: int
    stream: str
    partial: bool
    message: bytes


def parse_line(line: bytes) -> LogLine:
    """Parse one CRI log line (trailing newline optional); ValueError if malformed."""
    parts = line.rstrip(b"\n").split(b" ", 3)
    if len(parts) < 3:
        raise ValueError(f"not a CRI log line: {line[:80]!r}")
    stamp, stream, tag = parts[0].decode(), parts[1].decode(), parts[2].decode()
    if stream not in (STDOUT, STDERR) or tag not in (TAG_PARTIAL, TAG_FULL):
        raise ValueError(f"not a CRI log line: {line[:80]!r}")
    message = parts[3] if len(parts) == 4 else b""
    return LogLine(parse_rfc3339nano(stamp), stream, tag == TAG_PARTIAL, message)
