"""What the debug console shows: the task tree, the pods, and a way to resync one.

``tasks()`` walks the Trio task tree from the root task (every nursery, every task,
where each one is awaiting), then lists the asyncio tasks trio-asyncio runs (grpclib's
streams), which Trio does not see.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

import trio
import trio.lowlevel

from kubelet.api import Pod
from kubelet.tables import table

if TYPE_CHECKING:  # `kubelet debug` (the client) loads this module: not the pod lifecycle
    from kubelet.cri import RuntimeClient
    from kubelet.pods import PodManager, PodWorkers


class Text(str):
    """A string the console shows as is (its repr is itself)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


class ConsoleTarget(Protocol):
    """What the console needs from the agent (its ``Components`` object fits)."""

    @property
    def runtime(self) -> RuntimeClient: ...

    @property
    def pods(self) -> PodManager: ...

    @property
    def workers(self) -> PodWorkers: ...


_TRIO_DIR = os.path.dirname(trio.__file__)


def _where(frames: list[tuple[FrameType, int]]) -> str:
    """Where a task waits: its innermost frames outside Trio itself, ``a › b (file:line)``."""
    frames = [(f, n) for f, n in frames if not f.f_code.co_filename.startswith(_TRIO_DIR)]
    if not frames:
        return ""
    chain = " › ".join(f.f_code.co_qualname for f, _ in frames[-3:])
    frame, lineno = frames[-1]
    return f"{chain} ({os.path.basename(frame.f_code.co_filename)}:{lineno})"


def code_name(task: trio.lowlevel.Task) -> str:
    """What the task runs, as its code names it (``Pleg.run``, ``run_pod_lifecycle``)."""
    code = getattr(task.coro, "cr_code", None)
    return code.co_qualname if code is not None else task.name


def _task_lines(
    task: trio.lowlevel.Task, prefix: str, last: bool, out: list[str], *, short: bool
) -> None:
    branch = "└─ " if last else "├─ "
    if short:
        out.append(f"{prefix}{branch}{code_name(task)}")
    else:
        where = _where(list(task.iter_await_frames()))
        out.append(f"{prefix}{branch}{task.name}" + (f"  [{where}]" if where else ""))
    children = [t for nursery in task.child_nurseries for t in nursery.child_tasks]
    children.sort(key=lambda t: t.name)
    extension = "   " if last else "│  "
    for i, child in enumerate(children):
        _task_lines(child, prefix + extension, i == len(children) - 1, out, short=short)


def trio_tasks(root: trio.lowlevel.Task | None = None, *, short: bool = False) -> list[str]:
    """The Trio task tree as indented lines, one task per line: each task's name and
    where it waits, or (``short``) only what it runs, by its code's name."""
    root = root or trio.lowlevel.current_root_task()
    if root is None:
        return []
    out: list[str] = []
    _task_lines(root, "", True, out, short=short)
    return out


def asyncio_tasks() -> list[str] | None:
    """One line per asyncio task on the running trio-asyncio loop (None: no loop)."""
    try:
        import trio_asyncio

        loop = trio_asyncio.current_loop.get()
    except (ImportError, LookupError):
        return None
    if loop is None:
        return None
    lines = []
    for task in sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name()):
        coro = task.get_coro()
        name = getattr(coro, "__qualname__", type(coro).__name__)
        stack = task.get_stack(limit=1)
        where = ""
        if stack:
            frame = stack[-1]
            where = f"  [{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}]"
        lines.append(f"{task.get_name()}: {name}{where}")
    return lines


def tasks() -> Text:
    """The whole picture: Trio's task tree, then trio-asyncio's asyncio tasks."""
    lines = trio_tasks()
    aio = asyncio_tasks()
    if aio is not None:
        lines += ["", f"asyncio tasks ({len(aio)}):", *(f"  {line}" for line in aio)]
    return Text("\n".join(lines))


def pod_table(target: ConsoleTarget) -> Text:
    """Desired pods with their worker's state."""
    rows = []
    for pod in sorted(target.pods.pods(), key=lambda p: p.key):
        worker = target.workers.workers.get(pod.uid)
        rows.append(
            [
                pod.key,
                pod.uid[:8],
                worker.phase.value if worker else "-",
                str(worker.syncs) if worker else "0",
                "yes" if worker and worker.busy else "no",
                (worker.last_error or "")[:60] if worker else "",
            ]
        )
    return Text(table(("POD", "UID", "WORKER", "SYNCS", "BUSY", "LAST ERROR"), rows))


def find_pod(target: ConsoleTarget, ref: Any) -> Pod:
    """A desired pod by Pod, uid, ``namespace/name`` or a unique name."""
    if isinstance(ref, Pod):
        return ref
    pods: Iterable[Pod] = target.pods.pods()
    text = str(ref)
    matches = [p for p in pods if text in (p.uid, p.key, p.metadata.name) or p.uid.startswith(text)]
    if len(matches) != 1:
        raise LookupError(f"{len(matches)} pods match {text!r}")
    return matches[0]


def resync(target: ConsoleTarget, ref: Any) -> Text:
    """Ask the pod's worker to sync again now."""
    pod = find_pod(target, ref)
    target.workers.requeue(pod.uid)
    return Text(f"resync requested for {pod.key} ({pod.uid})")
