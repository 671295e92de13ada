"""PodConfig: merge the pods every source wants into one ordered stream of changes.

Each source (``file``, ``http``, ``api``) says what it wants with SET (the full list) or
ADD/UPDATE/DELETE/REMOVE (deltas). :class:`PodStorage` keeps one map UID → pod per source
and turns each of those messages into the *minimal* normalised updates the syncLoop
acts on, in upstream's INCREMENTAL order: REMOVE, ADD, UPDATE, DELETE, (an empty ADD the
first time a source SETs, so the syncLoop learns the source is ready), RECONCILE.

:class:`PodStorage` is pure (no I/O, no trio) so the merge vectors of test_podconfig.py test
it directly; :class:`PodConfig` is the trio shell around it: one task merges every
source's messages in arrival order and sends the results on a small memory channel, so
nothing is reordered or dropped and a slow syncLoop pushes back on the sources.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol

import attrs
import trio

from kubelet.api import Pod
from kubelet.cri import labels

log = logging.getLogger(__name__)
FILE_SOURCE = "file"
HTTP_SOURCE = "http"
API_SOURCE = "api"
ALL_SOURCE = "*"
"""The source of a :meth:`PodStorage.sync` snapshot: every source at once."""

UPDATES_BUFFER = 50
"""Upstream's buffer for the merged update channel; small, so back-pressure is real."""

_LOCAL_ANNOTATIONS = (labels.CONFIG_SOURCE, labels.CONFIG_MIRROR, labels.CONFIG_SEEN)
"""Annotations the kubelet writes itself; a source changing them is not a change."""


class PodOperation(enum.Enum):
    """What a :class:`PodUpdate` means (upstream's kubetypes.PodOperation)."""

    SET = "SET"
    """The source's complete list of pods (from a source) or of all pods (a sync)."""
    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    """A graceful delete: the pod got a deletionTimestamp."""
    REMOVE = "REMOVE"
    """The pod is gone from its source: stop it now."""
    RECONCILE = "RECONCILE"
    """Only the status differs: the kubelet owns status, so reconcile it."""


@attrs.frozen
class PodUpdate:
    """One normalised change: ``op`` on ``pods``, all from ``source``."""

    op: PodOperation
    source: str
    pods: tuple[Pod, ...] = ()


EventSink = Callable[[Pod, str, str, str], None]
"""``(pod, type, reason, message)``, like an event recorder: type is Normal/Warning."""


def rfc3339_now() -> str:
    """Now in UTC as RFC 3339 with nanosecond-style fraction (the config.seen format)."""
    text = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".")
    return text + "Z"


class WatchObserver(Protocol):
    """Hears of every pod the API source delivers and of each pod it drops (the pod
    startup SLI: ``kubelet.podstartup``)."""

    def observed_on_watch(self, pod: Pod) -> None: ...

    def forget(self, uid: str) -> None: ...


