"""``/debug/pprof/``: what a Python process can tell in place of Go's profiles.

* ``/debug/pprof/profile?seconds=N`` (default 30, at most :data:`MAX_SECONDS`): a CPU
  profile of the event loop's thread, sampled every 10 ms from a helper thread for N
  seconds, as collapsed stacks (``outer;inner;leaf count``, flamegraph.pl's input),
  hottest first;
* ``/debug/pprof/goroutine``: the Trio task tree, each task with where it waits now;
* ``/debug/pprof/heap``: live objects counted by type (the 100 most numerous), and
  tracemalloc's top allocation sites when tracing is on (``PYTHONTRACEMALLOC``);
* ``/debug/pprof/``: the list of these.

Go's binary pprof format is not produced: ``go tool pprof`` cannot read these pages.
"""

from __future__ import annotations

import collections
import gc
import sys
import threading
import time
import tracemalloc
from types import FrameType

import trio

from .asgi import Request, Response, http_error, text

__all__ = ["pprof"]

MAX_SECONDS = 300
INTERVAL = 0.01
INDEX = """/debug/pprof/

profiles:
goroutine  the Trio task tree and where each task waits
heap       live objects by type (and tracemalloc's top sites when tracing)
profile    CPU profile of the event loop thread (?seconds=N), collapsed stacks
"""


def _stack(frame: FrameType | None) -> str:
    names = []
    while frame is not None:
        code = frame.f_code
        names.append(
            f"{code.co_qualname} ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})"
        )
        frame = frame.f_back
    return ";".join(reversed(names))


def sample(thread_id: int, seconds: float, interval: float = INTERVAL) -> collections.Counter[str]:
    """Collapsed stacks of ``thread_id`` sampled for ``seconds`` (run in another thread)."""
    counts: collections.Counter[str] = collections.Counter()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        frame = sys._current_frames().get(thread_id)
        if frame is not None:
            counts[_stack(frame)] += 1
        time.sleep(interval)
    return counts


def task_tree() -> str:
    """Every Trio task, indented under its parent, with the line it waits at."""
    lines: list[str] = []

    def walk(task: trio.lowlevel.Task, depth: int) -> None:
        frame = getattr(task.coro, "cr_frame", None)
        where = f" at {frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else ""
        lines.append(f"{'  ' * depth}{task.name}{where}")
        for nursery in task.child_nurseries:
            for child in sorted(nursery.child_tasks, key=lambda t: t.name):
                walk(child, depth + 1)

    walk(trio.lowlevel.current_root_task(), 0)  # type: ignore[arg-type]
    return f"tasks: {len(lines)}\n" + "\n".join(lines) + "\n"


def heap() -> str:
    counts = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
    lines = [f"objects tracked by the collector: {sum(counts.values())}"]
    lines += [f"{n:10d} {name}" for name, n in counts.most_common(100)]
    if tracemalloc.is_tracing():
        lines.append("\ntracemalloc, top 30 sites:")
        for stat in tracemalloc.take_snapshot().statistics("lineno")[:30]:
            lines.append(str(stat))
    return "\n".join(lines) + "\n"


async def pprof(request: Request) -> Response:
    name = request.path.removeprefix("/debug/pprof/")
    if name == "":
        return text(200, INDEX)
    if name == "goroutine":
        return text(200, task_tree())
    if name == "heap":
        return text(200, await trio.to_thread.run_sync(heap))
    if name == "profile":
        raw = request.param("seconds") or "30"
        try:
            seconds = int(raw)
        except ValueError:
            return http_error(400, f"invalid seconds: {raw}")
        if not 0 < seconds <= MAX_SECONDS:
            return http_error(400, f"seconds must be between 1 and {MAX_SECONDS}")
        me = threading.get_ident()
        counts = await trio.to_thread.run_sync(sample, me, float(seconds), abandon_on_cancel=True)
        body = "".join(f"{stack} {n}\n" for stack, n in counts.most_common())
        return text(200, body)
    return http_error(404, "Unknown profile")
