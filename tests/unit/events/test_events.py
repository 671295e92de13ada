"""Event recorder: shape of events, folding of repeats, aggregation, spam limit."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from kubelet.api import Container, ObjectMeta, Pod, PodSpec
from kubelet.events import NORMAL, WARNING, EventRecorder, node_ref, pod_ref
from kubelet.events.recorder import LOG_LEVEL

EPOCH = 1_800_000_000.0
POD = Pod(
    metadata=ObjectMeta(name="web", namespace="default", uid="u1"),
    spec=PodSpec(containers=(Container(name="app", image="busybox:1.35"),)),
)


class Sink:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []

    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append(body)
        return body

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patched.append((name, patch))
        return patch


async def drive(recorder: EventRecorder, events: list[tuple[Any, ...]], gap: float = 1.0) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.run)
        for ev in events:
            recorder.record(*ev)
            await trio.sleep(gap)
        nursery.cancel_scope.cancel()


def recorder(sink: Sink) -> EventRecorder:
    return EventRecorder("node1", sink, wall_clock=lambda: EPOCH + trio.current_time())


async def test_event_shape(autojump_clock: trio.abc.Clock) -> None:
    sink = Sink()
    ref = pod_ref(POD, POD.spec.containers[0])
    await drive(recorder(sink), [(ref, NORMAL, "Started", "Started container app")])
    (ev,) = sink.created
    assert ev["involvedObject"] == {
        "kind": "Pod",
        "name": "web",
        "namespace": "default",
        "uid": "u1",
        "apiVersion": "v1",
        "fieldPath": "spec.containers{app}",
    }
    assert ev["metadata"]["name"].startswith("web.")
    assert (ev["reason"], ev["type"], ev["count"]) == ("Started", "Normal", 1)
    assert ev["source"] == {"component": "kubelet", "host": "node1"}
    assert ev["firstTimestamp"] == ev["lastTimestamp"]


async def test_repeats_are_folded_into_count(autojump_clock: trio.abc.Clock) -> None:
    sink = Sink()
    ref = pod_ref(POD, POD.spec.containers[0])
    back_off = (ref, WARNING, "BackOff", "Back-off restarting failed container app in pod crash")
    await drive(recorder(sink), [back_off] * 4)
    assert len(sink.created) == 1
    assert [p["count"] for _, p in sink.patched] == [2, 3, 4]


async def test_spam_is_limited_per_object(autojump_clock: trio.abc.Clock) -> None:
    sink = Sink()
    ref = pod_ref(POD)
    events = [(ref, WARNING, "Failed", f"failure {i}") for i in range(40)]
    rec = recorder(sink)
    await drive(rec, events, gap=0.1)
    assert len(sink.created) + len(sink.patched) == 25
    assert rec.dropped == 15


async def test_many_similar_messages_are_combined(autojump_clock: trio.abc.Clock) -> None:
    sink = Sink()
    ref = node_ref("node1")
    events = [(ref, NORMAL, "Probe", f"message {i}") for i in range(12)]
    await drive(recorder(sink), events)
    messages = [e["message"] for e in sink.created]
    assert messages[:10] == [f"message {i}" for i in range(10)]
    assert messages[10] == "(combined from similar events): message 10"
    assert sink.created[0]["involvedObject"]["uid"] == "node1"


async def test_standalone_recorder_only_logs() -> None:
    rec = EventRecorder("node1")
    rec.record(node_ref("node1"), NORMAL, "Starting", "Starting kubelet.")
    assert rec.written == []


def test_events_are_logged_at_v3(caplog: pytest.LogCaptureFixture) -> None:
    """Upstream logs events at -v=3, Warning ones too: none at the default verbosity."""
    rec = EventRecorder("node1")
    with caplog.at_level(logging.INFO):
        rec.record(pod_ref(POD), WARNING, "MissingClusterDNS", "no cluster DNS")
    assert caplog.records == []
    with caplog.at_level(LOG_LEVEL):
        rec.record(pod_ref(POD), WARNING, "MissingClusterDNS", "no cluster DNS")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (LOG_LEVEL, "event Warning default/web: MissingClusterDNS: no cluster DNS")
    ]
