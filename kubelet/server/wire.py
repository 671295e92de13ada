"""What the HTTP/1.1 and HTTP/2 connections share: the app type, broken-peer errors, headers."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable

import trio

from .asgi import Receive, Scope, Send

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

BROKEN = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
"""What a read or write raises when the peer is gone (TLS errors arrive as Broken)."""

HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"}
)
"""Connection-specific headers, which HTTP/2 forbids."""

_date_cache: tuple[int, bytes] = (0, b"")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(seconds: int) -> bytes:
    """RFC 9110's IMF-fixdate in English whatever the locale (what Go's ``http.TimeFormat``
    prints); the email package's ``formatdate`` says the same but loads a dozen modules."""
    t = time.gmtime(seconds)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    ).encode()


def date_header() -> bytes:
    """The ``Date`` header Go's server sends (``Mon, 02 Jan 2006 15:04:05 GMT``)."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, http_date(now))
    return _date_cache[1]


def response_headers(
    headers: Iterable[tuple[bytes | str, bytes | str]], *, http2: bool = False
) -> list[tuple[bytes, bytes]]:
    """An app's response headers as lower-case bytes (HTTP/2: hop-by-hop ones dropped)."""
    out: list[tuple[bytes, bytes]] = []
    for name, value in headers:
        key = (name.encode("latin-1") if isinstance(name, str) else bytes(name)).lower()
        if http2 and key in HOP_BY_HOP:
            continue
        out.append((key, value.encode("latin-1") if isinstance(value, str) else bytes(value)))
    return out
