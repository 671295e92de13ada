"""The PLEG's entry: the runtime view, the pod cache and the relist loop, as one component.

``run_pleg`` makes them, relists once (so the cache is warm before anyone reads it),
hands back a ``PlegHandle`` and relists every second until cancelled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import trio

from kubelet.cri import RuntimeClient, trace

from .cache import PodCache
from .generator import EVENT_CHANNEL_CAPACITY, Pleg, PodLifecycleEvent
from .view import RuntimeView


@attrs.frozen
class PlegHandle:
    """What the rest of the kubelet reads of the PLEG: its events (the syncLoop is the one
    consumer), the pod cache, the runtime view it lists through, and its health."""

    events: trio.MemoryReceiveChannel[PodLifecycleEvent]
    cache: PodCache
    view: RuntimeView
    healthy: Callable[[], tuple[bool, str]]
    discarded: Callable[[], int]
    """events dropped on a full channel so far (``kubelet_pleg_discard_events``)"""
    between_relists: Callable[[], Awaitable[None]]
    """Returns right after a relist ended (``Pleg.between_relists``)."""


async def run_pleg(
    runtime: RuntimeClient,
    on_relist: Callable[[float, float], None] | None = None,
    *,
    task_status: trio.TaskStatus[PlegHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Relist every second; ``on_relist(start, duration)`` after each (metrics)."""
    view = RuntimeView(runtime)
    cache = PodCache(view.pod_status, unlisted=view.unlisted)
    send, receive = trio.open_memory_channel[PodLifecycleEvent](EVENT_CHANNEL_CAPACITY)
    pleg = Pleg(view, cache, send, on_relist=on_relist)
    async with trio.open_nursery() as nursery:
        await nursery.start(pleg.run)
        if trace.TRACE is not None:  # the benchmark's: how late the loop runs the relist
            nursery.start_soon(trace.TRACE.watch_loop)
        handle = PlegHandle(
            receive, cache, view, pleg.healthy, lambda: pleg.discarded_events, pleg.between_relists
        )
        task_status.started(handle)