class PodStorage:
    """The per-source pod maps and the merge rules; pure, so it is tested on its own."""

    def __init__(
        self,
        sources: Iterable[str] = (),
        on_event: EventSink | None = None,
        clock: Callable[[], str] = rfc3339_now,
        watch: WatchObserver | None = None,
        *,
        view: Callable[[Pod], Pod] | None = None,
    ) -> None:
        self._view = view
        """How the kubelet reads each incoming pod (a disabled gate's fields dropped,
        ``api/dropfields.py``); None: as it came."""
        self._pods: dict[str, dict[str, Pod]] = {}
        self._refs: dict[str, dict[str, Pod]] = {}
        """Per source, the pod object each stored pod was last made from: the API source
        resends every pod on every event, and the very same object means no change."""
        self._sources: set[str] = set(sources)
        self._seen_set: set[str] = set()
        self._duplicates: dict[str, set[tuple[str, str]]] = {}
        """Per source, the (full name, UID) of each pod dropped as a duplicate and already
        reported: reported again only after it stopped being one."""
        self._on_event = on_event
        self._clock = clock
        self._watch = watch

    # -- sources ------------------------------------------------------------------------

    def register(self, source: str) -> None:
        """Declare a source: the node is not ready until it has sent a SET."""
        self._sources.add(source)

    @property
    def sources(self) -> frozenset[str]:
        return frozenset(self._sources)

    def sources_ready(self) -> bool:
        """Every registered source has sent at least one SET (an ADD does not count)."""
        return self._sources <= self._seen_set

    def seen_all_sources(self, seen: Collection[str]) -> bool:
        """Upstream's SeenAllSources: ``seen`` covers every source and each has SET."""
        return self._sources <= set(seen) and self.sources_ready()

    # -- state --------------------------------------------------------------------------

    def all_pods(self) -> list[Pod]:
        """Every pod of every source, as stored (local annotations included)."""
        return [pod for pods in self._pods.values() for pod in pods.values()]

    def sync(self) -> PodUpdate:
        """The whole merged state as one SET from ``*`` (upstream's Sync)."""
        return PodUpdate(PodOperation.SET, ALL_SOURCE, tuple(self.all_pods()))

    # -- merge --------------------------------------------------------------------------

    def merge(
        self,
        source: str,
        op: PodOperation,
        pods: Sequence[Pod],
        now: str | None = None,
        origins: Mapping[str, str] | None = None,
    ) -> list[PodUpdate]:
        """Apply one message from ``source``; return the updates to emit, in order.

        ``now`` stamps ``config.seen`` on new pods (the clock when omitted); ``origins``
        (UID → file or URL) names where a pod came from in what is logged about it.
        """
        self._sources.add(source)
        first_set = op is PodOperation.SET and source not in self._seen_set
        seen = now if now is not None else self._clock()
        stored = self._pods.get(source, {})
        result = _Merged()

        refs = self._refs.get(source, {})
        if op in (PodOperation.ADD, PodOperation.UPDATE, PodOperation.DELETE):
            pods = self._drop_duplicates(pods, source, origins or {}, whole=False)
            self._absorb(source, pods, stored, stored, refs, refs, seen, result)
        elif op is PodOperation.REMOVE:
            for pod in pods:
                existing = stored.pop(pod.uid, None)
                refs.pop(pod.uid, None)
                if existing is not None:
                    result.removes.append(existing)
        elif op is PodOperation.SET:
            self._seen_set.add(source)
            fresh: dict[str, Pod] = {}
            fresh_refs: dict[str, Pod] = {}
            pods = self._drop_duplicates(pods, source, origins or {}, whole=True)
            self._absorb(source, pods, stored, fresh, refs, fresh_refs, seen, result)
            result.removes.extend(p for uid, p in stored.items() if uid not in fresh)
            stored, refs = fresh, fresh_refs
        else:
            log.warning("ignoring update with operation %s from source %s", op, source)
        self._pods[source] = stored
        self._refs[source] = refs
        if self._watch is not None and source == API_SOURCE:
            self._tell_watch(pods if op is not PodOperation.REMOVE else (), result.removes)
        return result.emit(source, first_set)

    def _tell_watch(self, delivered: Sequence[Pod], removed: Sequence[Pod]) -> None:
        """Every pod the API delivered, as upstream tells its startup tracker on each
        watch update (mirror pods included: they are API pods); the removed ones dropped."""
        assert self._watch is not None
        for pod in delivered:
            self._watch.observed_on_watch(pod)
        for pod in removed:
            self._watch.forget(pod.uid)

    def _absorb(
        self,
        source: str,
        incoming: Sequence[Pod],
        old: Mapping[str, Pod],
        new: dict[str, Pod],
        old_refs: Mapping[str, Pod],
        new_refs: dict[str, Pod],
        seen: str,
        result: _Merged,
    ) -> None:
        """Upstream's updatePodsFunc: classify each incoming pod against ``old``."""
        for ref in incoming:
            uid = ref.uid
            existing = old.get(uid)
            if existing is not None and old_refs.get(uid) is ref:
                new[uid] = existing  # the object it was made from: nothing changed
                new_refs[uid] = ref
                continue
            new_refs[uid] = ref
            if self._view is not None:
                ref = self._view(ref)
            ref = _with_annotations(ref, {**ref.metadata.annotations, labels.CONFIG_SOURCE: source})
            if existing is None:
                ref = _with_annotations(ref, {**ref.metadata.annotations, labels.CONFIG_SEEN: seen})
                new[ref.uid] = ref
                result.adds.append(ref)
                continue
            updated, kind = check_and_update(existing, ref)
            new[ref.uid] = updated
            if kind is PodOperation.UPDATE:
                result.updates.append(updated)
            elif kind is PodOperation.DELETE:
                result.deletes.append(updated)
            elif kind is PodOperation.RECONCILE:
                result.reconciles.append(updated)

    def _drop_duplicates(
        self, pods: Sequence[Pod], source: str, origins: Mapping[str, str], *, whole: bool
    ) -> list[Pod]:
        """Keep the first pod of each full name in one update; report the others.

        Reported (a log line naming the file or URL, and a FailedValidation event) when
        a pod becomes a duplicate, not at every relist that still finds it one; ``whole``
        (a SET) says the update is the source's whole list, so what is no longer found
        has stopped being a duplicate.
        """
        first: dict[str, Pod] = {}
        kept: list[Pod] = []
        reported = self._duplicates.setdefault(source, set())
        found: set[tuple[str, str]] = set()
        for pod in pods:
            winner = first.setdefault(pod.full_name, pod)
            if winner is pod:
                kept.append(pod)
                continue
            key = (pod.full_name, pod.uid)
            found.add(key)
            if key in reported:
                continue
            where = origins.get(pod.uid)
            log.warning(
                "pod failed validation due to duplicate pod name, ignoring: pod=%s source=%s%s",
                pod.key,
                source,
                f" from={where} (the pod from {origins.get(winner.uid, '?')} keeps the name)"
                if where
                else "",
            )
            if self._on_event is not None:
                message = (
                    f"Error validating pod {pod.full_name}({pod.uid}) from {where or source} "
                    f"due to duplicate pod name {pod.metadata.name!r}, ignoring"
                )
                self._on_event(pod, "Warning", "FailedValidation", message)
        if whole:
            for full_name, uid in sorted(reported - found):
                log.info(
                    "pod %s (UID %s) from source %s is no longer a duplicate",
                    full_name,
                    uid,
                    source,
                )
            self._duplicates[source] = found
        else:
            reported |= found
        return kept


