"""The benchmark's timing trace: every CRI call, named by the pod whose worker made it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from kubelet.cri import trace
from kubelet.testing import FakeRuntime

from .kubelet_harness import KUBELET_IMAGES, running_kubelet
from .test_kubelet_lifecycle import WEB


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


async def test_calls_are_traced_with_their_pod(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = short_tmp / "trace.jsonl"
    monkeypatch.setenv(trace.ENV, str(path))
    monkeypatch.setattr(trace, "TRACE", None)
    trace.enable_from_environment()
    assert trace.TRACE is not None
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        (h.manifests / "web.yaml").unlink()
        await h.wait_for(lambda: not h.sandboxes("web"))
    trace.TRACE.flush()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    calls = [x for x in lines if x["k"] == "call"]
    assert all(x["t0"] <= x["t1"] for x in calls)
    ours = [x["rpc"] for x in calls if x["pod"] == "web-node1_default"]
    for rpc in ("RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer"):
        assert rpc in ours
    assert ours.index("RunPodSandbox") < ours.index("StartContainer") < ours.index("StopContainer")
    assert any(x["pod"] == "" and x["rpc"] == "ListPodSandbox" for x in calls)  # the PLEG
