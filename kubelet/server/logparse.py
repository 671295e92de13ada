"""CRI log lines read as a stream, with ``kubectl logs``'s options applied as they pass.

A line is ``<RFC3339 time> <stdout|stderr> <tags> <message>``; the first ``:``-separated
tag is ``P`` for a partial chunk (written without a newline, so it joins the next) or
``F``. The line's first three fields decide everything (is it shown, with which time
prefix, with a newline at its end?); its message then passes through in the pieces the
file is read in. So a line costs time in proportion to its length and memory in
proportion to the read size, whatever its length: a container that writes 100 MB without
a newline does not make the kubelet hold 100 MB or copy it again for every read.

Malformed lines are skipped: fewer than three fields, an unknown stream, a time that does
not parse, or first fields longer than :data:`HEADER_LIMIT` together (a real one is
about 40 bytes). Upstream's tail count, ``since``, stream filter, ``timestamps`` (the
time with exactly nine fraction digits) and ``limitBytes`` (which cuts mid-line) apply.
"""

from __future__ import annotations

import enum
import logging

from kubelet.cri import STDERR, STDOUT, parse_rfc3339nano

from .logopts import LogOptions

log = logging.getLogger(__name__)

HEADER_LIMIT = 4096
"""The time, stream and tags of one line together, at most (bytes)."""


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


class _Mode(enum.Enum):
    HEAD = "head"
    """Collecting the line's first fields."""
    SHOW = "show"
    """The message passes to the output."""
    SKIP = "skip"
    """The rest of the line is dropped."""


class LogFilter:
    """Feed it the file's bytes in any pieces; take the output after each.

    ``done`` says nothing more will be shown (``limitBytes`` met, or the tail count of a
    read that does not follow), so the reader can stop reading.
    """

    def __init__(self, options: LogOptions, since_ns: int | None) -> None:
        self.options = options
        self.since_ns = since_ns
        self.remaining = options.limit_bytes if options.limit_bytes is not None else -1
        limited = options.tail_lines is not None and not options.follow
        self.lines_left: int = (
            options.tail_lines if options.tail_lines is not None and limited else -1
        )
        self.done = False
        self._pending: list[bytes] = []
        self._mode = _Mode.HEAD
        self._head = bytearray()
        self._spaces = 0
        self._partial = False
        self._last = False

    def feed(self, data: bytes) -> None:
        """The next bytes of the file (lines may begin and end anywhere in them)."""
        at, size = 0, len(data)
        while at < size and not self.done:
            newline = data.find(b"\n", at)
            end = size if newline < 0 else newline
            if newline >= 0 and self._mode is _Mode.HEAD and not self._head:
                self._whole_line(data[at:newline])
            else:
                if self._mode is _Mode.HEAD:
                    at = self._take_head(data, at, end)
                if self._mode is _Mode.SHOW and at < end:
                    self._show(data[at:end])
                if newline < 0:
                    return
                self._end_line()
            at = newline + 1

    def finish(self) -> None:
        """The end of the file when not following: an unterminated last line counts."""
        if self._head or self._mode is not _Mode.HEAD:
            self._end_line()

    def take(self) -> bytes:
        """What to write since the last call."""
        out = b"".join(self._pending)
        self._pending.clear()
        return out

    def _whole_line(self, raw: bytes) -> None:
        """A line that is complete in one piece (most are)."""
        parts = raw.split(b" ", 3)
        if len(parts) < 3:
            log.debug("skipping malformed log line %r", raw[:80])
            return
        self._mode = _Mode.SKIP
        if self._start(parts[0], parts[1], parts[2]):
            self._mode = _Mode.SHOW
            self._show(parts[3] if len(parts) == 4 else b"")
        self._end_line()

    def _take_head(self, data: bytes, at: int, end: int) -> int:
        """Collect first fields from ``data[at:end]``; where the message starts (or end)."""
        while True:
            space = data.find(b" ", at, end)
            stop = end if space < 0 else space
            if len(self._head) + stop - at > HEADER_LIMIT:
                log.debug("skipping log line: first fields over %d bytes", HEADER_LIMIT)
                self._mode = _Mode.SKIP
                return end
            self._head += data[at:stop]
            if space < 0:
                return end
            self._spaces += 1
            at = space + 1
            if self._spaces == 3:
                stamp, stream, tags = bytes(self._head).split(b" ", 2)
                self._mode = _Mode.SHOW if self._start(stamp, stream, tags) else _Mode.SKIP
                return at
            self._head += b" "

    def _end_line(self) -> None:
        if self._mode is _Mode.HEAD:
            parts = bytes(self._head).split(b" ", 2)  # no third space: the tags end the line
            if len(parts) == 3 and self._start(parts[0], parts[1], parts[2]):
                self._mode = _Mode.SHOW
            else:
                log.debug("skipping malformed log line %r", bytes(self._head[:80]))
        if self._mode is _Mode.SHOW and not self._partial:
            self._show(b"\n")
        self._mode, self._head, self._spaces = _Mode.HEAD, bytearray(), 0
        if self._last:
            self.done = True

    def _start(self, stamp: bytes, stream_field: bytes, tags: bytes) -> bool:
        """A line's first fields: whether its message is shown (the time prefix, if asked
        for, is already out)."""
        stream = stream_field.decode("latin-1")
        if stream not in (STDOUT, STDERR):
            return False
        self._partial = tags.split(b":")[0] == b"P"
        try:
            when = parse_rfc3339nano(stamp.decode())
        except ValueError:
            return False
        if self.lines_left > 0:
            self.lines_left -= 1
            self._last = self.lines_left == 0
        if self.since_ns is not None and when < self.since_ns:
            return False
        if self.options.stream != "All" and stream != self.options.stream.lower():
            return False
        if self.options.timestamps:
            self._show(fixed_nano(stamp) + b" ")
        return True

    def _show(self, data: bytes) -> None:
        if self.remaining >= 0:
            data = data[: self.remaining]
            self.remaining -= len(data)
            if self.remaining <= 0:
                self.done = True
        self._pending.append(data)
