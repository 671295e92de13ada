"""One grpclib channel to a CRI socket, driven from Trio through trio-asyncio.

grpclib is asyncio-only. The agent opens one trio-asyncio loop near its root
(``async with trio_asyncio.open_loop()``); every CRI call runs as an asyncio coroutine
on that loop, wrapped with ``aio_as_trio``. That gives three properties the kubelet
relies on:

* a Trio cancel scope around a call cancels the asyncio task, and grpclib resets the
  HTTP/2 stream, so the runtime sees the call abandoned (not just our side);
* the deadline is a Trio deadline on the same clock as everything else, so
  ``autojump_clock`` tests are exact; the runtime is also told the deadline through
  ``grpc-timeout`` so it can drop the work;
* the grpclib channel reconnects by itself on the next call after the runtime restarts.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import trio
import trio_asyncio
from grpclib.client import Channel

from . import aioloop, framerepr, trace
from .codec import MAX_MESSAGE_BYTES, LimitedProtoCodec
from .endpoint import socket_path
from .errors import CriError, to_cri_error

Resp = TypeVar("Resp")

framerepr.install()
aioloop.install()

MAX_CONCURRENT_CALLS = 100
"""Calls in flight on one connection at most (the default HTTP/2 stream limit of gRPC
servers). More would only queue at the runtime, and h2's bookkeeping per new stream grows
with the number of open ones."""


PRIORITY_CALLS = 32
"""Calls in flight at most from tasks marked with :data:`PRIORITY`, apart from the rest."""

PRIORITY: contextvars.ContextVar[bool] = contextvars.ContextVar("cri_priority", default=False)
"""Set by the PLEG's relist task: its calls do not queue behind the pod workers'. During
a ramp hundreds of pod workers wait for the shared limit of calls in flight; the relist
waiting behind them all made its duration the length of the ramp (upstream's gRPC client
has no such queue). Trio tasks inherit the value from the task that starts them."""


@contextlib.contextmanager
def priority_lane() -> Iterator[None]:
    """Calls made inside use :data:`PRIORITY`'s slots: the node's own health checks (the
    runtime's Status for the Ready condition) must not wait behind hundreds of pod
    workers' calls — in a 200-pod teardown one waited 5.9 s for a shared slot."""
    token = PRIORITY.set(True)
    try:
        yield
    finally:
        PRIORITY.reset(token)


def _wire_timeout(timeout: float | None) -> float | None:
    """The deadline announced to the runtime: a little beyond ours.

    grpclib encodes ``grpc-timeout`` above 10 s in whole seconds rounded down, which
    would let the runtime give up up to a second before we do. Announcing one second
    more keeps our Trio deadline the one that fires (exact under autojump); when it
    does, the stream is reset, so the runtime still learns at once.
    """
    return None if timeout is None else math.ceil(timeout) + 1.0


Observer = Callable[[str, float, BaseException | None], None]
"""Told of every call: (rpc, seconds, error or None)."""


class CriChannel:
    """A lazily connected channel to one CRI endpoint.

    Must be used inside a running trio-asyncio loop. Safe for any number of
    concurrent calls (they share one HTTP/2 connection, as upstream's gRPC client does).
    """

    def __init__(
        self,
        endpoint: str,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_concurrent_calls: int = MAX_CONCURRENT_CALLS,
        observer: Observer | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.path = socket_path(endpoint)
        self._codec = LimitedProtoCodec(max_message_bytes)
        self._in_flight = trio.CapacityLimiter(max_concurrent_calls)
        self._priority = trio.CapacityLimiter(PRIORITY_CALLS)
        self._channel: Channel | None = None
        self._closed = False
        self.observer = observer
        """Called after every call with (rpc, seconds, error or None): runtime metrics."""

    def _require_loop(self) -> None:
        if trio_asyncio.current_loop.get() is None:
            raise RuntimeError(
                "CRI clients need a trio-asyncio loop: call them inside "
                "`async with trio_asyncio.open_loop():`"
            )

    def channel(self) -> Channel:
        """The grpclib channel, created on first use.

        Synchronous on purpose: concurrent first calls must not each build a channel
        (an abandoned grpclib channel reports "Unclosed connection" to the loop's
        exception handler, which under trio-asyncio tears the whole loop down).
        """
        if self._closed:
            raise RuntimeError(f"CRI channel to {self.endpoint} is closed")
        if self._channel is None:
            self._require_loop()
            self._channel = Channel(path=self.path, codec=self._codec)
        return self._channel

    async def call(
        self,
        rpc: str,
        invoke: Callable[[float | None], Awaitable[Resp]],
        timeout: float | None,
    ) -> Resp:
        """Run one RPC with ``timeout`` seconds (None: until cancelled).

        ``invoke(timeout)`` starts the grpclib call on the asyncio side. Failures come
        back as ``CriError`` subclasses; ``trio.Cancelled`` passes through untouched.
        """
        self.channel()
        deadline = trio.fail_after(timeout) if timeout is not None else contextlib.nullcontext()
        started = trio.current_time()
        traced = time.monotonic() if trace.TRACE is not None else None
        error: BaseException | None = None
        limiter = self._priority if PRIORITY.get() else self._in_flight
        slot = traced
        try:
            with deadline:
                async with limiter:
                    if traced is not None:
                        slot = time.monotonic()  # the trace tells the wait for a slot apart
                    response: Resp = await trio_asyncio.aio_as_trio(invoke)(_wire_timeout(timeout))
                return response
        except trio.Cancelled as exc:
            error = exc
            raise
        except CriError as exc:
            error = exc
            raise
        except Exception as exc:
            error = to_cri_error(rpc, exc, timeout)
            raise error from exc
        finally:
            if self.observer is not None:
                self.observer(rpc, trio.current_time() - started, error)
            if traced is not None and trace.TRACE is not None:
                trace.TRACE.record(
                    "call",
                    rpc=rpc,
                    t0=traced,
                    t1=time.monotonic(),
                    pod=trace.POD.get(),
                    slot=slot,
                    prio=PRIORITY.get(),
                )

    def close(self) -> None:
        """Drop the connection. Idempotent; later calls raise."""
        self._closed = True
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    async def __aenter__(self) -> CriChannel:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.close()
