"""The kubelet's tracing face: spans that cost nothing while tracing is off.

Components hold a :class:`Tracer` and open spans through it. The default,
:data:`NO_TRACER`, does nothing and imports nothing; the OpenTelemetry one
(``kubelet.tracing.otel``) is built only when the ``tracing`` configuration asks for it,
so a kubelet without tracing never imports the SDK.

A span is current in the Trio task that opened it and in the tasks that task starts
(the SDK keeps it in a context variable, which Trio copies into each new task), so the
CRI and API calls made by a pod worker's sync become that sync's children.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextlib import AbstractContextManager

Attributes = Mapping[str, str | int | bool]


class Outgoing:
    """A client span seen from the call: the headers that carry its context to the peer
    (W3C ``traceparent``) and a way to note how the call ended."""

    __slots__ = ("headers",)

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self.headers: dict[str, str] = headers if headers is not None else {}

    def set_attribute(self, key: str, value: str | int | bool) -> None:
        """Note an attribute on the span (nothing when tracing is off)."""

    def set_error(self, description: str) -> None:
        """Mark the span failed (nothing when tracing is off)."""


_NO_OUTGOING = Outgoing()
_NO_SPAN = contextlib.nullcontext(_NO_OUTGOING)


class Tracer:
    """Opens spans; this base class is the disabled tracer, every span a no-op."""

    enabled = False

    def span(
        self, name: str, attributes: Attributes | None = None
    ) -> AbstractContextManager[Outgoing]:
        """An internal span around the block (a pod worker's sync)."""
        return _NO_SPAN

    def client_span(
        self, name: str, attributes: Attributes | None = None
    ) -> AbstractContextManager[Outgoing]:
        """A client span around one outgoing call; send ``headers`` with the call."""
        return _NO_SPAN

    def server_span(
        self,
        name: str,
        headers: Mapping[str, str],
        attributes: Attributes | None = None,
        *,
        public: bool = False,
    ) -> AbstractContextManager[Outgoing]:
        """A server span around one request, child of the caller's ``traceparent``; on a
        ``public`` endpoint (the read-only port) a new trace linked to the caller's, so
        that unauthenticated callers cannot choose what is sampled."""
        return _NO_SPAN

    def shutdown(self, timeout: float) -> None:
        """Flush what is queued within ``timeout`` seconds and stop (blocking: call it from
        a worker thread)."""


NO_TRACER = Tracer()
"""Tracing off: the tracer every component holds unless the agent gives it another."""


def sdk_missing_message(error: BaseException | None = None) -> str:
    """What start-up says when ``tracing`` is set and the SDK is not installed."""
    detail = f" ({error})" if error is not None else ""
    return (
        "tracing is configured but OpenTelemetry is not installed"
        f"{detail}: install the kubelet with its tracing extra, pip install 'kubelet[tracing]'"
    )
