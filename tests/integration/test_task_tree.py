"""The map stays true: the documented task tree is the tree a running kubelet has.

The whole agent runs in-process on fake time (FakeApiServer, FakeRuntime, a manifest
directory, the three servers on ephemeral ports, the debug console) and its live Trio
task tree -- each task by the code it runs, as the console's ``tasks()`` walks it -- is
compared with the block under "The task tree" in docs/architecture.md.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import attrs
import trio
import trio.lowlevel

from kubelet import agent
from kubelet.debug.helpers import code_name
from kubelet.testing import FakeApiServer, FakeRuntime

from .cluster_harness import Cluster, cluster_kubelet
from .kubelet_harness import EPOCH

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"

TreePath = tuple[str, ...]


def documented_tree() -> tuple[set[TreePath], set[TreePath]]:
    """The documented tree as root-to-task paths (a task's comment is not part of it), and
    those of them that may be absent (a comment beginning with "while": a task that
    comes and goes with its owner's work, like the relist's second list)."""
    text = ARCHITECTURE.read_text()
    block = text.split("## The task tree", 1)[1].split("```", 2)[1]
    paths: set[TreePath] = set()
    transient: set[TreePath] = set()
    stack: list[str] = []
    for line in block.strip("\n").splitlines()[1:]:
        match = re.match(r"^([│ ]*)[├└]─ (\S+)\s*(.*)$", line)
        assert match, f"not a tree line: {line!r}"
        depth = len(match.group(1)) // 3
        del stack[depth:]
        stack.append(match.group(2))
        paths.add(tuple(stack))
        if match.group(3).startswith("while "):
            transient.add(tuple(stack))
    return paths, transient


def live_tree(task: trio.lowlevel.Task, above: TreePath = ()) -> set[TreePath]:
    paths: set[TreePath] = set()
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            path = (*above, code_name(child))
            paths.add(path)
            paths |= live_tree(child, path)
    return paths


def agent_task() -> trio.lowlevel.Task:
    """The task that runs ``agent.run``."""
    root = trio.lowlevel.current_root_task()
    assert root is not None
    todo = [root]
    while todo:
        task = todo.pop()
        if getattr(task.coro, "cr_code", None) is agent.run.__code__:
            return task
        todo += [t for nursery in task.child_nurseries for t in nursery.child_tasks]
    raise AssertionError("no task runs agent.run")


async def test_the_documented_task_tree_is_the_live_one(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, short_tmp, nursery)
        options, host = cluster_kubelet(
            c,
            manifests,
            extra=[
                "--enable-server=true",
                "--healthz-port=10248",
                "--read-only-port=10255",
                "--debug-console-socket",
                str(short_tmp / "debug.sock"),
            ],
        )
        kmsg = short_tmp / "kmsg"  # a FIFO we also hold open: the OOM watcher waits on it
        os.mkfifo(kmsg)
        writer = os.open(kmsg, os.O_RDWR | os.O_NONBLOCK)
        host = attrs.evolve(host, kmsg=str(kmsg))
        await nursery.start(agent.run, options, host)
        await trio.sleep(30)  # registered, a status report and a relist or two later
        live = live_tree(agent_task())
        documented, transient = documented_tree()
        assert sorted(live - documented) == [], "tasks the docs do not show"
        assert sorted(documented - live - transient) == [], "tasks the docs show that do not run"
        nursery.cancel_scope.cancel()
        os.close(writer)
