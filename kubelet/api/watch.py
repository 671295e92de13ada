"""The reflector: keep a local view of a collection through list + watch, forever.

client-go's Reflector behaviour, kept:
* list (paged; the first list at resourceVersion "0", from the server's watch cache),
  then watch from the list's resourceVersion with bookmarks and a 5-10 minute
  ``timeoutSeconds``; an ended watch resumes from the last resourceVersion seen
  (events and bookmarks both move it), so nothing is lost or replayed twice;
* 410 Gone (as the watch's status or as an ERROR event) ⇒ relist, first at the last
  resourceVersion ("not older than"), and if the server has compacted that too, at ""
  (a consistent read);
* any other failure ⇒ back off (800 ms doubling to 30 s, jittered up to 2x, starting
  over after 2 minutes without failures, like client-go's backoff manager) and resume;
  a watch that closes within a second without events counts as a failure;
* the handler sees ``Relisted`` (the full list, after each list) or a ``WatchEvent``.

``UidStore`` turns that into SET semantics (upstream's UndeltaStore, which the API pod
source uses): it keeps uid → object and calls back with the full current list after
each change, so a consumer never has to reconcile deltas itself.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs
import trio

from .converter import WireError
from .errors import ApiError, Gone
from .resources import WatchEvent, random_watch_timeout
from .wellformed import describe, shorten

if TYPE_CHECKING:
    from .client import ApiClient

__all__ = [
    "Handler",
    "ListWatch",
    "Relisted",
    "UidStore",
    "WatchBackoff",
    "object_key",
    "reflect",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

SHORT_WATCH = 1.0
"""A watch that ends sooner than this with no events is treated as a failure
(client-go: "very short watch"), so a server closing at once is not hammered."""


@attrs.frozen
class ListWatch:
    """What to reflect: a collection path (``PODS.path()``) and its selectors."""

    path: str
    label_selector: str = ""
    field_selector: str = ""
    page_size: int = 500


@attrs.frozen
class Relisted:
    """The complete collection as of ``resource_version``; replaces everything before."""

    items: list[dict[str, Any]]
    resource_version: str


Handler = Callable[[Relisted | WatchEvent], Awaitable[None]]


class WatchBackoff:
    """client-go's reflector backoff: ``initial`` doubling to ``cap``, each delay
    stretched by up to ``jitter`` × itself; starts over when the last failure was more
    than ``reset_after`` ago (a healthy stretch)."""

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        *,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        rng: random.Random | None = None,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self.rng = rng or random.Random()
        self._next = initial
        self._last: float | None = None

    def next_delay(self) -> float:
        """The delay for this failure, advancing the sequence."""
        now = trio.current_time()
        if self._last is None or now - self._last > self.reset_after:
            self._next = self.initial
        self._last = now
        delay = self._next
        self._next = min(self._next * self.factor, self.cap)
        return delay * (1.0 + self.rng.random() * self.jitter) if self.jitter > 0 else delay

    async def sleep(self) -> None:
        await trio.sleep(self.next_delay())


class _Reflector:
    def __init__(
        self,
        client: ApiClient,
        target: ListWatch,
        handler: Handler,
        backoff: WatchBackoff,
        rng: random.Random | None,
    ) -> None:
        self.client = client
        self.target = target
        self.handler = handler
        self.backoff = backoff
        self.rng = rng
        self.resource_version = ""
        """Last seen; "" until the first list."""
        self.rv_unavailable = False
        self.events = 0

    def relist_resource_version(self) -> str:
        if self.rv_unavailable:
            return ""
        return self.resource_version or "0"

    async def list(self) -> None:
        rv = self.relist_resource_version()
        # Paging from the watch cache is ignored by the server; for a specific version,
        # client-go lists without limit to be served from the cache, not etcd.
        page_size = self.target.page_size if rv in ("", "0") else 0
        try:
            result = await self.client.list_all(
                self.target.path,
                label_selector=self.target.label_selector,
                field_selector=self.target.field_selector,
                resource_version=rv,
                page_size=page_size,
            )
        except Gone:
            if rv == "":
                raise
            log.info("list %s at %s: expired; listing at the newest", self.target.path, rv)
            self.rv_unavailable = True
            result = await self.client.list_all(
                self.target.path,
                label_selector=self.target.label_selector,
                field_selector=self.target.field_selector,
                page_size=self.target.page_size,
            )
        self.rv_unavailable = False
        await self.handler(Relisted(result.items, result.resource_version))
        self.resource_version = result.resource_version

    async def on_event(self, event: WatchEvent) -> None:
        if event.type in ("ADDED", "MODIFIED", "DELETED"):
            await self.handler(event)
        elif event.type != "BOOKMARK":
            log.warning("watch %s: ignoring an event of type %r", self.target.path, event.type)
            return
        self.events += 1
        if event.resource_version:
            self.resource_version = event.resource_version

    async def watch(self) -> None:
        """One watch from the last resourceVersion, until it ends."""
        started = trio.current_time()
        self.events = 0

        async def on_event(event: WatchEvent) -> None:
            await self.on_event(event)

        await self.client.watch(
            self.target.path,
            on_event,
            resource_version=self.resource_version,
            allow_bookmarks=True,
            timeout_seconds=random_watch_timeout(self.rng),
            label_selector=self.target.label_selector,
            field_selector=self.target.field_selector,
        )
        if self.events == 0 and trio.current_time() - started < SHORT_WATCH:
            raise ApiError(0, "", f"watch {self.target.path}: closed at once without any event")

    async def run(self, task_status: trio.TaskStatus[None]) -> None:
        need_list = True
        started = False
        while True:
            try:
                if need_list:
                    await self.list()
                    need_list = False
                    if not started:
                        task_status.started()
                        started = True
                await self.watch()
            except Gone as exc:
                if need_list:  # even the list at "" was refused: wait before asking again
                    log.warning("list %s failed: %s", self.target.path, exc)
                    await self.backoff.sleep()
                else:
                    log.info("watch %s: %s; relisting", self.target.path, exc)
                need_list = True
            except ApiError as exc:
                action = "list" if need_list else "watch"
                log.warning("%s %s failed: %s", action, self.target.path, exc)
                await self.backoff.sleep()


async def reflect(
    client: ApiClient,
    target: ListWatch,
    handler: Handler,
    *,
    backoff: WatchBackoff | None = None,
    rng: random.Random | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """List and watch ``target`` until cancelled, feeding ``handler``.

    ``task_status.started()`` is called once the first list has reached the handler:
    ``await nursery.start(reflect, ...)`` waits for the initial sync (upstream's
    WaitForCacheSync), ``start_soon`` does not. Errors from ``handler`` propagate: the
    handler is ours, so its failure is a bug, not an API problem.
    """
    delays = backoff or WatchBackoff(rng=rng)
    await _Reflector(client, target, handler, delays, rng).run(task_status)


# -- SET semantics --------------------------------------------------------------------


def object_key(obj: dict[str, Any]) -> str:
    """An object's identity: its uid, else namespace/name (objects in tests). The client
    hands on only objects whose metadata is a map of strings; this holds regardless."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    uid = meta.get("uid")
    if isinstance(uid, str) and uid:
        return uid
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _identity(obj: dict[str, Any]) -> Any:
    return obj


