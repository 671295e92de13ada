"""``/containerLogs`` query parameters: v1 ``PodLogOptions`` decoding and validation.

Decoding follows the API machinery's query conversion: a boolean is true unless its
value is ``0`` or ``false`` (so a bare ``?follow`` is true); an integer that does not
parse as an int64, as Go's ``strconv.ParseInt`` (so also one out of its range), fails the
request (400); an empty integer or time means "not set". ``tail`` is the
old name of ``tailLines`` and ``tail=all`` means no limit. Validation (422) rejects a
negative ``tailLines``, ``limitBytes`` or ``sinceSeconds`` below 1, and ``sinceSeconds``
together with ``sinceTime``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping

import attrs

from kubelet.goformat import parse_zoned_time

STREAMS = ("All", "Stdout", "Stderr")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_DECIMAL = re.compile(r"[+-]?[0-9]+")


class DecodeError(ValueError):
    """The query does not decode into PodLogOptions (400)."""


class InvalidOptions(ValueError):
    """The options decode but are not valid together (422)."""


@attrs.frozen
class LogOptions:
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    since_seconds: int | None = None
    since_time: dt.datetime | None = None
    stream: str = "All"

    def since_ns(self, now: float) -> int | None:
        """The earliest log time to show (ns since the epoch), the later of both bounds."""
        bounds: list[int] = []
        if self.since_seconds is not None:
            bounds.append(int((now - self.since_seconds) * 1e9))
        if self.since_time is not None:
            bounds.append(int(self.since_time.timestamp()) * 1_000_000_000)
        return max(bounds) if bounds else None


def _bool(values: list[str] | None) -> bool:
    if not values:
        return False
    return not (values[0] == "0" or values[0].lower() == "false")


def _int(values: list[str] | None, name: str) -> int | None:
    if not values or values[0] == "":
        return None
    text = values[0]
    if not _DECIMAL.fullmatch(text):  # Python's int() would also take "1_0", " 1", "١"
        raise DecodeError(f"{name}: {text[:40]!r} is not an integer")
    try:
        value = int(text, 10)
    except ValueError:  # more digits than Python parses (4300): out of range too
        value = INT64_MAX + 1
    if not INT64_MIN <= value <= INT64_MAX:
        raise DecodeError(f"{name}: {text[:40]!r} is out of range")
    return value


def _time(values: list[str] | None) -> dt.datetime | None:
    if not values or values[0] == "":
        return None
    parsed = parse_zoned_time(values[0])
    if parsed is None:
        if parse_zoned_time(values[0], default_zone=dt.UTC) is not None:
            raise DecodeError(f"sinceTime: {values[0]!r} has no time zone")
        raise DecodeError(f"sinceTime: {values[0]!r} is not an RFC3339 time")
    return parsed


def parse_log_options(query: Mapping[str, list[str]]) -> LogOptions:
    """Decode and validate; raises ``DecodeError`` (400) or ``InvalidOptions`` (422)."""
    params = dict(query)
    tail = params.get("tail")
    if tail and tail[0]:
        if tail[0] == "all":
            params.pop("tailLines", None)
        else:
            params["tailLines"] = tail
    stream = (params.get("stream") or ["All"])[0] or "All"
    options = LogOptions(
        follow=_bool(params.get("follow")),
        previous=_bool(params.get("previous")),
        timestamps=_bool(params.get("timestamps")),
        tail_lines=_int(params.get("tailLines"), "tailLines"),
        limit_bytes=_int(params.get("limitBytes"), "limitBytes"),
        since_seconds=_int(params.get("sinceSeconds"), "sinceSeconds"),
        since_time=_time(params.get("sinceTime")),
        stream=stream,
    )
    validate(options)
    return options


def validate(options: LogOptions) -> None:
    """upstream's ``ValidatePodLogOptions``."""
    problems: list[str] = []
    if options.tail_lines is not None and options.tail_lines < 0:
        problems.append("tailLines: must be greater than or equal to 0")
    if options.limit_bytes is not None and options.limit_bytes < 1:
        problems.append("limitBytes: must be greater than 0")
    if options.since_seconds is not None:
        if options.since_seconds < 1:
            problems.append("sinceSeconds: must be greater than 0")
        if options.since_time is not None:
            problems.append("at most one of `sinceTime` or `sinceSeconds` may be specified")
    if options.stream not in STREAMS:
        problems.append(f"stream: unsupported value {options.stream!r}")
    elif options.stream != "All" and options.tail_lines is not None:
        problems.append("tailLines: `tailLines` and specific `stream` are mutually exclusive")
    if problems:
        raise InvalidOptions("; ".join(problems))
