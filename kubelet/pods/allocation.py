"""Each pod's allocation: the resources it was admitted with, or last resized to.

The store decides it once per pod, when the kubelet first meets the pod (admission,
else its first sync): from the checkpoint file (``allocstate``; a restarted kubelet),
else from what its containers on the runtime were created with (a tree that kept it
only in container annotations), else from its spec. An admitted resize replaces it
(``resize``), and every change is written to the checkpoint: by the writer task
(``run``) in a worker thread when one runs, so a pod's start prepares its cgroup and
volumes while the file goes to disk, and waits for it (``written``) before it acts on
the runtime. It hands out the pod as it runs: its spec with the allocation's resources,
the same object for the same pod, so identity checks downstream (admission's request
sums, the status memo) still hold. It also keeps each pod's resize that waits
(``PodResizePending``: Deferred or Infeasible).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator, Mapping

import attrs
import trio

from kubelet.api import Pod
from kubelet.boundedio import RunSync
from kubelet.cri import RuntimePodStatus
from kubelet.decisions import (
    Allocation,
    ResizeState,
    allocated_pod,
    allocation_from_spec,
    allocation_of,
)

from .allocstate import AllocationCheckpoint

__all__ = ["LAST_WRITE_DEADLINE", "Allocations"]

log = logging.getLogger(__name__)

LAST_WRITE_DEADLINE = 5.0
"""How long a cancelled writer waits for its last write (a disk that hangs at shutdown
does not hold the kubelet's exit)."""


def _nothing(uid: str) -> RuntimePodStatus | None:
    return None


@attrs.frozen
class Pending:
    """A resize not (yet) allocated: ``Deferred`` (retried) or ``Infeasible``, why, and
    the generation of the spec it was judged for."""

    reason: str
    message: str
    generation: int | None


class Allocations:
    """uid → the pod's allocation. ``recorded`` gives the runtime's view of a pod, if
    any (the PLEG's cache, warm from its first relist before any pod is admitted);
    ``checkpoint``/``saved``: the file and what it held at start."""

    def __init__(
        self,
        recorded: Callable[[str], RuntimePodStatus | None] = _nothing,
        checkpoint: AllocationCheckpoint | None = None,
        saved: Mapping[str, Allocation] | None = None,
    ) -> None:
        self._recorded = recorded
        self._checkpoint = checkpoint
        self._saved = dict(saved or {})
        self._by_uid: dict[str, Allocation] = {}
        self._last: dict[str, tuple[Pod, Pod]] = {}
        """uid → (the pod last asked about, as it runs)"""
        self.pending: dict[str, Pending] = {}
        """uid → the resize that waits (PodResizePending), if any"""
        self.in_progress: dict[str, tuple[str, int | None]] = {}
        """uid → (error or "", generation) of an admitted resize not yet what runs"""
        self._batching = False
        self._unwritten = False
        self._version = 0
        """changes handed to the checkpoint so far"""
        self._stored = 0
        """``_version`` when the file on disk was taken"""
        self._writer = False
        self._due = trio.Event()
        self._wrote = trio.Event()

    def state(self, uid: str) -> ResizeState | None:
        """Where ``uid``'s resize stands (None: nothing to say)."""
        pending = self.pending.get(uid)
        progress = self.in_progress.get(uid)
        if pending is None and progress is None:
            return None
        waits = None if pending is None else (pending.reason, pending.message, pending.generation)
        return ResizeState(waits, progress)

    def counts(self) -> tuple[dict[str, int], int]:
        """(the waiting resizes by reason, lower case as upstream's metric labels them;
        the resizes in progress)."""
        pending: dict[str, int] = {}
        for waits in self.pending.values():
            pending[waits.reason.lower()] = pending.get(waits.reason.lower(), 0) + 1
        return pending, len(self.in_progress)

    def use_recorded(self, recorded: Callable[[str], RuntimePodStatus | None]) -> None:
        """Where the runtime's record of a pod is read (set once the PLEG exists)."""
        self._recorded = recorded

    def allocated(self, pod: Pod) -> Pod:
        """``pod`` as it runs: its spec with the resources it was allocated (decided now
        if this is the first time the pod is met)."""
        last = self._last.get(pod.uid)
        if last is not None and last[0] is pod:
            return last[1]
        allocation = self._by_uid.get(pod.uid)
        if allocation is None:
            allocation = self._saved.pop(pod.uid, None) or allocation_of(
                pod, self._recorded(pod.uid)
            )
            self._by_uid[pod.uid] = allocation
            self._store()
        running = allocated_pod(pod, allocation)
        self._last[pod.uid] = (pod, running)
        return running

    def resize(self, pod: Pod) -> Pod:
        """A resize admitted: ``pod``'s spec is its allocation from now on (written to
        the checkpoint before anything acts on it). ``pod`` as it runs."""
        self._by_uid[pod.uid] = allocation_from_spec(pod)
        self._last.pop(pod.uid, None)
        self.pending.pop(pod.uid, None)
        self.in_progress[pod.uid] = ("", pod.metadata.generation or None)
        self._store()
        return self.allocated(pod)

    def forget(self, uid: str) -> None:
        """The pod is gone (or refused): a pod of that UID met later starts afresh."""
        known = self._by_uid.pop(uid, None) is not None
        self._last.pop(uid, None)
        self.pending.pop(uid, None)
        self.in_progress.pop(uid, None)
        if known:
            self._store()

    def drop_orphans(self, wanted: Callable[[str], bool]) -> None:
        """Entries read from the checkpoint for pods no source wants (asked once every
        source has spoken): gone from the file (upstream's ``RemoveOrphanedPods``)."""
        orphans = [uid for uid in self._saved if not wanted(uid)]
        for uid in orphans:
            del self._saved[uid]
        if orphans:
            self._store()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """The changes made inside written to the checkpoint once, on leaving (or at a
        ``flush``): a burst of 30 manifests is one write of the file, not 30 writes of a
        file growing with each pod (each with its fsync and its checksum over the whole
        text). Nothing may act on a change before it is written (``written``), so the
        caller does not yield to other tasks inside without a ``flush`` first."""
        outer = self._batching
        self._batching = True
        try:
            yield
        finally:
            self._batching = outer
            if not outer:
                self.flush()

    def flush(self) -> None:
        """Write what a batch has changed so far (nothing changed: no write)."""
        if self._unwritten:
            self._unwritten = False
            self._write()

    def _store(self) -> None:
        if self._batching:
            self._unwritten = True
        else:
            self._write()

    def _write(self) -> None:
        if self._checkpoint is None:
            return
        self._version += 1
        if self._writer:
            self._due.set()
        else:  # no writer task (a tool, a test of the store alone): written now
            self._checkpoint.store(self._entries(), self._version)
            self._stored = self._version

    def _entries(self) -> dict[str, Allocation]:
        return {**self._saved, **self._by_uid}

    async def written(self) -> None:
        """Return once every change made so far is on disk: a pod's worker waits here
        before it acts on the runtime with what admission decided."""
        if self._unwritten:  # a batch held open across an await elsewhere (preemption)
            self.flush()
        target = self._version
        while self._stored < target:
            await self._wrote.wait()

    async def run(
        self, io: RunSync, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Write the checkpoint in a worker thread (``io``) whenever it changed, the
        latest state each time; cancelled, the last change is written before it ends
        (a kubelet handing the node over leaves the file as it ran), unless the disk
        takes longer than ``LAST_WRITE_DEADLINE``."""
        checkpoint = self._checkpoint
        if checkpoint is None:
            task_status.started()
            return
        self._writer = True
        task_status.started()
        try:
            while True:
                if self._stored == self._version:
                    await self._due.wait()
                self._due = trio.Event()
                version = self._version
                await io(functools.partial(checkpoint.store, self._entries(), version))
                self._done(version)
        finally:
            self._writer = False
            if self._stored < self._version:
                version = self._version
                write = functools.partial(checkpoint.store, self._entries(), version)
                with trio.CancelScope(shield=True), trio.move_on_after(LAST_WRITE_DEADLINE):
                    await io(write)  # behind a write its cancelled task left in a thread
                    self._done(version)
                if self._stored < version:
                    log.error(
                        "allocation checkpoint %s: last change not written within %.0f s",
                        checkpoint.path,
                        LAST_WRITE_DEADLINE,
                    )

    def _done(self, version: int) -> None:
        self._stored = version
        self._wrote.set()
        self._wrote = trio.Event()

    def __contains__(self, uid: object) -> bool:
        return uid in self._by_uid

    def __len__(self) -> int:
        return len(self._by_uid)