class UidStore(Generic[T]):
    """A reflector handler keeping uid → object and calling ``on_change`` with the full
    current list after every list and every event (upstream's UndeltaStore).

    ``decode`` turns the raw dict into the consumer's type (``lambda d: from_wire(Pod,
    d)``). An object that does not decode is logged and its last good version kept (or
    it is left out if there is none): one bad object must not make the kubelet drop
    every pod, nor stop the stream.
    """

    def __init__(
        self,
        on_change: Callable[[list[T]], Awaitable[None]],
        decode: Callable[[dict[str, Any]], T] = _identity,
    ) -> None:
        self.on_change = on_change
        self.decode = decode
        self.objects: dict[str, T] = {}

    def _decoded(self, key: str, raw: dict[str, Any]) -> T | None:
        try:
            return self.decode(raw)
        except (WireError, ValueError, TypeError) as exc:
            log.error(
                "ignoring an undecodable object %s: %s", describe(raw), shorten(str(exc), 500)
            )
            return self.objects.get(key)

    def _replace(self, items: Sequence[dict[str, Any]]) -> None:
        objects: dict[str, T] = {}
        for raw in items:
            key = object_key(raw)
            obj = self._decoded(key, raw)
            if obj is not None:
                objects[key] = obj
        self.objects = objects

    async def __call__(self, update: Relisted | WatchEvent) -> None:
        if isinstance(update, Relisted):
            self._replace(update.items)
        else:
            key = object_key(update.object)
            if update.type == "DELETED":
                self.objects.pop(key, None)
            else:
                obj = self._decoded(key, update.object)
                if obj is not None:
                    self.objects[key] = obj
        await self.on_change(list(self.objects.values()))

    def items(self) -> list[T]:
        """The current objects."""
        return list(self.objects.values())
