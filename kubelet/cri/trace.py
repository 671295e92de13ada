"""A timing trace of CRI calls for the benchmark; off unless ``KUBELET_TRACE_FILE`` is set.

``scripts/bench_kubelet.py`` sets that variable to a file name to learn where a pod's
start or teardown spends its time: in the runtime (the CRI calls) or in the kubelet
(from the manifest's inotify event to the first call, and between calls). Each line is
one JSON object with ``time.monotonic()`` seconds:

    {"k": "call", "rpc": "RunPodSandbox", "t0": ..., "t1": ..., "pod": "default/web-node",
     "slot": ..., "prio": false}
    {"k": "inotify", "t": ..., "name": "web.yaml", "mask": 128}
    {"k": "gc", "t": ..., "d": ..., "gen": 2}
    {"k": "lag", "t": ..., "d": ..., "cpu": ...}

``gc`` is one collection of the cyclic collector taking ``GC_MIN`` or more (``t`` its
start), so that a slow PLEG relist can be told apart from a collection pause. ``lag`` is
how late the loop woke a task that sleeps ``LAG_PERIOD`` (past ``LAG_MIN``; ``t`` the
wake-up): the Trio loop busy with other work (``cpu``, the loop thread's CPU time over
the sleep and its lateness, near both) or the process waiting for a core (``cpu`` near
none: a loaded machine). The lag watcher wakes 100 times a second,
so it only runs when ``KUBELET_TRACE_LAG`` is set too.

``slot`` is when the call got one of the channel's call slots (``t0`` to ``slot``: waiting
for one; ``prio``: from the PLEG's lane of its own, ``kubelet.cri.channel.PRIORITY``).

``pod`` is the pod whose worker made the call ("" for the PLEG, probes and the rest): the
pod workers set :data:`POD` in their task, and Trio hands a task's context to the tasks
it starts. Off, the cost is one ``is None`` test per CRI call and per inotify read.
"""

from __future__ import annotations

import atexit
import contextvars
import gc
import json
import os
import time
from typing import IO, Any

import trio

ENV = "KUBELET_TRACE_FILE"
LAG_ENV = "KUBELET_TRACE_LAG"
GC_MIN = 0.0005
LAG_PERIOD = 0.01
LAG_MIN = 0.002

POD: contextvars.ContextVar[str] = contextvars.ContextVar("kubelet_trace_pod", default="")
"""The pod (``namespace/name``) the current task works for."""


class Trace:
    """Appends JSON lines to one file; buffered, flushed at exit and every 64 KiB."""

    def __init__(self, path: str) -> None:
        self._file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 (lives on)
        atexit.register(self._file.flush)

    def record(self, kind: str, **fields: Any) -> None:
        self._file.write(json.dumps({"k": kind, **fields}, separators=(",", ":")) + "\n")

    def flush(self) -> None:
        self._file.flush()

    def watch_gc(self) -> None:
        """Record the collector's pauses from now on."""
        started = 0.0

        def on_gc(phase: str, info: dict[str, int]) -> None:
            nonlocal started
            if phase == "start":
                started = time.monotonic()
            elif (d := time.monotonic() - started) >= GC_MIN:
                self.record("gc", t=started, d=d, gen=info["generation"])

        gc.callbacks.append(on_gc)

    async def watch_loop(self) -> None:
        """Record the loop's lateness until cancelled (when ``KUBELET_TRACE_LAG`` is set)."""
        if not os.environ.get(LAG_ENV):
            return
        while True:
            due, cpu = time.monotonic() + LAG_PERIOD, time.thread_time()
            await trio.sleep(LAG_PERIOD)
            if (late := time.monotonic() - due) >= LAG_MIN:
                self.record("lag", t=time.monotonic(), d=late, cpu=time.thread_time() - cpu)


TRACE: Trace | None = None
"""The trace when enabled (see :func:`enable_from_environment`), else None."""


def enable_from_environment() -> None:
    """Start tracing when ``KUBELET_TRACE_FILE`` names a file (the benchmark does)."""
    global TRACE
    path = os.environ.get(ENV)
    if path and TRACE is None:
        TRACE = Trace(path)
        TRACE.watch_gc()