@attrs.define
class _Merged:
    adds: list[Pod] = attrs.Factory(list)
    updates: list[Pod] = attrs.Factory(list)
    deletes: list[Pod] = attrs.Factory(list)
    removes: list[Pod] = attrs.Factory(list)
    reconciles: list[Pod] = attrs.Factory(list)

    def emit(self, source: str, first_set: bool) -> list[PodUpdate]:
        out: list[PodUpdate] = []

        def add(op: PodOperation, pods: list[Pod]) -> None:
            if pods:
                out.append(PodUpdate(op, source, tuple(pods)))

        add(PodOperation.REMOVE, self.removes)
        add(PodOperation.ADD, self.adds)
        add(PodOperation.UPDATE, self.updates)
        add(PodOperation.DELETE, self.deletes)
        if first_set and not (self.adds or self.updates or self.deletes):
            out.append(PodUpdate(PodOperation.ADD, source, ()))
        add(PodOperation.RECONCILE, self.reconciles)
        return out


# -- change classification (pure) -----------------------------------------------------------


def _with_annotations(pod: Pod, annotations: Mapping[str, str]) -> Pod:
    return attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, annotations=dict(annotations)))


def _public(annotations: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in annotations.items() if k not in _LOCAL_ANNOTATIONS}


def pods_differ_semantically(existing: Pod, ref: Pod) -> bool:
    """A change the syncLoop must act on: spec, labels, deletion, non-local annotations."""
    a, b = existing.metadata, ref.metadata
    return (
        existing.spec != ref.spec
        or dict(a.labels) != dict(b.labels)
        or a.deletion_timestamp != b.deletion_timestamp
        or a.deletion_grace_period_seconds != b.deletion_grace_period_seconds
        or _public(a.annotations) != _public(b.annotations)
    )


