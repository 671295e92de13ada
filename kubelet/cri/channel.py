"""One grpclib channel to a CRI socket, driven from Trio through trio-asyncio.

grpclib is asyncio-only. The agent opens one trio-asyncio loop near its root
(``async with trio_asyncio.open_loop()``); every CRI call runs as an asyncio task on
that loop, awaited from Trio as ``aio_as_trio`` would (:func:`_on_asyncio`, one asyncio
callback cheaper). That gives three properties the kubelet relies on:

* a Trio cancel scope around a call cancels the asyncio task, and grpclib resets the
  HTTP/2 stream, so the runtime sees the call abandoned (not just our side);
* the deadline is a Trio deadline on the same clock as everything else, so
  ``autojump_clock`` tests are exact; the runtime is also told the deadline through
  ``grpc-timeout`` so it can drop the work;
* the grpclib channel reconnects by itself on the next call after the runtime restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import outcome
import trio
import trio_asyncio
from grpclib.client import Channel

from kubelet.tracing import NO_TRACER, Tracer

from . import aioloop, framerepr, trace
from .codec import MAX_MESSAGE_BYTES, LimitedProtoCodec
from .endpoint import socket_path
from .errors import CriError, to_cri_error

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


class _Waiter:
    """The Trio task awaiting one call's asyncio task, told of its outcome once.

    One object per call holds what the call's wake-up and its cancellation need, so a
    call allocates no closure and no second coroutine (a CRI call is the kubelet's
    commonest step)."""

    __slots__ = ("aio_task", "raise_cancel", "reported", "task")

    def __init__(self) -> None:
        self.task = trio.lowlevel.current_task()
        self.reported = False
        self.raise_cancel: Callable[[], NoReturn] | None = None
        self.aio_task: asyncio.Task[None] | None = None

    def report(self, result: outcome.Outcome[Any]) -> None:
        if not self.reported:
            self.reported = True
            trio.lowlevel.reschedule(self.task, result)

    def report_done(self, aio_task: asyncio.Future[Any]) -> None:
        """The asyncio task's done callback: only armed on cancellation, for a task
        cancelled before its coroutine started (which then cannot report itself)."""
        self.report(outcome.capture(aio_task.result))

    def abort(self, raise_cancel: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
        """Trio cancels the waiting task: cancel the asyncio task and wait for its end."""
        self.raise_cancel = raise_cancel
        assert self.aio_task is not None
        self.aio_task.cancel()
        self.aio_task.add_done_callback(self.report_done)
        return trio.lowlevel.Abort.FAILED


async def _unary(
    waiter: _Waiter,
    method: Any,
    request: Any,
    wire_timeout: float | None,
    metadata: dict[str, str] | None,
) -> None:
    """One unary call on the asyncio side, ``method(request)`` without grpclib's timer;
    its outcome goes to ``waiter``.

    grpclib arms an asyncio timer (``DeadlineWrapper``) for every call with a timeout; ours
    is the Trio deadline around the call, which always fires first (see
    :func:`_wire_timeout`), so the stream is entered without the deadline and gets it back
    before the request is sent: ``grpc-timeout`` still tells the runtime.
    """
    try:
        stream = method.open(timeout=wire_timeout, metadata=metadata)
        deadline, stream._deadline = stream._deadline, None
        async with stream:
            stream._deadline = deadline
            await stream.send_message(request, end=True)
            reply = await stream.recv_message()
        if reply is None:  # as grpclib's UnaryUnaryMethod (an assertion there)
            raise AssertionError(f"{method.name}: the stream ended without a reply")
        result: outcome.Outcome[Any] = outcome.Value(reply)
    except BaseException as exc:  # handed to the Trio task, which raises it
        result = outcome.Error(exc)
    waiter.report(result)


async def _on_asyncio(
    method: Any, request: Any, wire_timeout: float | None, metadata: dict[str, str] | None
) -> Any:
    """Run :func:`_unary` as an asyncio task on the current trio-asyncio loop and return its
    reply; what ``aio_as_trio(...)()`` does, one asyncio callback cheaper per call.

    trio-asyncio learns that the task finished from its done callback, which asyncio
    schedules as one more callback on the loop; here the coroutine's last step wakes the
    Trio task itself. Cancelling the Trio task cancels the asyncio task (grpclib then
    resets the HTTP/2 stream) and waits for it to finish, as ``aio_as_trio`` does.
    """
    loop = trio_asyncio.current_loop.get()
    waiter = _Waiter()
    coro = _unary(waiter, method, request, wire_timeout, metadata)  # run on the asyncio side
    try:
        waiter.aio_task = loop.create_task(coro)
    except BaseException:
        coro.close()
        raise
    try:
        return await trio.lowlevel.wait_task_rescheduled(waiter.abort)
    except asyncio.CancelledError:
        if waiter.raise_cancel is None:  # cancelled on the asyncio side, not by us
            raise
        waiter.raise_cancel()  # trio.Cancelled, with the asyncio one as its context


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
        tracer: Tracer = NO_TRACER,
    ) -> None:
        self.endpoint = endpoint
        self.path = socket_path(endpoint)
        self._codec = LimitedProtoCodec(max_message_bytes)
        # Semaphores, not CapacityLimiters: a call takes and gives back its slot in one
        # task, so the limiter's bookkeeping of who borrowed it buys nothing here.
        self._in_flight = trio.Semaphore(max_concurrent_calls)
        self._priority = trio.Semaphore(PRIORITY_CALLS)
        self._channel: Channel | None = None
        self._closed = False
        self.observer = observer
        """Called after every call with (rpc, seconds, error or None): runtime metrics."""
        self.tracer = tracer
        """A client span per call, its ``traceparent`` sent as gRPC metadata (otelgrpc's)."""

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

    async def call(self, rpc: str, method: Any, request: Any, timeout: float | None) -> Any:
        """Run the unary grpclib ``method`` on ``request`` with ``timeout`` seconds (None:
        until cancelled).

        Failures come back as ``CriError`` subclasses; ``trio.Cancelled`` passes through
        untouched.
        """
        if not self.tracer.enabled:
            return await self._call(rpc, method, request, timeout, None)
        name = method.name.lstrip("/")  # runtime.v1.RuntimeService/RunPodSandbox
        service, _, short = name.rpartition("/")
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": short}
        with self.tracer.client_span(name, attributes) as span:
            try:
                reply = await self._call(rpc, method, request, timeout, span.headers)
            except CriError as exc:
                if exc.code is not None:
                    span.set_attribute("rpc.grpc.status_code", exc.code.value)
                raise
            span.set_attribute("rpc.grpc.status_code", 0)
            return reply

    async def _call(
        self,
        rpc: str,
        method: Any,
        request: Any,
        timeout: float | None,
        metadata: dict[str, str] | None,
    ) -> Any:
        self.channel()
        started = trio.current_time()
        traced = time.monotonic() if trace.TRACE is not None else None
        error: BaseException | None = None
        prio = PRIORITY.get()
        limiter = self._priority if prio else self._in_flight
        slot = traced
        try:
            # One cancel scope for the wait for a slot and the call (``fail_after``'s
            # context manager would add a generator to every call).
            with trio.CancelScope(
                deadline=math.inf if timeout is None else started + timeout
            ) as scope:
                try:
                    limiter.acquire_nowait()  # no checkpoint: the call below is one
                except trio.WouldBlock:
                    await limiter.acquire()
                try:
                    if traced is not None:
                        slot = time.monotonic()  # the trace tells the wait for a slot apart
                    return await _on_asyncio(method, request, _wire_timeout(timeout), metadata)
                finally:
                    limiter.release()
            assert scope.cancelled_caught
            raise trio.TooSlowError
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
                    prio=prio,
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
