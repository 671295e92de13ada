"""The file source: static pod manifests in a directory (or one file) → SET(file, pods).

Every change sends the full list; PodStorage turns that into the minimal changes.
Changes are noticed two ways, as upstream does: inotify (the descriptor waited on by
Trio, through inotify_simple) for speed, and a relist every ``fileCheckFrequency`` so
nothing is missed when inotify cannot help (the directory did not exist yet, was
replaced, or events overflowed).

React at once, still coalesce
    A manifest closed after writing or moved into the directory is read the moment its
    event arrives (just that file). Any other change (a removal, a file still being
    written) waits until a burst of events is over (50 ms without one) and is then
    settled by a scan of the whole path. Reading a finished file never removes a pod, so
    ``rm`` then ``cp``, or an editor's rename dance, is one change of the pod, never a
    removal and an addition; a removal is acted on 50 ms after the last event of its
    burst. See :mod:`.fileevents`.

A manifest that stops parsing
    Upstream keeps the pod when an inotify event finds the file broken, and drops it at
    the next relist, which rebuilds the list from the files that parse. We do the same,
    on purpose: a save caught half-written never restarts a pod, and a manifest that
    stays broken stops its pod within one ``fileCheckFrequency`` (20 s), as on upstream
    (people rely on "move the manifest out/break it and the pod goes away"). Every other
    pod is untouched. A broken file that never parsed contributes nothing. When the path
    is a single file, upstream sends nothing while it is broken (the pod runs on); we
    treat it like a directory of one, so both modes behave the same.
    The error is logged once per distinct message (with ``file:line``), passed to
    ``on_error``, and kept in :attr:`FileSource.errors` until the file is fixed or removed.

Reading and decoding run off the event loop, in one worker-thread hop per scan (see
:mod:`.filescan` for what is read and what is skipped, :mod:`.limits` for what decoding
may cost). A manifest that failed is not decoded again until its bytes change, and each
problem is logged once, when it appears, naming the file.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import inotify_simple
import trio

from kubelet.api import Pod
from kubelet.boundedio import RunSync, in_thread
from kubelet.cri import trace

from . import fileevents, filescan
from .errors import ManifestError
from .filescan import Decoded, Failed, FileResult, Gone, Scan, Skipped, Unchanged
from .podconfig import FILE_SOURCE, PodOperation, UpdateSink
from .static import Loaded, load_manifest
from .validation import DEFAULT_VALIDATION, PodValidationOptions

log = logging.getLogger(__name__)

DEFAULT_CHECK_FREQUENCY = 20.0
"""Upstream's fileCheckFrequency default, seconds."""

_IN = inotify_simple.flags
_WATCH_MASK = (
    _IN.CREATE
    | _IN.DELETE
    | _IN.MODIFY
    | _IN.CLOSE_WRITE
    | _IN.ATTRIB
    | _IN.MOVED_FROM
    | _IN.MOVED_TO
    | _IN.DELETE_SELF
    | _IN.MOVE_SELF
)

_QUIET = 0.05
"""Seconds without an inotify event that end a burst of changes: how long a removal
waits to be confirmed (a file written again within it was never gone)."""
_BURST = 1.0
"""A burst is cut after this long, so a file written without pause is still read."""

_WATCH_RETRY = (1.0, 20.0)
"""Back-off (first, most) between attempts to start the watch on a path that is absent."""


@attrs.define
class _Known:
    """What one manifest gave at the last scan that read it."""

    digest: bytes | None
    """Of the bytes last decoded (None: nothing to compare, read and decode again)."""
    pod: Pod | None = None
    """Its pod; after a failure, the last good one until the next relist."""
    warnings: tuple[str, ...] = ()


