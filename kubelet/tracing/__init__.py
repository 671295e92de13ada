"""Tracing with OpenTelemetry (upstream's KubeletTracing): spans for pod syncs, CRI and
API calls and the kubelet's HTTP handlers, exported over OTLP/gRPC.

The SDK is an optional extra (``kubelet[tracing]``) imported only by :func:`start`, when
the ``tracing`` configuration is set; everything else sees :class:`Tracer`, whose default
:data:`NO_TRACER` does nothing.
"""

from __future__ import annotations

from .api import NO_TRACER, Attributes, Outgoing, Tracer, sdk_missing_message
from .run import FLUSH_DEADLINE, TracingUnavailable, flush, flushed_at_exit, start

__all__ = [
    "FLUSH_DEADLINE",
    "NO_TRACER",
    "Attributes",
    "Outgoing",
    "Tracer",
    "TracingUnavailable",
    "flush",
    "flushed_at_exit",
    "sdk_missing_message",
    "start",
]
