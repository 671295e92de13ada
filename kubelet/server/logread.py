"""Reading a CRI container log file for ``kubectl logs``: tail, since, limit, follow.

Behaviour as upstream's CRI log reader: ``tailLines`` counts physical lines from the end
of the file (a ``P`` chunk is a line); ``since`` drops older lines; ``timestamps``
prefixes each chunk with its time as RFC3339 with exactly nine fraction digits;
``limitBytes`` cuts the output, mid-line if need be, and ends the reading; partial (``P``)
chunks are written without a newline so they join the next. Malformed lines are skipped
(``logparse`` reads the lines, in bounded pieces whatever their length).

``follow`` keeps reading as the file grows until the container is no longer running
(checked whenever the reader reaches the end of the file, at least every second), then
drains what is left. A rotation (the path now names a new file) is followed: the old
file is read to its end, then the new one from its start.

The file is the runtime's, but what is at its path is not always: whoever can write the
log directory (a hostPath mount) can put a FIFO, a device or a symbolic link there. Only
a regular file is read, opened without blocking and without following a link; anything
else at the path, at the start or after a rotation, ends the reading. Every open, stat
and read runs in a worker thread that a cancelled request abandons, so neither a slow
disk nor anything at the path can hold the event loop or a shutdown.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import BinaryIO

import trio

from kubelet.boundedio import InputRefused, RunSync, in_thread, open_regular_file

from .logopts import LogOptions
from .logparse import LogFilter

log = logging.getLogger(__name__)

BLOCK = 4096
CHUNK = 64 * 1024
POLL = 0.1
RUNNING_CHECK_PERIOD = 1.0

Write = Callable[[bytes], Awaitable[None]]
IsRunning = Callable[[], Awaitable[bool]]


def open_log(path: str) -> BinaryIO:
    """The regular file at ``path`` (not a link to one), unbuffered; ``InputRefused``
    for anything else. Blocking: run it through ``RunSync``. A result nobody takes (the
    request was cancelled meanwhile) closes its descriptor when it is collected."""
    return os.fdopen(open_regular_file(path, follow_symlinks=False), "rb", buffering=0)


def tail_start(fh: BinaryIO, n: int | None) -> int:
    """Offset where the last ``n`` lines of the open file begin (0: the whole file)."""
    if n is None or n < 0:
        return 0
    fd = fh.fileno()
    count = 0
    left = right = os.fstat(fd).st_size
    buf = b""
    while right > 0 and count <= n:
        left = max(right - BLOCK, 0)
        buf = os.pread(fd, right - left, left)
        count += buf.count(b"\n")
        right = left
    at = 0
    while count > n:
        at = buf.index(b"\n", at) + 1
        count -= 1
    return left + at


async def read_logs(
    path: str,
    options: LogOptions,
    write: Write,
    is_running: IsRunning,
    *,
    since_ns: int | None,
    run_sync: RunSync = in_thread,
) -> None:
    """Write the log at ``path`` as ``options`` ask (from ``since_ns``, ``LogOptions.since_ns``);
    returns when done (or cancelled). File work goes through ``run_sync`` (a worker
    thread; tests on a fake clock: inline). Nothing but a regular file is read: anything
    else at the path is logged and ends the reading."""
    out = LogFilter(options, since_ns)
    if options.tail_lines == 0 and not options.follow:
        return
    try:
        fh = await run_sync(lambda: open_log(path))
    except (InputRefused, OSError) as exc:
        log.info("not reading container log %s: %s", path, exc)
        return
    pump = _Pump(path, fh, out, write, is_running, run_sync)
    try:
        pump.offset = await run_sync(lambda: tail_start(fh, options.tail_lines))
        await pump.run(options.follow)
    finally:
        pump.fh.close()


def _successor(path: str, fh: BinaryIO) -> BinaryIO | None:
    """The file now at ``path`` if it is not the open one (a rotation), else None.
    Blocking: through ``RunSync``."""
    try:
        current = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    opened = os.fstat(fh.fileno())
    if (current.st_dev, current.st_ino) == (opened.st_dev, opened.st_ino):
        return None
    try:
        return open_log(path)
    except FileNotFoundError:
        return None


def _changed(path: str, fh: BinaryIO, offset: int) -> bool:
    """The open file grew past ``offset`` or the path names another file. Blocking."""
    opened = os.fstat(fh.fileno())
    if opened.st_size > offset:
        return True
    try:
        current = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (current.st_dev, current.st_ino) != (opened.st_dev, opened.st_ino)


class _Pump:
    """Moves lines from the file (and its successors after rotation) to the client."""

    def __init__(
        self,
        path: str,
        fh: BinaryIO,
        out: LogFilter,
        write: Write,
        is_running: IsRunning,
        run_sync: RunSync,
    ) -> None:
        self.run_sync = run_sync
        self.path = path
        self.fh = fh
        self.offset = 0
        self.out = out
        self.write = write
        self.is_running = is_running

    def _read(self) -> bytes:
        # pread, not read: an abandoned read of a closed (even reused) descriptor
        # consumes nothing of anyone's
        return os.pread(self.fh.fileno(), CHUNK, self.offset)

    async def run(self, follow: bool) -> None:
        running = True
        while True:
            chunk = await self.run_sync(self._read)
            if chunk:
                self.offset += len(chunk)
                self.out.feed(chunk)
                await self.write(self.out.take())
                if self.out.done:
                    return
                continue
            if not follow:
                self.out.finish()
                await self.write(self.out.take())
                return
            if not running:
                return  # drained after the container stopped
            try:
                if await self._reopen_if_rotated():
                    continue
            except (InputRefused, OSError) as exc:
                log.info("stopped following container log %s: %s", self.path, exc)
                return
            running = await self.is_running()
            if running:
                await self._wait_for_change()

    async def _reopen_if_rotated(self) -> bool:
        """Switch to the file now at the path if it is not the open one (rotated)."""
        fh = self.fh
        new = await self.run_sync(lambda: _successor(self.path, fh))
        if new is None:
            return False
        self.fh.close()
        self.fh, self.offset = new, 0
        return True

    async def _wait_for_change(self) -> None:
        """Sleep until the open file grows or the path changes, at most a second."""
        fh, offset = self.fh, self.offset
        waited = 0.0
        while waited < RUNNING_CHECK_PERIOD:
            await trio.sleep(POLL)
            waited += POLL
            if await self.run_sync(lambda: _changed(self.path, fh, offset)):
                return
