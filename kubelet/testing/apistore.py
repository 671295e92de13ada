"""The in-memory store behind FakeApiServer: objects, resourceVersions, watch fan-out.

Like etcd behind the real API server, it knows nothing of HTTP or of kinds' rules
(status subresources, graceful deletion); it keeps JSON objects, stamps them and tells
watchers. What clients depend on:

* ``resourceVersion`` is one global counter, bumped by every write and copied into the
  object it wrote; a List carries the counter at the time it was read. A write that
  changes nothing is not a write: no new version, no event (as the real registry).
* A bounded history of events (``history`` of them) serves watches that start from a
  resourceVersion and list pages (``continue``) at the version of their first page;
  anything older than the window is gone (``compacted``) and gets 410 Expired.
* Watchers get events through trio memory channels. Selectors are applied per watcher
  as the watch cache does: an object that starts matching arrives as ADDED, one that
  stops matching as DELETED (its last matching state at the new version). A watcher
  that falls ``WATCH_BUFFER`` events behind is closed, as upstream drops slow watchers.
* Reads hand out copies; nothing a test does to a returned dict changes the store.

Synchronous on purpose: every operation completes without a checkpoint, so a read-check-
write in a handler is atomic under trio without locks.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar, cast

import attrs
import trio

from .apierrors import StatusError
from .apiresources import ResourceType
from .selectors import Matcher

__all__ = ["WATCH_BUFFER", "ApiStore", "StoreEvent", "Watcher", "clone"]

WATCH_BUFFER = 10_000
ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
_UID_NAMESPACE = uuid.UUID("6ba7b812-9dad-11d1-80b4-00c04fd430c8")

T = TypeVar("T")
Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


def clone(obj: T) -> T:
    """A deep copy of a JSON document (faster than copy.deepcopy for plain JSON)."""
    return cast(T, json.loads(json.dumps(obj)))


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def rv_of(obj: Mapping[str, Any]) -> int:
    return int(meta(obj).get("resourceVersion") or 0)


@attrs.frozen
class StoreEvent:
    """One committed write. For DELETED, ``obj`` is the last state at the new version."""

    type: str
    resource: str
    key: Key
    rv: int
    obj: Obj
    prev: Obj | None


@attrs.define(eq=False)
class Watcher:
    """One open watch: its filter and the channel its events arrive on."""

    resource: str
    namespace: str | None
    match: Matcher
    send: trio.MemorySendChannel[tuple[str, Obj]]
    receive: trio.MemoryReceiveChannel[tuple[str, Obj]]
    overflowed: bool = False

    def offer(self, event: StoreEvent) -> None:
        """Translate a store event for this watcher's selectors and queue it."""
        translated = self.translate(event)
        if translated is not None:
            self._push(*translated)

    def translate(self, event: StoreEvent) -> tuple[str, Obj] | None:
        """What this watcher sees of ``event``, if anything (the watch cache's rules)."""
        if event.resource != self.resource:
            return None
        if self.namespace is not None and event.key[0] != self.namespace:
            return None
        now = event.type != DELETED and self.match(event.obj)
        before = event.prev is not None and self.match(event.prev)
        if now:
            return (MODIFIED if before else ADDED), event.obj
        if before and event.prev is not None:
            gone = clone(event.prev)
            meta(gone)["resourceVersion"] = str(event.rv)
            return DELETED, gone
        return None

    def _push(self, kind: str, obj: Obj) -> None:
        if self.overflowed:
            return
        try:
            self.send.send_nowait((kind, obj))
        except trio.WouldBlock:
            self.overflowed = True
            self.send.close()
        except trio.ClosedResourceError:
            pass

    def close(self) -> None:
        self.send.close()


