"""Tracing end to end: a static pod's start reaches an OTLP collector as a syncPod span
with its CRI calls as children, and the runtime is told the trace (``traceparent``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubelet.testing import FakeRuntime
from kubelet.testing.fakeotlp import FakeCollector

from .kubelet_harness import KUBELET_IMAGES, NODE, running_kubelet
from .test_kubelet_lifecycle import WEB

RUN_SANDBOX = "runtime.v1.RuntimeService/RunPodSandbox"
CLIENT, INTERNAL = 3, 1  # the OTLP span kinds


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


@pytest.fixture
async def collector(aio_loop: None, short_tmp: Path) -> AsyncIterator[tuple[FakeCollector, str]]:
    received = FakeCollector()
    async with received.serve(short_tmp / "otlp.sock") as endpoint:
        yield received, endpoint


async def _start_web(fake: FakeRuntime, tmp: Path, endpoint: str, rate: int) -> None:
    """A kubelet tracing to ``endpoint`` runs the static pod ``web``, then exits (which
    flushes its spans)."""
    config = tmp / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        f"tracing:\n  endpoint: {endpoint}\n  samplingRatePerMillion: {rate}\n"
    )
    async with running_kubelet(fake, tmp, "--config", str(config)) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))


async def test_a_pod_start_reaches_the_collector(
    fake: FakeRuntime, short_tmp: Path, collector: tuple[FakeCollector, str]
) -> None:
    received, endpoint = collector
    await _start_web(fake, short_tmp, endpoint, 1_000_000)
    syncs = [s for s in received.named("syncPod") if s.attributes["k8s.pod.name"] == f"web-{NODE}"]
    assert syncs, [s.name for s in received.spans]
    first = syncs[0]
    assert first.kind == INTERNAL
    assert first.attributes["k8s.namespace.name"] == "default"
    assert first.attributes["k8s.pod"] == f"default/web-{NODE}"
    assert first.attributes["k8s.pod.update_type"] == "create"
    assert first.attributes["k8s.pod.uid"]
    assert first.resource["service.name"] == "kubelet"
    assert first.resource["host.name"] == NODE
    children = [s for s in received.spans if s.parent_span_id == first.span_id]
    names = {s.name for s in children}
    assert {RUN_SANDBOX, "runtime.v1.RuntimeService/StartContainer"} <= names
    (sandbox,) = [s for s in children if s.name == RUN_SANDBOX]
    assert sandbox.kind == CLIENT
    assert sandbox.trace_id == first.trace_id
    assert sandbox.attributes["rpc.system"] == "grpc"
    assert sandbox.attributes["rpc.method"] == "RunPodSandbox"
    assert sandbox.attributes["rpc.grpc.status_code"] == 0
    # the runtime was told which span called it (otelgrpc's metadata)
    (call,) = fake.calls_of("RunPodSandbox")
    version, trace_id, parent, flags = call.metadata["traceparent"].split("-")
    assert (version, trace_id, parent) == ("00", sandbox.trace_id, sandbox.span_id)
    assert int(flags, 16) & 1  # sampled


async def test_sampling_rate_zero_sends_nothing(
    fake: FakeRuntime, short_tmp: Path, collector: tuple[FakeCollector, str]
) -> None:
    received, endpoint = collector
    await _start_web(fake, short_tmp, endpoint, 0)
    assert received.spans == []
    assert received.requests == 0
    (call,) = fake.calls_of("RunPodSandbox")
    flags = call.metadata["traceparent"].rsplit("-", 1)[1]
    assert not int(flags, 16) & 1  # the context is passed on, marked unsampled


async def test_without_tracing_the_runtime_gets_no_traceparent(
    fake: FakeRuntime, short_tmp: Path
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
    (call,) = fake.calls_of("RunPodSandbox")
    assert "traceparent" not in call.metadata
