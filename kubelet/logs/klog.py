"""klog's two output formats for stdlib log records: text and JSON.

Text, as klog writes it::

    I1121 10:00:00.000000    1234 podsync.py:42] "Started container" pod="default/web" n=1

The header is severity, ``mmdd hh:mm:ss.uuuuuu`` (local time), the process id right-aligned
in 7 columns, ``file:line``. The message is quoted (Go's ``strconv.Quote``) as klog's
structured calls do, then ``key=value`` pairs: strings quoted, numbers and booleans bare.

JSON, as component-base's ``--logging-format=json``::

    {"ts":1700560800000.123,"caller":"podsync.py:42","msg":"Started","v":0,"n":1}

``ts`` is milliseconds since the epoch; info lines carry their verbosity ``v``, error
lines an ``err`` field instead.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .fields import UID_VERBOSITY, ObjectRef, record_fields, record_verbosity


def severity(levelno: int) -> str:
    """klog's one-letter severity: I, W, E or F."""
    if levelno >= logging.CRITICAL:
        return "F"
    if levelno >= logging.ERROR:
        return "E"
    if levelno >= logging.WARNING:
        return "W"
    return "I"


def quote(text: str) -> str:
    """A double-quoted string with Go-like escapes (newlines stay on one line): what
    ``json.dumps(text, ensure_ascii=False)`` gives, without building an encoder a line."""
    return _encode_string(text)


_encode_string: Callable[[str], str] = json.encoder.encode_basestring


def format_value(value: Any) -> str:
    """One ``key=value`` value as klog's text format writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, BaseException):
        return quote(str(value))
    return quote(str(value))


def expand_fields(fields: Mapping[str, Any], verbosity: int) -> list[tuple[str, Any]]:
    """Fields in order, an ``ObjectRef`` under ``pod`` adding ``podUID`` at ``-v≥4``."""
    out: list[tuple[str, Any]] = []
    for key, value in fields.items():
        out.append((key, value))
        if isinstance(value, ObjectRef) and value.uid and verbosity >= UID_VERBOSITY:
            out.append((f"{key}UID", value.uid))
    return out


def header(record: logging.LogRecord) -> str:
    """``I1121 10:00:00.000000    1234 file.py:42] ``."""
    when = dt.datetime.fromtimestamp(record.created)
    return (
        f"{severity(record.levelno)}{_second(when)}.{when.microsecond:06d} "
        f"{record.process or os.getpid():7d} {_basename(record.pathname)}:{record.lineno}] "
    )


_last_second: tuple[dt.datetime, str] = (dt.datetime.min, "")


def _second(when: dt.datetime) -> str:
    """``mmdd hh:mm:ss`` of ``when``, formatted once a second (strftime is most of a
    line's header, and lines come in bursts)."""
    global _last_second
    whole = when.replace(microsecond=0)
    last, text = _last_second
    if whole != last:
        text = f"{whole:%m%d %H:%M:%S}"
        _last_second = (whole, text)
    return text


@functools.lru_cache(maxsize=1024)
def _basename(path: str) -> str:
    return os.path.basename(path)


def _error_of(record: logging.LogRecord) -> BaseException | None:
    if record.exc_info and record.exc_info[1] is not None:
        return record.exc_info[1]
    return None


class KlogTextFormatter(logging.Formatter):
    """klog's text format; a traceback, when there is one, follows on its own lines."""

    def __init__(self, verbosity: int = 0) -> None:
        super().__init__()
        self.verbosity = verbosity

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        parts = [header(record) + quote(message)]
        error = _error_of(record)
        if error is not None:
            parts.append(f"err={quote(f'{type(error).__name__}: {error}')}")
        parts.extend(f"{k}={format_value(v)}" for k, v in self._fields(record))
        line = " ".join(parts)
        if record.exc_info and self.verbosity >= UID_VERBOSITY:
            line += "\n" + self.formatException(record.exc_info)
        return line

    def _fields(self, record: logging.LogRecord) -> Iterable[tuple[str, Any]]:
        return expand_fields(record_fields(record), self.verbosity)


def _json_value(value: Any) -> Any:
    if isinstance(value, ObjectRef):
        out = {"name": value.name}
        if value.namespace:
            out["namespace"] = value.namespace
        return out
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return str(value)


class KlogJSONFormatter(logging.Formatter):
    """component-base's JSON format (one object per line)."""

    def __init__(self, verbosity: int = 0) -> None:
        super().__init__()
        self.verbosity = verbosity

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created * 1000.0, 3),
            "caller": f"{os.path.basename(record.pathname)}:{record.lineno}",
            "msg": record.getMessage(),
        }
        if record.levelno < logging.ERROR:
            out["v"] = record_verbosity(record.levelno)
        error = _error_of(record)
        if error is not None:
            out["err"] = f"{type(error).__name__}: {error}"
        for key, value in expand_fields(record_fields(record), self.verbosity):
            out[key] = _json_value(value)
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"))
