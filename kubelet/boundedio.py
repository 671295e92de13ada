"""Reading and decoding outside data with a bound, off the event loop.

The node agent reads bytes it does not control: files a pod author or an operator can
replace (certificates, logs, volumes), the answers of plugins and peers, API bodies.
Three things go wrong with such input: a read that never ends (a FIFO, ``/dev/zero``, a
file that keeps growing), a decode whose cost grows faster than its input (deep nesting,
alias expansion) and work done on the event loop, where one slow read stops /healthz, the
probes and every pod worker. The helpers here refuse the first two with
:class:`InputRefused` and give the third a worker thread. Every place where outside data
enters uses them, so the rule has one definition.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import trio

T = TypeVar("T")

_READ_CHUNK = 1 << 20


class InputRefused(ValueError):
    """Outside data that is too large, too deep, or not a regular file."""


class RunSync(Protocol):
    """Run a blocking ``fn`` and return its result, without blocking the event loop."""

    def __call__(self, fn: Callable[[], T], /) -> Awaitable[T]: ...


OFFLOAD_THREADS = trio.CapacityLimiter(8)
"""Worker threads that reading and decoding outside data may use at once: a flood of
requests queues here instead of taking one thread (and its buffers) each."""


async def in_thread(fn: Callable[[], T]) -> T:
    """``fn`` in a worker thread (at most :data:`OFFLOAD_THREADS` at once).

    Cancelling abandons the thread rather than waiting for it: what runs there only reads
    and decodes (it changes no state of ours) and is bounded, so an abandoned thread ends
    on its own soon after, and a shutdown never waits for a slow disk or a FIFO.
    """
    return await trio.to_thread.run_sync(fn, abandon_on_cancel=True, limiter=OFFLOAD_THREADS)


async def inline(fn: Callable[[], T]) -> T:
    """``fn`` on the event loop itself: for tests on a fake clock, where a worker thread
    looks like idleness and the clock would jump ahead."""
    await trio.lowlevel.checkpoint()
    return fn()


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The contents of the regular file at ``path``, at most ``limit`` bytes.

    Symbolic links are followed (kubeadm's certificates are links), but what they lead to
    must be a regular file: a FIFO, a device (``/dev/zero``) or a socket is refused before
    a byte is read, and the open itself never blocks (``O_NONBLOCK``). A file longer than
    ``limit`` is refused, not cut: a truncated certificate or manifest would be read as a
    different one. Blocking: call it through :func:`in_thread`.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputRefused(f"{os.fspath(path)}: not a regular file")
        parts: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(_READ_CHUNK, limit + 1 - size))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                raise InputRefused(f"{os.fspath(path)}: larger than {limit} bytes")
        return b"".join(parts)
    finally:
        os.close(fd)


def file_names(path: str | os.PathLike[str], limit: int) -> list[str]:
    """The names of the entries of directory ``path`` that are not directories; none when
    it does not exist. More than ``limit`` entries are refused: the directory is read
    through an iterator, never listed whole. Blocking: call it through :func:`in_thread`.
    """
    names: list[str] = []
    try:
        entries = os.scandir(path)
    except FileNotFoundError:
        return names
    with entries:
        for count, entry in enumerate(entries, 1):
            if count > limit:
                raise InputRefused(f"{os.fspath(path)}: more than {limit} entries")
            if not entry.is_dir(follow_symlinks=False):
                names.append(entry.name)
    return names


def loads_json(data: bytes | str, *, max_bytes: int) -> Any:
    """``json.loads`` for outside data: at most ``max_bytes``, nesting as deep as the
    interpreter's recursion limit (about 1,000 levels; a Kubernetes object needs a few
    dozen).

    Anything refused or undecodable raises :class:`InputRefused` (a ``ValueError``), never
    ``RecursionError``, so a caller handles one kind of failure. Blocking for large
    inputs: call it through :func:`in_thread` when they can be.
    """
    if len(data) > max_bytes:
        raise InputRefused(f"JSON document larger than {max_bytes} bytes")
    try:
        return json.loads(data)
    except RecursionError as exc:
        raise InputRefused("JSON document nested too deeply") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputRefused(f"invalid JSON: {exc}") from exc