class FileSource:
    """Static pods from ``path`` (a directory of manifests, or one manifest file)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        node_name: str,
        *,
        check_frequency: float = DEFAULT_CHECK_FREQUENCY,
        watch: bool = True,
        on_error: Callable[[ManifestError], None] | None = None,
        run_sync: RunSync = in_thread,
        validation: PodValidationOptions = DEFAULT_VALIDATION,
    ) -> None:
        self.path = Path(os.fspath(path).rstrip(os.sep) or os.sep)
        self.validation = validation
        """What a pod may hold under the kubelet's gates."""
        self.node_name = node_name
        self.check_frequency = check_frequency
        self.watch = watch
        self.on_error = on_error
        self.run_sync = run_sync
        """Where reading and decoding run (a worker thread; see :mod:`kubelet.boundedio`)."""
        self.errors: dict[str, ManifestError] = {}
        """The manifests that do not parse right now, by path."""
        self.skipped: dict[str, str] = {}
        """The entries that are not regular files, by path: what each is instead."""
        self._known: dict[str, _Known] = {}
        """By path. A file that reads the same is not decoded again and gives the very
        same pod object (which the pod storage then passes over without comparing), or
        the same error. Bytes, not stat: timestamps can be too coarse to show an edit,
        and reading a small file is cheap; decoding it is what costs."""
        self._problem: str | None = None
        self._ready: set[str] = set()
        """Manifests closed after writing or moved in since the last read: read at once."""
        self._settle_due = False
        """A burst with other changes has ended: scan the whole path."""
        self.watching = trio.Event()
        """Set once inotify watches the path (tests wait on it before touching files)."""

    # -- the task --------------------------------------------------------------------------

    async def run(
        self, config: UpdateSink, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Send SET(file) now, on every inotify batch and every ``check_frequency``.

        ``task_status.started()`` comes after the first SET has been handed to ``config``.
        """
        config.register(FILE_SOURCE)
        kick_send, kick_recv = trio.open_memory_channel[None](1)
        async with trio.open_nursery() as nursery:
            await self._send(config, relist=True)
            if self.watch:
                nursery.start_soon(self._watch, kick_send)
            task_status.started()
            next_relist = trio.current_time() + self.check_frequency
            while True:
                with trio.move_on_at(next_relist):
                    await kick_recv.receive()
                relist = trio.current_time() >= next_relist
                if relist:
                    next_relist = trio.current_time() + self.check_frequency
                await self._send(config, relist=relist)

    async def _send(self, config: UpdateSink, *, relist: bool) -> None:
        if relist or self._settle_due:
            self._settle_due = False
            self._ready.clear()  # the scan reads them too
            pods = await self.scan(relist=relist)
        elif self._ready:
            paths, self._ready = sorted(self._ready), set()
            pods = await self.read_now(paths)
        else:
            return
        if pods is not None:
            origins = {pod.uid: path for path, known in self._known.items() if (pod := known.pod)}
            await config.update(FILE_SOURCE, PodOperation.SET, pods, origins=origins)

    # -- reading ---------------------------------------------------------------------------

    async def scan(self, *, relist: bool = True) -> list[Pod] | None:
        """The pods the path describes now, or None when nothing can be said.

        With ``relist`` False (an inotify-triggered read) a broken manifest keeps the pod
        it last gave; see the module docstring.
        """
        known = {p: k.digest for p, k in self._known.items() if k.digest is not None}
        found = await self.run_sync(
            functools.partial(filescan.scan_path, self.path, known, self._decode)
        )
        return self._settle_all(found, relist)

    async def read_now(self, paths: Sequence[str]) -> list[Pod]:
        """The pods with the finished manifests ``paths`` read again; the rest as they were.

        Never a removal (unless a path is no regular file any more): a manifest that is
        gone again by the time it is read keeps its pod until the scan that settles the
        burst, so that ``rm`` then ``cp`` never stops the pod.
        """
        digests = {p: k.digest for p in paths if (k := self._known.get(p)) and k.digest}
        found = await self.run_sync(
            functools.partial(filescan.read_files, paths, digests, self._decode)
        )
        for path, result in found.items():
            if not isinstance(result, Gone):
                self._settle(path, result, relist=False)
        return [k.pod for _, k in sorted(self._known.items()) if k.pod is not None]

    def _decode(self, data: bytes, path: str) -> Loaded:
        return load_manifest(
            data, path, node_name=self.node_name, is_file=True, validation=self.validation
        )

    def _settle_all(self, found: Scan, relist: bool) -> list[Pod] | None:
        self._path_problem(found.level, found.problem)
        if found.files is None:
            return None
        pods = [
            pod for f, result in found.files.items() if (pod := self._settle(f, result, relist))
        ]
        for gone in (set(self._known) | set(self.errors) | set(self.skipped)) - set(found.files):
            self._forget(gone)
        return pods

    def _path_problem(self, level: int, problem: str | None) -> None:
        """Log what is wrong with the path once, not on every relist; and when it is fixed."""
        if problem == self._problem:
            return
        if problem is None:
            log.info("static pod path %s is readable again", self.path)
        else:
            log.log(level, "static pod path %s %s", self.path, problem)
        self._problem = problem

    def _settle(self, path: str, result: FileResult, relist: bool) -> Pod | None:
        """Record what ``path`` gave, log what changed, and return its pod (if any)."""
        if isinstance(result, Gone):
            self._forget(path)
            return None
        if isinstance(result, Skipped):
            if self.skipped.get(path) != result.what:
                log.warning("static pod manifest %s skipped: it is %s", path, result.what)
            self._forget(path)
            self.skipped[path] = result.what
            return None
        self.skipped.pop(path, None)
        known = self._known.setdefault(path, _Known(None))
        if isinstance(result, Decoded):
            if self.errors.pop(path, None) is not None:
                log.info("static pod manifest %s is valid again", path)
            if known.warnings != result.loaded.warnings:
                for warning in result.loaded.warnings:
                    log.warning("%s", warning)
            self._known[path] = _Known(result.digest, result.loaded.pods[0], result.loaded.warnings)
        elif isinstance(result, Failed):
            self._failed(result.error)
            known.digest = result.digest
            if relist:
                known.pod = None
        elif isinstance(result, Unchanged) and path in self.errors and relist:
            known.pod = None  # still broken at a relist: its pod goes (module docstring)
        return self._known[path].pod

    def _failed(self, error: ManifestError) -> None:
        previous = self.errors.get(error.path)
        self.errors[error.path] = error
        if previous is None or str(previous) != str(error):
            log.error("could not process static pod manifest: %s", error)
            if self.on_error is not None:
                self.on_error(error)

    def _forget(self, path: str) -> None:
        self._known.pop(path, None)
        self.errors.pop(path, None)
        self.skipped.pop(path, None)

    # -- inotify ---------------------------------------------------------------------------

    async def _watch(self, kick: trio.MemorySendChannel[None]) -> None:
        """Kick the main loop on every batch of changes; re-watch when the path changes shape.

        A directory is watched itself; a single file (or a path that does not exist yet)
        through its parent, so editors that replace the file by renaming still count.
        """
        delay, most = _WATCH_RETRY
        while True:
            dir_mode, parent_dir = await self.run_sync(
                lambda: (self.path.is_dir(), self.path.parent.is_dir())
            )
            target = self.path if dir_mode else self.path.parent
            if dir_mode or parent_dir:
                try:
                    single = None if dir_mode else self.path.name
                    await self._watch_dir(target, single, kick)
                    delay = _WATCH_RETRY[0]
                    continue  # the path changed shape: watch it anew at once
                except (OSError, RuntimeError) as exc:
                    log.warning("inotify watch on %s failed; relisting only: %s", target, exc)
                finally:
                    self.watching = trio.Event()
            await trio.sleep(delay)
            delay = min(delay * 2, most)

    async def _watch_dir(
        self, target: Path, single: str | None, kick: trio.MemorySendChannel[None]
    ) -> None:
        """Watch ``target`` until it (or the watched path) changes shape.

        The inotify descriptor is waited on by Trio itself: no thread, no polling, so an
        idle kubelet does not wake for it, and cancelling is immediate.
        """

        def wanted(name: str) -> bool:
            return name == single if single is not None else not name.startswith(".")

        with inotify_simple.INotify(nonblocking=True) as inotify:
            inotify.add_watch(target, _WATCH_MASK)
            self.watching.set()
            self._settle_due = True  # what changed while nobody watched (before the first scan)
            _kick(kick)
            while True:
                await trio.lowlevel.wait_readable(inotify.fileno())
                if await self._burst(inotify, target, wanted, kick) or await self.run_sync(
                    functools.partial(self._shape_changed, target, single)
                ):
                    return

    async def _burst(
        self,
        inotify: inotify_simple.INotify,
        target: Path,
        wanted: Callable[[str], bool],
        kick: trio.MemorySendChannel[None],
    ) -> bool:
        """Follow one burst of events; True when the watch is over.

        A finished manifest is read as soon as its event arrives; everything else waits
        until ``_QUIET`` passes without an event (at most ``_BURST``) and is then settled
        by one scan of the finished state (:mod:`.fileevents`).
        """
        unsettled = gone = False
        with trio.move_on_after(_BURST):
            while True:
                events = inotify.read(timeout=0)
                if trace.TRACE is not None:
                    _trace(trace.TRACE, events)
                batch = fileevents.sort_out(events, wanted)
                if batch.ready:
                    self._ready.update(str(target / name) for name in batch.ready)
                    _kick(kick)
                unsettled, gone = unsettled or batch.unsettled, gone or batch.gone
                with trio.move_on_after(_QUIET) as quiet:
                    await trio.lowlevel.wait_readable(inotify.fileno())
                if quiet.cancelled_caught:
                    break
        if unsettled:
            self._settle_due = True
            _kick(kick)
        return gone

    def _shape_changed(self, target: Path, single: str | None) -> bool:
        """The watched directory went away, or the path became (or stopped being) one."""
        return not target.is_dir() or self.path.is_dir() != (single is None)


def _trace(to: trace.Trace, events: list[inotify_simple.Event]) -> None:
    now = time.monotonic()
    for event in events:
        to.record("inotify", t=now, name=event.name, mask=event.mask)


def _kick(kick: trio.MemorySendChannel[None]) -> None:
    """Ask for a scan; if one is already due it will see this change too."""
    with contextlib.suppress(trio.WouldBlock):
        kick.send_nowait(None)
