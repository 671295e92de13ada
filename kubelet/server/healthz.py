"""``/healthz``: named checks in the apiserver healthz format.

``/healthz`` runs every check and answers ``ok``, or with ``?verbose`` one line per
check (``[+]ping ok``) and ``healthz check passed``. Any failing check gives 500 with
the per-check lines (the reason withheld: the endpoint is public) and ``healthz check
failed``; ``?exclude=name`` skips a check. ``/healthz/<name>`` runs one check.

The kubelet's checks: ``ping``; ``log`` (logging was flushed within the last two
minutes — a stuck stderr shows here); ``syncloop`` (the syncLoop began an iteration
within max(2 × syncFrequency, 5 min)).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import attrs
import trio

from kubelet.logs import flush_handlers

from .asgi import (
    NOT_FOUND,
    Receive,
    Request,
    Response,
    Scope,
    Send,
    http_error,
    send_response,
    text,
)

log = logging.getLogger(__name__)

SYNC_LOOP_MIN_GRACE = 300.0
LOG_FLUSH_PERIOD = 60.0
LOG_FLUSH_MAX_AGE = 120.0

Check = Callable[[], str | None]
"""A health check: None when healthy, else why not."""


@attrs.frozen
class NamedCheck:
    name: str
    check: Check


def ping() -> str | None:
    return None


def sync_loop_check(
    last_iteration: Callable[[], float | None],
    sync_frequency: float,
    clock: Callable[[], float] = trio.current_time,
) -> Check:
    """Fails when the syncLoop's last iteration began too long ago (never run: healthy)."""
    grace = max(2 * sync_frequency, SYNC_LOOP_MIN_GRACE)

    def check() -> str | None:
        started = last_iteration()
        if started is not None and clock() > started + grace:
            return "sync Loop took longer than expected"
        return None

    return check


class LogFlushCheck:
    """``log``: a task flushes the log handlers every minute; stale means logging is stuck."""

    def __init__(self, clock: Callable[[], float] = trio.current_time) -> None:
        self._clock = clock
        self.last_flush: float | None = None

    def __call__(self) -> str | None:
        if self.last_flush is not None and self._clock() - self.last_flush >= LOG_FLUSH_MAX_AGE:
            return "logging blocked"
        return None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Flush in a thread (a blocked stderr must not block the event loop)."""
        self.last_flush = self._clock()
        task_status.started()
        while True:
            await trio.sleep(LOG_FLUSH_PERIOD)
            await trio.to_thread.run_sync(flush_handlers, abandon_on_cancel=True)
            self.last_flush = self._clock()


def healthz(checks: Sequence[NamedCheck], request: Request, name: str = "healthz") -> Response:
    """The root handler: every check, honouring ``exclude`` and ``verbose``."""
    excluded = set(request.query.get("exclude", []))
    lines: list[str] = []
    failed: list[str] = []
    for c in checks:
        if c.name in excluded:
            excluded.discard(c.name)
            lines.append(f"[+]{c.name} excluded: ok")
            continue
        reason = c.check()
        if reason is None:
            lines.append(f"[+]{c.name} ok")
        else:
            lines.append(f"[-]{c.name} failed: reason withheld")
            failed.append(f"[-]{c.name} failed: {reason}")
    if excluded:
        quoted = ",".join(f'"{n}"' for n in sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
    report = "".join(line + "\n" for line in lines)
    if failed:
        log.info("%s check failed:\n%s", name, "\n".join(failed))
        return http_error(500, f"{report}{name} check failed")
    if "verbose" not in request.query:
        return text(200, "ok", ("X-Content-Type-Options", "nosniff"))
    return text(200, f"{report}{name} check passed\n", ("X-Content-Type-Options", "nosniff"))


def single(check: NamedCheck) -> Response:
    """``/healthz/<name>``."""
    reason = check.check()
    if reason is not None:
        return http_error(500, f"internal server error: {reason}")
    return text(200, "ok")


@attrs.define
class HealthzApp:
    """The healthz port (10248): ``/healthz`` and ``/healthz/ping`` answer ``ok``."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request.from_scope(scope)
        checks = [NamedCheck("ping", ping)]
        if request.path == "/healthz":
            response = healthz(checks, request)
        elif request.path == "/healthz/ping":
            response = single(checks[0])
        else:
            response = http_error(404, NOT_FOUND)
        await send_response(response, receive, send)
