"""The tracer's parts: lazy SDK import, start-up without the SDK, the bounded flush at
exit, server spans (parent or link), and API requests as client spans."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs
import httpx
import pytest
import trio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from kubelet import agent, tracing
from kubelet.api import ApiClient, ClusterConnection
from kubelet.api.kubeconfig import TokenSource
from kubelet.config import ConfigError, KubeletConfiguration, Options, TracingConfiguration
from kubelet.tracing.otel import OtelTracer

ROOT = Path(__file__).resolve().parents[3]
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def recorded() -> Iterator[tuple[OtelTracer, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield OtelTracer(provider), exporter
    provider.shutdown()


@pytest.fixture
def no_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a kubelet installed without the tracing extra."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "kubelet.tracing.otel", raising=False)
    monkeypatch.delattr(tracing, "otel", raising=False)


def test_a_kubelet_without_tracing_imports_nothing_of_opentelemetry() -> None:
    code = (
        "import sys, kubelet.agent, kubelet.cli\n"
        "from kubelet.config import resolve\n"
        "resolve(['--hostname-override', 'n'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.usefixtures("no_sdk")
def test_start_without_the_sdk_says_how_to_get_it() -> None:
    with pytest.raises(tracing.TracingUnavailable, match=r"pip install 'kubelet\[tracing\]'"):
        tracing.start(None, 1, "n")


@pytest.mark.usefixtures("no_sdk")
async def test_start_up_stops_when_tracing_is_set_without_the_sdk() -> None:
    config = attrs.evolve(KubeletConfiguration(), tracing=TracingConfiguration())
    options = Options(node_name="n", config=config, config_file="/etc/kubelet.yaml")
    with pytest.raises(ConfigError) as caught:
        async with agent._open_tracing(options, "n"):
            pass
    (problem,) = caught.value.problems
    assert "OpenTelemetry is not installed" in str(problem)
    assert "tracing" in str(problem)


async def test_no_tracing_section_is_the_no_op_tracer() -> None:
    options = Options(node_name="n", config=KubeletConfiguration())
    async with agent._open_tracing(options, "n") as tracer:
        assert tracer is tracing.NO_TRACER
        with tracer.client_span("x") as span:
            assert span.headers == {}


class _Stuck(tracing.Tracer):
    """A collector that never answers: shutting down blocks its thread until released."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def shutdown(self, timeout: float) -> None:
        self.released.wait()


async def test_the_exit_flush_gives_up_at_its_deadline(autojump_clock: trio.abc.Clock) -> None:
    stuck = _Stuck()
    started = trio.current_time()
    try:
        with trio.CancelScope() as scope:
            async with tracing.flushed_at_exit(stuck, flush_deadline=0.2):
                scope.cancel()  # the kubelet stopping: the flush still runs, shielded
                await trio.sleep_forever()
        assert trio.current_time() - started == pytest.approx(0.2)
        assert not stuck.released.is_set()  # given up on, still stuck
    finally:
        stuck.released.set()  # the abandoned thread may end


async def test_the_exit_flush_hands_over_the_queued_spans() -> None:
    flushed: list[float] = []

    class Recording(tracing.Tracer):
        def shutdown(self, timeout: float) -> None:
            flushed.append(timeout)

    async with tracing.flushed_at_exit(Recording(), flush_deadline=3.0):
        pass
    assert flushed == [3.0]


def test_server_spans_continue_the_callers_trace(
    recorded: tuple[OtelTracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = recorded
    with tracer.server_span("KubeletAPI", {"traceparent": TRACEPARENT}):
        pass
    (span,) = exporter.get_finished_spans()
    assert span.kind == SpanKind.SERVER
    assert span.parent is not None and format(span.parent.span_id, "016x") == "b7ad6b7169203331"
    assert format(span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"


def test_the_read_only_port_links_the_callers_trace(
    recorded: tuple[OtelTracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = recorded
    with tracer.server_span("KubeletAPI", {"traceparent": TRACEPARENT}, public=True):
        pass
    (span,) = exporter.get_finished_spans()
    assert span.parent is None
    (link,) = span.links
    assert format(link.context.span_id, "016x") == "b7ad6b7169203331"


def test_a_failure_marks_the_span_and_a_cancellation_does_not(
    recorded: tuple[OtelTracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = recorded
    with pytest.raises(ValueError), tracer.span("syncPod"):
        raise ValueError("boom")
    with pytest.raises(KeyboardInterrupt), tracer.span("syncPod"):
        raise KeyboardInterrupt  # a BaseException, as trio.Cancelled
    failed, cancelled = exporter.get_finished_spans()
    assert not failed.status.is_ok and "boom" in (failed.status.description or "")
    assert cancelled.status.is_unset


async def test_api_requests_are_client_spans_carrying_traceparent(
    recorded: tuple[OtelTracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = recorded
    seen: list[httpx.Request] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    connection = ClusterConnection(server="https://api.test:6443", token=TokenSource("tok"))
    async with ApiClient.open(connection, transport=httpx.MockTransport(answer)) as client:
        client.tracer = tracer
        await client.get("/api/v1/nodes/n")
        await client.with_limits(-1, 0).get("/api/v1/nodes/n")
    first, second = exporter.get_finished_spans()
    assert (first.name, first.kind) == ("HTTP GET", SpanKind.CLIENT)
    assert first.attributes is not None
    assert first.attributes["http.response.status_code"] == 200
    assert first.attributes["url.full"] == "https://api.test:6443/api/v1/nodes/n"
    trace_id = format(first.context.trace_id, "032x")
    span_id = format(first.context.span_id, "016x")
    assert seen[0].headers["traceparent"].startswith(f"00-{trace_id}-{span_id}-")
    assert second.name == "HTTP GET"  # the sibling client traces too