def check_and_update(existing: Pod, ref: Pod) -> tuple[Pod, PodOperation | None]:
    """The stored pod after ``ref`` arrives, and what kind of change it was.

    UPDATE/DELETE copy spec, labels, deletion fields, generation, resourceVersion, status
    and annotations from ``ref`` but keep the stored pod's local annotations
    (``config.seen`` above all); a status-only change is a RECONCILE (with the new
    resourceVersion); no change returns ``existing`` and None.
    """
    if not pods_differ_semantically(existing, ref):
        if existing.status != ref.status:
            # the version goes with the status: the status manager tells its own writes
            # from others' by it
            version = ref.metadata.resource_version
            meta = attrs.evolve(existing.metadata, resource_version=version)
            return attrs.evolve(existing, metadata=meta, status=ref.status), PodOperation.RECONCILE
        return existing, None
    annotations = dict(ref.metadata.annotations)
    annotations[labels.CONFIG_SEEN] = existing.metadata.annotations.get(labels.CONFIG_SEEN, "")
    for key in _LOCAL_ANNOTATIONS:
        if key in existing.metadata.annotations:
            annotations[key] = existing.metadata.annotations[key]
    meta = attrs.evolve(
        existing.metadata,
        labels=dict(ref.metadata.labels),
        deletion_timestamp=ref.metadata.deletion_timestamp,
        deletion_grace_period_seconds=ref.metadata.deletion_grace_period_seconds,
        generation=ref.metadata.generation,
        resource_version=ref.metadata.resource_version,
        annotations=annotations,
    )
    updated = attrs.evolve(existing, metadata=meta, spec=ref.spec, status=ref.status)
    if ref.metadata.deletion_timestamp is not None:
        return updated, PodOperation.DELETE
    return updated, PodOperation.UPDATE


# -- the trio shell --------------------------------------------------------------------------


class UpdateSink(Protocol):
    """Where a source sends what it wants: :class:`PodConfig`, or a test double."""

    def register(self, source: str) -> None: ...

    async def update(
        self,
        source: str,
        op: PodOperation,
        pods: Sequence[Pod],
        *,
        origins: Mapping[str, str] | None = None,
    ) -> None: ...


@attrs.frozen
class _Message:
    source: str
    op: PodOperation | None  # None: a sync request
    pods: tuple[Pod, ...] = ()
    origins: Mapping[str, str] | None = None


class PodConfig:
    """Sources in, one ordered stream of :class:`PodUpdate` out (``updates``).

    Run :meth:`run` in a nursery *before* the sources (``await nursery.start(config.run)``);
    sources call ``await config.update(source, op, pods)``. The syncLoop is the only
    reader of ``updates``.
    """

    INPUT_BUFFER = 8
    """A few messages may wait for the merge task, so startup order cannot deadlock."""

    def __init__(
        self,
        sources: Iterable[str] = (),
        *,
        on_event: EventSink | None = None,
        clock: Callable[[], str] = rfc3339_now,
        buffer: int = UPDATES_BUFFER,
        watch: WatchObserver | None = None,
        view: Callable[[Pod], Pod] | None = None,
    ) -> None:
        self.storage = PodStorage(sources, on_event, clock, watch, view=view)
        self._in_send, self._in_recv = trio.open_memory_channel[_Message](self.INPUT_BUFFER)
        self._out_send, self.updates = trio.open_memory_channel[PodUpdate](buffer)

    def register(self, source: str) -> None:
        """Declare a source now, so readiness waits for it even before it first speaks."""
        self.storage.register(source)

    async def update(
        self,
        source: str,
        op: PodOperation,
        pods: Sequence[Pod],
        *,
        origins: Mapping[str, str] | None = None,
    ) -> None:
        """Queue one message from ``source``; merged in arrival order by :meth:`run`.

        ``origins`` maps pod UIDs to the file or URL they came from, for the log.
        """
        self.storage.register(source)
        await self._in_send.send(_Message(source, op, tuple(pods), origins))

    async def sync(self) -> None:
        """Ask for a SET(``*``) of the whole merged state, in order with the merges."""
        await self._in_send.send(_Message(ALL_SOURCE, None))

    def seen_all_sources(self, seen: Collection[str]) -> bool:
        return self.storage.seen_all_sources(seen)

    def sources_ready(self) -> bool:
        return self.storage.sources_ready()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The one merging task: it owns the storage, so merges never interleave."""
        task_status.started()
        async with self._in_recv, self._out_send:
            async for message in self._in_recv:
                if message.op is None:
                    out = [self.storage.sync()]
                else:
                    out = self.storage.merge(
                        message.source, message.op, message.pods, origins=message.origins
                    )
                for update in out:
                    await self._out_send.send(update)
