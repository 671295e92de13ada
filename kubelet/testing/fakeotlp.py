"""An OTLP/gRPC trace collector for tests: what the kubelet's exporter sends, decoded.

Serves ``opentelemetry.proto.collector.trace.v1.TraceService/Export`` with grpclib on a
unix socket (the tracing ``endpoint`` ``unix:///path``), inside the test's trio-asyncio
loop, and keeps every span with its resource's attributes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio
import trio_asyncio
from grpclib.const import Cardinality, Handler
from grpclib.server import Server
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from kubelet.cri import LimitedProtoCodec

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _values(attributes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in attributes:
        assert isinstance(kv, KeyValue)
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


@attrs.frozen
class ReceivedSpan:
    """One span as the collector received it (ids in hex)."""

    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str


class FakeCollector:
    """Receives OTLP trace exports; ``spans`` lists every span received so far."""

    def __init__(self) -> None:
        self.requests = 0
        self.spans: list[ReceivedSpan] = []

    def __mapping__(self) -> dict[str, Handler]:
        return {
            EXPORT: Handler(
                self._export,
                Cardinality.UNARY_UNARY,
                ExportTraceServiceRequest,
                ExportTraceServiceResponse,
            )
        }

    async def _export(self, stream: Any) -> None:
        request = await stream.recv_message()
        self.requests += 1
        for resource_spans in request.resource_spans:
            resource = _values(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ReceivedSpan(
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes=_values(span.attributes),
                            resource=resource,
                            scope=scope_spans.scope.name,
                        )
                    )
        await stream.send_message(ExportTraceServiceResponse())

    def named(self, name: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name == name]

    @contextlib.asynccontextmanager
    async def serve(self, path: str | os.PathLike[str]) -> AsyncIterator[str]:
        """Listen on ``path`` for the block (needs a running trio-asyncio loop); yields the
        endpoint to configure (``unix:///…``)."""
        where = trio.Path(path)
        with contextlib.suppress(FileNotFoundError):
            await where.unlink()
        server = Server([self], codec=LimitedProtoCodec(4 << 20))
        await trio_asyncio.aio_as_trio(server.start)(path=str(where))
        try:
            yield f"unix://{where}"
        finally:
            server.close()
            await trio_asyncio.aio_as_trio(server.wait_closed)()