class ApiStore:
    """Objects by resource and key, a global resourceVersion, history and watchers."""

    def __init__(self, now: Callable[[], str], *, history: int = 1000) -> None:
        self._now = now
        self._objects: dict[str, dict[Key, Obj]] = {}
        self._history: deque[StoreEvent] = deque()
        self._history_size = history
        self._watchers: set[Watcher] = set()
        self._uids = 0
        self.uid_seed = "fakeapiserver"
        """what UIDs are derived from: a process-mode server (``main``) makes it unique,
        so that two servers in a row never hand out the same UIDs to pods on one runtime"""
        self.rv = 1
        self.compacted = 1

    # -- reads ------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        found = self._table(rt).get((self._ns(rt, namespace), name))
        return clone(found) if found is not None else None

    def require(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        found = self.get(rt, namespace, name)
        if found is None:
            raise StatusError.not_found(rt.plural, name, rt.group)
        return found

    def resources(self) -> list[str]:
        """The resource names that have (or had) objects."""
        return list(self._objects)

    def keys(self, rt: ResourceType) -> list[Key]:
        return sorted(self._table(rt))

    def items(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        match: Matcher | None = None,
        *,
        at: int | None = None,
    ) -> list[Obj]:
        """Copies of the objects (at version ``at``, default now), in key order."""
        table = self._table(rt) if at is None else self._state_at(rt, at)
        out = []
        for key in sorted(table):
            if namespace is not None and key[0] != namespace:
                continue
            if match is None or match(table[key]):
                out.append(table[key])
        return clone(out)

    def list_page(
        self,
        rt: ResourceType,
        namespace: str | None,
        match: Matcher,
        *,
        limit: int = 0,
        token: str | None = None,
        at: int | None = None,
    ) -> tuple[list[Obj], int, str | None, int | None]:
        """One page of a list: items, the list's version, a continue token, remaining.

        A continue token pins the version of the first page, so the pages of one list
        are consistent even when objects change in between (as etcd's snapshots are).
        """
        start: Key | None = None
        if token:
            at, start = self._decode_token(token)
        version = self.rv if at is None else at
        everything = self.items(rt, namespace, match, at=at)
        if start is not None:
            everything = [o for o in everything if _key_of(o) > start]
        if limit <= 0 or len(everything) <= limit:
            return everything, version, None, None
        page = everything[:limit]
        remaining = len(everything) - limit
        return page, version, self._encode_token(version, _key_of(page[-1])), remaining

    def _encode_token(self, version: int, key: Key) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": version, "start": list(key)})
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def _decode_token(self, token: str) -> tuple[int, Key]:
        try:
            padded = token + "=" * (-len(token) % 4)
            data = json.loads(base64.urlsafe_b64decode(padded))
            version, start = int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise StatusError.bad_request(f"continue key is not valid: {exc}") from exc
        if version < self.compacted:
            raise StatusError.expired(
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter, or use "
                "the continue token in this response to retrieve the remainder of the "
                "results. Continuing with the provided token results in an inconsistent "
                "list - objects that were created, modified, or deleted between the time "
                "the first chunk was returned and now may show up in the list."
            )
        return version, start

    def _state_at(self, rt: ResourceType, version: int) -> dict[Key, Obj]:
        """The resource's objects as they were at ``version``, undoing later history."""
        if version < self.compacted:
            raise StatusError.expired(f"too old resource version: {version} ({self.compacted})")
        state = dict(self._table(rt))
        for event in reversed(self._history):
            if event.rv <= version:
                break
            if event.resource != rt.name:
                continue
            if event.prev is None:
                state.pop(event.key, None)
            else:
                state[event.key] = event.prev
        return state

    # -- writes -----------------------------------------------------------------------

    def create(self, rt: ResourceType, obj: Obj) -> Obj:
        """Store a new object: uid, creationTimestamp, resourceVersion, generation."""
        obj = clone(obj)
        m = obj.setdefault("metadata", {})
        key = (self._ns(rt, m.get("namespace", "")), str(m.get("name", "")))
        if not key[1]:
            raise StatusError.invalid(
                rt.kind, "", "metadata.name", "Required value: name or generateName is required"
            )
        if key in self._table(rt):
            raise StatusError.already_exists(rt.plural, key[1], rt.group)
        if rt.namespaced:
            m["namespace"] = key[0]
        else:
            m.pop("namespace", None)
        obj = _typed(rt, obj)
        m.setdefault("uid", self._new_uid())
        m.setdefault("creationTimestamp", self._now())
        m.setdefault("generation", 1)
        return self._commit(rt, key, obj, None)

    def update(self, rt: ResourceType, obj: Obj, *, expect_rv: int | None = None) -> Obj:
        """Replace an object (its version is checked against ``expect_rv`` if given)."""
        obj = clone(obj)
        m = obj.setdefault("metadata", {})
        key = (self._ns(rt, m.get("namespace", "")), str(m.get("name", "")))
        old = self._table(rt).get(key)
        if old is None:
            raise StatusError.not_found(rt.plural, key[1], rt.group)
        if expect_rv is not None and expect_rv != rv_of(old):
            raise StatusError.stale(rt.plural, key[1], rt.group)
        obj = _typed(rt, obj)
        for fixed in ("uid", "creationTimestamp"):
            if fixed in meta(old):
                m[fixed] = meta(old)[fixed]
        if rt.namespaced:
            m["namespace"] = key[0]
        m["resourceVersion"] = meta(old).get("resourceVersion")
        if obj == old:
            return clone(old)
        return self._commit(rt, key, obj, old)

    def delete(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        """Remove an object now; returns its last state at the deletion's version."""
        key = (self._ns(rt, namespace), name)
        old = self._table(rt).get(key)
        if old is None:
            raise StatusError.not_found(rt.plural, name, rt.group)
        del self._table(rt)[key]
        self.rv += 1
        gone = clone(old)
        meta(gone)["resourceVersion"] = str(self.rv)
        self._record(StoreEvent(DELETED, rt.name, key, self.rv, gone, old))
        return clone(gone)

    def _commit(self, rt: ResourceType, key: Key, obj: Obj, old: Obj | None) -> Obj:
        self.rv += 1
        meta(obj)["resourceVersion"] = str(self.rv)
        self._table(rt)[key] = obj
        self._record(
            StoreEvent(ADDED if old is None else MODIFIED, rt.name, key, self.rv, obj, old)
        )
        return clone(obj)

    def _record(self, event: StoreEvent) -> None:
        self._history.append(event)
        while len(self._history) > self._history_size:
            self.compacted = self._history.popleft().rv
        for watcher in list(self._watchers):
            watcher.offer(event)

    def compact(self) -> None:
        """Forget all history: every older resourceVersion now gets 410 Expired."""
        self._history.clear()
        self.compacted = self.rv

    # -- watches ----------------------------------------------------------------------

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        match: Matcher,
        since: int | None,
    ) -> tuple[list[tuple[str, Obj]], Watcher]:
        """Open a watch: the events to send first, then the live watcher.

        ``since`` None means "current state first": a synthetic ADDED per matching
        object. A version means every event after it, from history. Too old: StatusError 410.
        """
        if since is not None and since < self.compacted:
            raise StatusError.expired(f"too old resource version: {since} ({self.compacted})")
        send, receive = trio.open_memory_channel[tuple[str, Obj]](WATCH_BUFFER)
        watcher = Watcher(rt.name, namespace, match, send, receive)
        if since is None:
            first = [(ADDED, o) for o in self.items(rt, namespace, match)]
        else:
            replayed = (watcher.translate(e) for e in self._history if e.rv > since)
            first = [(kind, clone(obj)) for kind, obj in filter(None, replayed)]
        self._watchers.add(watcher)
        return first, watcher

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)
        watcher.close()

    def watchers(self) -> Iterator[Watcher]:
        return iter(list(self._watchers))

    # -- helpers ----------------------------------------------------------------------

    def _table(self, rt: ResourceType) -> dict[Key, Obj]:
        return self._objects.setdefault(rt.name, {})

    @staticmethod
    def _ns(rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rt.namespaced else ""

    def _new_uid(self) -> str:
        """Deterministic UUIDs: the same in-process test gets the same uids every run."""
        self._uids += 1
        return str(uuid.uuid5(_UID_NAMESPACE, f"{self.uid_seed}-{self._uids}"))


def _typed(rt: ResourceType, obj: Obj) -> Obj:
    """kind and apiVersion first, as the API server writes them."""
    rest = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    return {"kind": rt.kind, "apiVersion": rt.api_version, **rest}


def _key_of(obj: Mapping[str, Any]) -> Key:
    m = meta(obj)
    return (str(m.get("namespace", "")), str(m.get("name", "")))
