"""One watch stream: ``?watch=1`` answered as newline-delimited JSON events.

The response is 200 and then, one JSON object per line, ``{"type": ..., "object": ...}``
with ADDED, MODIFIED, DELETED, BOOKMARK or ERROR. As upstream:

* a too-old ``resourceVersion`` is not an HTTP error: the stream opens and carries one
  ERROR event whose object is a 410 Expired Status ("too old resource version: N (M)"),
  then ends; a client must relist;
* ``allowWatchBookmarks=true`` gets BOOKMARK events (only ``metadata.resourceVersion``
  set) at least every ``bookmark_interval`` seconds; ``sendInitialEvents=true`` sends the
  current state as ADDED, then a BOOKMARK annotated ``k8s.io/initial-events-end``;
* ``timeoutSeconds`` ends the stream cleanly at that time (the server's default, if
  configured, otherwise); a watcher that falls too far behind is ended the same way.

``WatchHandle`` lets the server end a stream from outside: cleanly (the client sees
EOF, as when the API server closes watches) or by cutting the connection.
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs
import trio

from .apierrors import StatusError
from .apiresources import ResourceType
from .apistore import ApiStore, Watcher
from .httpserver import AbortConnection, Send
from .selectors import Matcher

__all__ = ["WatchHandle", "WatchParams", "encode", "run_watch"]

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def encode(obj: Any) -> bytes:
    """Compact JSON, as Go's encoder writes it."""
    return json.dumps(obj, separators=(",", ":")).encode()


@attrs.frozen
class WatchParams:
    rt: ResourceType
    namespace: str | None
    match: Matcher
    since: int | None
    bookmarks: bool
    bookmark_interval: float
    timeout: float | None
    initial_events: bool = False
    expire: bool = False


@attrs.define(eq=False)
class WatchHandle:
    """An open stream, as the server sees it (for ``drop_watches``).

    Ending closes the watcher's channel, so the stream stops between two events and
    never cuts one in half; ``abort`` then cuts the connection instead of ending the
    chunked body cleanly.
    """

    resource: str
    watcher: Watcher | None = None
    ended: bool = False
    abort: bool = False
    events_sent: int = 0

    def end(self, *, abort: bool) -> None:
        self.ended, self.abort = True, abort
        if self.watcher is not None:
            self.watcher.close()


def _event(kind: str, obj: Any) -> bytes:
    return encode({"type": kind, "object": obj}) + b"\n"


def _bookmark(rt: ResourceType, version: int, annotations: dict[str, str] | None = None) -> bytes:
    metadata: dict[str, Any] = {"resourceVersion": str(version)}
    if annotations:
        metadata["annotations"] = annotations
    return _event("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": metadata})


async def run_watch(send: Send, store: ApiStore, params: WatchParams, handle: WatchHandle) -> None:
    """Write the stream until timeout, the client leaving, or ``handle`` ending it."""
    rt = params.rt
    if params.expire:
        err = StatusError.expired(f"too old resource version: {params.since or 0} ({store.rv})")
        await send(_event("ERROR", err.body()))
        return
    try:
        since = None if params.initial_events else params.since
        first, watcher = store.watch(rt, params.namespace, params.match, since)
    except StatusError as err:
        await send(_event("ERROR", err.body()))
        return
    handle.watcher = watcher
    if handle.ended:
        watcher.close()
    try:
        await _stream(send, store, params, handle, first, watcher)
    finally:
        store.unwatch(watcher)
    if handle.abort:
        raise AbortConnection


async def _stream(
    send: Send,
    store: ApiStore,
    params: WatchParams,
    handle: WatchHandle,
    first: list[tuple[str, Any]],
    watcher: Watcher,
) -> None:
    """Only the wait for the next event is ever interrupted, never a write."""
    rt = params.rt
    for kind, obj in first:
        await send(_event(kind, obj))
        handle.events_sent += 1
    if params.initial_events:
        await send(_bookmark(rt, store.rv, {INITIAL_EVENTS_END: "true"}))
    now = trio.current_time()
    ends_at = now + params.timeout if params.timeout else math.inf
    interval = params.bookmark_interval if params.bookmarks else math.inf
    next_bookmark = now + interval
    while True:
        item: tuple[str, Any] | None = None
        with trio.move_on_at(min(next_bookmark, ends_at)):
            try:
                item = await watcher.receive.receive()
            except trio.EndOfChannel:
                return
        if item is not None:
            await send(_event(*item))
            handle.events_sent += 1
            continue
        if trio.current_time() >= ends_at:
            return
        # Send what is already queued first: a bookmark promises nothing older follows.
        while True:
            try:
                item = watcher.receive.receive_nowait()
            except trio.WouldBlock:
                break
            except trio.EndOfChannel:
                return
            await send(_event(*item))
            handle.events_sent += 1
        await send(_bookmark(rt, store.rv))
        next_bookmark += interval
