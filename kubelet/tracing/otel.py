"""The OpenTelemetry tracer: the SDK, its batch span processor and the OTLP/gRPC exporter.

Imported only when the ``tracing`` configuration is set (``kubelet.tracing.start``). The
batch processor exports from a thread of its own, so spans end on the Trio loop without
waiting for the collector; the exporter speaks plaintext gRPC to ``endpoint`` as
upstream's does. Sampling is upstream's: parent-based, roots sampled at
``samplingRatePerMillion`` (0: none).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .api import Attributes, Outgoing, Tracer

INSTRUMENTATION_SCOPE = "k8s.io/kubernetes/pkg/kubelet"
DEFAULT_ENDPOINT = "localhost:4317"
EXPORT_TIMEOUT = 10.0
"""Seconds one export to the collector may take (the SDK's default)."""

_PROPAGATOR = TraceContextTextMapPropagator()


class _Live(Outgoing):
    __slots__ = ("_span",)

    def __init__(self, span: trace.Span, headers: dict[str, str]) -> None:
        super().__init__(headers)
        self._span = span

    def set_attribute(self, key: str, value: str | int | bool) -> None:
        self._span.set_attribute(key, value)

    def set_error(self, description: str) -> None:
        self._span.set_status(Status(StatusCode.ERROR, description))


class OtelTracer(Tracer):
    """Spans recorded by the SDK and exported over OTLP/gRPC."""

    enabled = True

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self._tracer = provider.get_tracer(INSTRUMENTATION_SCOPE)

    @contextlib.contextmanager
    def _open(
        self,
        name: str,
        kind: SpanKind,
        attributes: Attributes | None,
        *,
        parent: otel_context.Context | None = None,
        links: list[Link] | None = None,
    ) -> Iterator[Outgoing]:
        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=kind,
            attributes=dict(attributes) if attributes else None,
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            headers: dict[str, str] = {}
            if kind == SpanKind.CLIENT:
                _PROPAGATOR.inject(headers)
            try:
                yield _Live(span, headers)
            except Exception as exc:  # a cancellation is no failure of the operation
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                raise

    def span(
        self, name: str, attributes: Attributes | None = None
    ) -> AbstractContextManager[Outgoing]:
        return self._open(name, SpanKind.INTERNAL, attributes)

    def client_span(
        self, name: str, attributes: Attributes | None = None
    ) -> AbstractContextManager[Outgoing]:
        return self._open(name, SpanKind.CLIENT, attributes)

    def server_span(
        self,
        name: str,
        headers: Mapping[str, str],
        attributes: Attributes | None = None,
        *,
        public: bool = False,
    ) -> AbstractContextManager[Outgoing]:
        incoming = _PROPAGATOR.extract(dict(headers), context=otel_context.Context())
        if not public:
            return self._open(name, SpanKind.SERVER, attributes, parent=incoming)
        remote = trace.get_current_span(incoming).get_span_context()
        links = [Link(remote)] if remote.is_valid else None
        return self._open(
            name, SpanKind.SERVER, attributes, parent=otel_context.Context(), links=links
        )

    def shutdown(self, timeout: float) -> None:
        self.provider.force_flush(int(timeout * 1000))
        self.provider.shutdown()


def build(
    endpoint: str | None, sampling_rate_per_million: int | None, node_name: str
) -> OtelTracer:
    """The tracer for the ``tracing`` configuration; nothing is sent until a span ends."""
    rate = (sampling_rate_per_million or 0) / 1_000_000
    provider = TracerProvider(
        sampler=ParentBased(TraceIdRatioBased(rate)),
        resource=Resource.create({"service.name": "kubelet", "host.name": node_name}),
        shutdown_on_exit=False,  # the agent flushes with a deadline; never block exit
    )
    exporter = OTLPSpanExporter(
        endpoint=endpoint or DEFAULT_ENDPOINT, insecure=True, timeout=EXPORT_TIMEOUT
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return OtelTracer(provider)
