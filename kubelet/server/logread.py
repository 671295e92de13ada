"""Reading a CRI container log file for ``kubectl logs``: tail, since, limit, follow.

Behaviour as upstream's CRI log reader: ``tailLines`` counts physical lines from the end
of the file (a ``P`` chunk is a line); ``since`` drops older lines; ``timestamps``
prefixes each chunk with its time as RFC3339 with exactly nine fraction digits;
``limitBytes`` cuts the output, mid-line if need be; partial (``P``) chunks are written
without a newline so they join the next. Malformed lines are skipped.

``follow`` keeps reading as the file grows until the container is no longer running
(checked whenever the reader reaches the end of the file, at least every second), then
drains what is left. A rotation (the path now names a new file) is followed: the old
file is read to its end, then the new one from its start.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import IO, TypeVar

import trio

from kubelet.boundedio import RunSync
from kubelet.cri.logformat import STDERR, STDOUT, parse_rfc3339nano

from .logopts import LogOptions

log = logging.getLogger(__name__)

BLOCK = 4096
CHUNK = 64 * 1024
T = TypeVar("T")
POLL = 0.1
RUNNING_CHECK_PERIOD = 1.0

Write = Callable[[bytes], Awaitable[None]]
IsRunning = Callable[[], Awaitable[bool]]


def tail_start(fh: IO[bytes], n: int | None) -> int:
    """Offset where the last ``n`` lines of the open file begin (0: the whole file)."""
    if n is None or n < 0:
        return 0
    size = fh.seek(0, os.SEEK_END)
    count = 0
    left = right = size
    buf = b""
    while right > 0 and count <= n:
        left = max(right - BLOCK, 0)
        fh.seek(left)
        buf = fh.read(right - left)
        count += buf.count(b"\n")
        right = left
    while count > n:
        idx = buf.index(b"\n") + 1
        buf = buf[idx:]
        left += idx
        count -= 1
    return left


def fixed_nano(stamp: bytes) -> bytes:
    """An RFC3339 time with exactly nine fraction digits (Go's ``RFC3339NanoFixed``)."""
    text = stamp.decode()
    head, dot, rest = text.partition(".")
    if not dot:
        for i, ch in enumerate(text[10:], start=10):
            if ch in "Zz+-":
                return f"{text[:i]}.000000000{text[i:]}".encode()
        return f"{text}.000000000".encode()
    digits = ""
    for ch in rest:
        if not ch.isdigit():
            break
        digits += ch
    return f"{head}.{(digits + '000000000')[:9]}{rest[len(digits) :]}".encode()


class _Output:
    """Applies since / stream / timestamps / limitBytes / tail count to parsed lines."""

    def __init__(self, options: LogOptions, since_ns: int | None) -> None:
        self.options = options
        self.since_ns = since_ns
        self.remaining = options.limit_bytes if options.limit_bytes is not None else -1
        limited = options.tail_lines is not None and not options.follow
        self.lines_left: int = (
            options.tail_lines if options.tail_lines is not None and limited else -1
        )
        self.done = False
        self.pending: list[bytes] = []

    def line(self, raw: bytes) -> None:
        """Take one physical line (without its newline unless ``F``-terminated)."""
        if self.done:
            return
        parts = raw.split(b" ", 3)
        if len(parts) < 3:
            log.debug("skipping malformed log line %r", raw[:80])
            return
        stamp, stream, tags = parts[0], parts[1].decode("latin-1"), parts[2]
        if stream not in (STDOUT, STDERR):
            return
        message = parts[3] if len(parts) == 4 else b""
        partial = tags.split(b":")[0] == b"P"
        if not partial:
            message += b"\n"
        try:
            when = parse_rfc3339nano(stamp.decode())
        except ValueError:
            return
        if self.lines_left > 0:
            self.lines_left -= 1
            if self.lines_left == 0:
                self.done = True
        if self.since_ns is not None and when < self.since_ns:
            return
        if self.options.stream != "All" and stream != self.options.stream.lower():
            return
        if self.options.timestamps:
            message = fixed_nano(stamp) + b" " + message
        if self.remaining >= 0:
            message = message[: self.remaining]
            self.remaining -= len(message)
            if self.remaining <= 0:
                self.done = True
        self.pending.append(message)

    def take(self) -> bytes:
        out = b"".join(self.pending)
        self.pending.clear()
        return out


async def _in_thread(fn: Callable[[], T]) -> T:
    """A worker thread, waited for even when cancelled: the file it reads is closed after."""
    return await trio.to_thread.run_sync(fn)


async def read_logs(
    path: str,
    options: LogOptions,
    write: Write,
    is_running: IsRunning,
    *,
    since_ns: int | None,
    run_sync: RunSync = _in_thread,
) -> None:
    """Write the log at ``path`` as ``options`` ask (from ``since_ns``, ``LogOptions.since_ns``);
    returns when done (or cancelled). File reads go through ``run_sync`` (a worker thread;
    tests on a fake clock: inline)."""
    out = _Output(options, since_ns)
    if options.tail_lines == 0 and not options.follow:
        return
    fh = await run_sync(lambda: open(path, "rb"))  # noqa: SIM115 - closed below
    pump = _Pump(path, fh, out, write, is_running, run_sync)
    try:
        fh.seek(await run_sync(lambda: tail_start(fh, options.tail_lines)))
        await pump.run(options.follow)
    finally:
        pump.fh.close()


class _Pump:
    """Moves lines from the file (and its successors after rotation) to the client."""

    def __init__(
        self,
        path: str,
        fh: IO[bytes],
        out: _Output,
        write: Write,
        is_running: IsRunning,
        run_sync: RunSync,
    ) -> None:
        self.run_sync = run_sync
        self.path = path
        self.fh = fh
        self.out = out
        self.write = write
        self.is_running = is_running

    async def run(self, follow: bool) -> None:
        buf = b""
        running = True
        while True:
            chunk = await self.run_sync(lambda: self.fh.read(CHUNK))
            if chunk:
                *lines, buf = (buf + chunk).split(b"\n")
                for raw in lines:
                    self.out.line(raw)
                    if self.out.done:
                        break
                await self.write(self.out.take())
                if self.out.done:
                    return
                continue
            if not follow:
                if buf:
                    self.out.line(buf)
                    await self.write(self.out.take())
                return
            if not running:
                return  # drained after the container stopped
            if self._reopen_if_rotated():
                continue
            running = await self.is_running()
            if running:
                await self._wait_for_change()

    def _identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _reopen_if_rotated(self) -> bool:
        """Switch to the file now at the path if it is not the open one (rotated)."""
        current = self._identity()
        opened = os.fstat(self.fh.fileno())
        if current is None or current == (opened.st_dev, opened.st_ino):
            return False
        try:
            new = open(self.path, "rb")  # noqa: SIM115 - kept open by the pump
        except FileNotFoundError:
            return False
        self.fh.close()
        self.fh = new
        return True

    async def _wait_for_change(self) -> None:
        """Sleep until the open file grows or the path changes, at most a second."""
        opened = os.fstat(self.fh.fileno())
        position = self.fh.tell()
        waited = 0.0
        while waited < RUNNING_CHECK_PERIOD:
            await trio.sleep(POLL)
            waited += POLL
            if os.fstat(self.fh.fileno()).st_size > position:
                return
            current = self._identity()
            if current is not None and current != (opened.st_dev, opened.st_ino):
                return
