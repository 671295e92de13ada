"""The tracer's lifetime in the kubelet: built at start-up, flushed at exit with a deadline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from .api import Tracer, sdk_missing_message

FLUSH_DEADLINE = 5.0
"""Seconds the exit waits for the spans still queued to reach the collector."""


class TracingUnavailable(RuntimeError):
    """``tracing`` is configured but the OpenTelemetry SDK is not installed."""


def start(endpoint: str | None, sampling_rate_per_million: int | None, node_name: str) -> Tracer:
    """The OpenTelemetry tracer for the configuration (imports the SDK now)."""
    try:
        from . import otel  # lazy: the SDK only when tracing is on
    except ImportError as exc:
        raise TracingUnavailable(sdk_missing_message(exc)) from exc
    return otel.build(endpoint, sampling_rate_per_million, node_name)


@asynccontextmanager
async def flushed_at_exit(
    tracer: Tracer, *, flush_deadline: float = FLUSH_DEADLINE
) -> AsyncIterator[Tracer]:
    """``tracer`` while the block runs. On exit, even a cancelled one, the spans still
    queued are flushed by a worker thread for at most ``flush_deadline`` seconds: a
    collector that is down never holds the loop, nor the exit for longer."""
    try:
        yield tracer
    finally:
        await flush(tracer, flush_deadline)


async def flush(tracer: Tracer, deadline: float) -> None:
    """Shut ``tracer`` down off the loop, giving up (and leaving the thread) at ``deadline``."""
    with trio.move_on_after(deadline, shield=True):
        await trio.to_thread.run_sync(tracer.shutdown, deadline, abandon_on_cancel=True)
