"""Events: what the kubelet tells users about pods and the node (core/v1 Events).

``EventRecorder.record`` never blocks and never fails: events go into a bounded buffer
that one task drains to the API. Like upstream's correlator, repeats are folded:

* the same event again (same object, type, reason, message) within 10 minutes updates
  the first one's ``count`` and ``lastTimestamp`` with a PATCH instead of a new object;
* more than 10 different messages with the same object, type and reason within
  10 minutes collapse into one event "(combined from similar events): <message>";
* a token bucket per object (burst 25, one token per 5 minutes) drops the rest, so a
  crash-looping pod cannot flood the API.

Every event is also logged, at ``-v=3`` whatever its type (upstream's recorder logs
them with ``StartStructuredLogging(3)``): at the default verbosity a pod start costs no
log lines for its events. Without an API (standalone mode) they only go to that log.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
import trio

from kubelet.api import Container, Pod
from kubelet.goformat import rfc3339
from kubelet.logs import verbosity_level

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
BUFFER = 1000
SIMILAR_WINDOW = 600.0
MAX_SIMILAR = 10
SPAM_BURST = 25
SPAM_REFILL = 300.0  # one token per five minutes
LOG_LEVEL = verbosity_level(3)
"""Events are logged at ``-v=3``, as upstream's recorder logs them."""


@attrs.frozen
class ObjectRef:
    """What an event is about (a pod, a container within it, or the node)."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"
    field_path: str = ""

    def to_wire(self) -> dict[str, str]:
        out = {
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "apiVersion": self.api_version,
            "fieldPath": self.field_path,
        }
        return {k: v for k, v in out.items() if v}


def pod_ref(pod: Pod, container: Container | None = None) -> ObjectRef:
    """The pod, or one of its containers (``spec.containers{name}``), as an event subject."""
    meta = pod.metadata
    field = ""
    if container is not None:
        init = any(c.name == container.name for c in pod.spec.init_containers)
        field = f"spec.{'initContainers' if init else 'containers'}{{{container.name}}}"
    return ObjectRef("Pod", meta.name, meta.namespace, meta.uid, field_path=field)


def node_ref(node_name: str) -> ObjectRef:
    # upstream's node reference carries the node name as its UID
    return ObjectRef("Node", node_name, "", node_name)


class EventSink(Protocol):
    async def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def patch_event(
        self, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]: ...


_Queued = tuple[ObjectRef, str, str, str, dict[str, str]]
"""one queued event: what, type, reason, message, annotations"""


@attrs.define
class _Seen:
    name: str
    namespace: str
    count: int
    first: str
    last_seen: float


@attrs.define
class _Bucket:
    tokens: float
    updated: float


class EventRecorder:
    """Tells users what happened, without ever slowing the kubelet down.

    Every component records through it; ``record`` never blocks or fails, and the one
    drain task folds repeats and limits spam before anything reaches the API, so a
    crash-looping pod or an API outage costs the callers nothing.
    """

    def __init__(
        self,
        node_name: str,
        sink: EventSink | None = None,
        *,
        component: str = "kubelet",
        wall_clock: Callable[[], float] | None = None,
    ) -> None:
        self.node_name = node_name
        self.component = component
        self._sink = sink
        self._wall = wall_clock or (lambda: datetime.datetime.now(datetime.UTC).timestamp())
        self._send, self._recv = trio.open_memory_channel[_Queued](BUFFER)
        self._seen: dict[tuple[ObjectRef, str, str, str], _Seen] = {}
        self._similar: dict[tuple[ObjectRef, str, str], list[tuple[float, str]]] = {}
        self._buckets: dict[ObjectRef, _Bucket] = {}
        self.dropped = 0
        self._sequence = 0
        self.written: list[dict[str, Any]] = []
        """Recent events as written (bounded), for tests and the debug console."""

    def record(
        self,
        ref: ObjectRef,
        event_type: str,
        reason: str,
        message: str,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Queue an event; never blocks (dropped and counted when the buffer is full).

        ``annotations`` go on the Event object (upstream's ``AnnotatedEventf``: an
        eviction names the offending containers there)."""
        log.log(
            LOG_LEVEL,
            "event %s %s/%s: %s: %s",
            event_type,
            ref.namespace,
            ref.name,
            reason,
            message,
        )
        if self._sink is None:
            return
        try:
            self._send.send_nowait((ref, event_type, reason, message, dict(annotations or {})))
        except trio.WouldBlock:
            self.dropped += 1

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for ref, event_type, reason, message, extra in self._recv:
            try:
                await self._write(ref, event_type, reason, message, extra)
            except Exception as exc:  # an API problem must not stop the recorder
                log.warning(
                    "could not write event %s for %s/%s: %s", reason, ref.namespace, ref.name, exc
                )

    def _allow(self, ref: ObjectRef, now: float) -> bool:
        bucket = self._buckets.get(ref)
        if bucket is None:
            bucket = self._buckets[ref] = _Bucket(SPAM_BURST, now)
        bucket.tokens = min(SPAM_BURST, bucket.tokens + (now - bucket.updated) / SPAM_REFILL)
        bucket.updated = now
        if bucket.tokens < 1:
            self.dropped += 1
            return False
        bucket.tokens -= 1
        return True

    def _aggregate(
        self, ref: ObjectRef, event_type: str, reason: str, message: str, now: float
    ) -> str:
        key = (ref, event_type, reason)
        recent = [(t, m) for t, m in self._similar.get(key, []) if now - t < SIMILAR_WINDOW]
        if message not in {m for _, m in recent}:
            recent.append((now, message))
        self._similar[key] = recent
        if len({m for _, m in recent}) > MAX_SIMILAR:
            return f"(combined from similar events): {message}"
        return message

    async def _write(
        self,
        ref: ObjectRef,
        event_type: str,
        reason: str,
        message: str,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        assert self._sink is not None
        now = self._wall()
        message = self._aggregate(ref, event_type, reason, message, now)
        key = (ref, event_type, reason, message)
        seen = self._seen.get(key)
        if seen is not None and now - seen.last_seen < SIMILAR_WINDOW:
            if not self._allow(ref, now):
                return
            seen.count += 1
            seen.last_seen = now
            patch = {"count": seen.count, "lastTimestamp": rfc3339(now)}
            result = await self._sink.patch_event(seen.namespace, seen.name, patch)
            self._remember(result)
            return
        if not self._allow(ref, now):
            return
        namespace = ref.namespace or "default"
        self._sequence += 1
        name = f"{ref.name}.{int(now * 1e9) + self._sequence:x}"  # unique per recorder
        stamp = rfc3339(now)
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if annotations:
            metadata["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": metadata,
            "involvedObject": ref.to_wire(),
            "reason": reason,
            "message": message,
            "source": {"component": self.component, "host": self.node_name},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": event_type,
            "reportingComponent": self.component,
            "reportingInstance": self.node_name,
        }
        result = await self._sink.create_event(namespace, body)
        self._seen[key] = _Seen(name, namespace, 1, stamp, now)
        self._remember(result)

    def _remember(self, event: dict[str, Any]) -> None:
        self.written.append(event)
        del self.written[:-200]


async def run_event_recorder(
    node_name: str,
    sink: EventSink | None,
    wall_clock: Callable[[], float],
    *,
    task_status: trio.TaskStatus[EventRecorder] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The recorder's drain task; events only go to the log without a ``sink``."""
    recorder = EventRecorder(node_name, sink, wall_clock=wall_clock)
    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.run)
        task_status.started(recorder)
