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

import contextlib
import errno
import functools
import json
import os
import signal
import stat
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs
import trio
import yaml

T = TypeVar("T")

_READ_CHUNK = 1 << 20


class InputRefused(ValueError):
    """Outside data that is too large, too deep, or not a regular file."""


class RunSync(Protocol):
    """Run a blocking ``fn`` and return its result, without blocking the event loop."""

    def __call__(self, fn: Callable[[], T], /) -> Awaitable[T]: ...


_Limiters = trio.lowlevel.RunVar[trio.CapacityLimiter]

_OFFLOAD: _Limiters = trio.lowlevel.RunVar("offload_threads")
OFFLOAD_PLACES = 8
"""Worker threads that reading and decoding outside data may use at once: a flood of
requests queues here instead of taking one thread (and its buffers) each."""

_STATE: _Limiters = trio.lowlevel.RunVar("state_thread")
"""The thread the kubelet's own state writes (the allocation checkpoint) and its heap
trim use, apart from :func:`offload_threads`: reads and volume removals filling that
pool never hold a pod's start at the checkpoint's gate."""


def offload_threads() -> trio.CapacityLimiter:
    """This run's limiter of :data:`OFFLOAD_PLACES` worker threads for :func:`in_thread`."""
    return _run_limiter(_OFFLOAD, OFFLOAD_PLACES)


def _run_limiter(var: _Limiters, places: int) -> trio.CapacityLimiter:
    """The limiter ``var`` holds in this run, made on first use. One per run: a thread
    abandoned as its run ends never gives its place back (Trio cannot report into a run
    that is over), and the next run in the process (a test's) must not wait for it."""
    try:
        return var.get()
    except LookupError:
        limiter = trio.CapacityLimiter(places)
        var.set(limiter)
        return limiter


async def in_state_thread(fn: Callable[[], T]) -> T:
    """``fn`` in the state thread (one at a time); cancelling abandons it, as
    :func:`in_thread` does."""
    limiter = _run_limiter(_STATE, 1)
    return await trio.to_thread.run_sync(fn, abandon_on_cancel=True, limiter=limiter)


async def in_thread(fn: Callable[[], T]) -> T:
    """``fn`` in a worker thread (at most :data:`OFFLOAD_PLACES` at once).

    Cancelling abandons the thread rather than waiting for it: what runs there only reads
    and decodes (it changes no state of ours) and is bounded, so an abandoned thread ends
    on its own soon after, and a shutdown never waits for a slow disk or a FIFO.
    """
    return await trio.to_thread.run_sync(fn, abandon_on_cancel=True, limiter=offload_threads())


async def inline(fn: Callable[[], T]) -> T:
    """``fn`` on the event loop itself: for tests on a fake clock, where a worker thread
    looks like idleness and the clock would jump ahead."""
    await trio.lowlevel.checkpoint()
    return fn()


def open_regular_file(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> int:
    """A read-only descriptor of the regular file at ``path``; the caller closes it.

    The open never blocks (``O_NONBLOCK``: a FIFO with no writer opens at once) and what
    it opened must be a regular file: a FIFO, a device or a socket is refused. Without
    ``follow_symlinks`` a symbolic link at ``path`` is refused too (a file someone else
    can replace must not lead elsewhere). Blocking on a slow disk: call it through
    :func:`in_thread`.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise InputRefused(f"{os.fspath(path)}: a symbolic link") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputRefused(f"{os.fspath(path)}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The contents of the regular file at ``path``, at most ``limit`` bytes.

    Symbolic links are followed (kubeadm's certificates are links), but what they lead to
    must be a regular file: a FIFO, a device (``/dev/zero``) or a socket is refused before
    a byte is read, and the open itself never blocks (``O_NONBLOCK``). A file longer than
    ``limit`` is refused, not cut: a truncated certificate or manifest would be read as a
    different one. Blocking: call it through :func:`in_thread`.
    """
    fd = open_regular_file(path)
    try:
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


def read_checkpoint_file(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """:func:`read_regular_file`, with a missing file read as None: a checkpoint that was
    never written (the first start) is no error. Blocking: call it through a runner."""
    try:
        return read_regular_file(path, limit)
    except FileNotFoundError:
        return None


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


# -- the cost of a YAML or JSON document, measured before it is built ---------------------


class DocumentRefused(InputRefused):
    """A document past a bound: ``reason`` says which, ``line`` (1-based) where if known."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


_CHECK_EVERY = 4096
"""Events between two calls of a measure's ``check``."""


@attrs.frozen
class YamlShape:
    """What counting a YAML stream learnt about its first document."""

    nodes: int
    """Nodes, aliases counted as what they expand to."""
    extra_document_line: int | None = None
    """The line where a second document starts."""
    unparsable_rest: bool = False
    """What follows the first document does not parse."""


def _mark_line(mark: Any) -> int | None:
    return int(mark.line) + 1 if mark is not None else None


def too_deep(limit: int) -> str:
    return f"the document is nested too deeply (more than {limit} levels)"


def too_many_nodes(what: str, limit: int) -> str:
    return f"the {what} has more than {limit} nodes (values, lists and maps)"


def _next_document(parser: Any, expanded: int) -> YamlShape:
    """After the first document's end: where a second one starts, if one does."""
    try:
        if parser.check_event(yaml.DocumentStartEvent):
            parser.get_event()
            return YamlShape(expanded, _mark_line(parser.peek_event().start_mark))
    except yaml.YAMLError:
        return YamlShape(expanded, unparsable_rest=True)
    return YamlShape(expanded)


def measure_yaml(
    parser: Any,
    *,
    max_nodes: int,
    max_depth: int,
    what: str = "document",
    check: Callable[[int], None] | None = None,
) -> YamlShape:
    """Count the first document's events from ``parser`` (a PyYAML loader, LibYAML's is
    about 1 µs an event) before anything is built: ``DocumentRefused`` at the first event
    past ``max_nodes`` (aliases counted as what they expand to, so an alias bomb is
    refused after a few events) or ``max_depth``, and at an alias inside its own anchor.
    ``check(events)`` is called every few thousand events (a CPU budget); syntax errors
    are left to the caller (``yaml.YAMLError``)."""
    expanded = distinct = depth = events = 0
    open_nodes: list[tuple[str | None, int]] = []
    sizes: dict[str, int] = {}
    opened: set[str] = set()
    while parser.check_event():
        event = parser.get_event()
        events += 1
        if check is not None and events % _CHECK_EVERY == 0:
            check(events)
        if isinstance(event, yaml.DocumentEndEvent):
            return _next_document(parser, expanded)
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in opened:
                raise DocumentRefused("a YAML alias refers to itself", _mark_line(event.start_mark))
            expanded += sizes.get(str(event.anchor), 1)  # unknown: the composer names it
        elif isinstance(event, yaml.NodeEvent):  # a scalar, or a list or map opening
            distinct += 1
            expanded += 1
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > max_depth:
                    raise DocumentRefused(too_deep(max_depth), _mark_line(event.start_mark))
                open_nodes.append((event.anchor, expanded - 1))
                if event.anchor is not None:
                    opened.add(event.anchor)
            elif event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, before = open_nodes.pop()
            if anchor is not None:
                sizes[anchor] = expanded - before
                opened.discard(anchor)
        if expanded > max_nodes:
            reason = (
                too_many_nodes(what, max_nodes)
                if distinct > max_nodes
                else f"YAML aliases expand this to more than {max_nodes} nodes"
            )
            raise DocumentRefused(reason, _mark_line(event.start_mark))
    return YamlShape(expanded)


def check_json_cost(data: bytes | str, *, max_nodes: int, what: str = "document") -> None:
    """Refuse JSON that would build more than twice ``max_nodes`` objects, before ``json``
    builds them: every node but the root needs a ',' or ':' or opens with '[' or '{' (a
    map entry needs one ':' for two nodes), so these bound the count from above; C-speed
    counts, no Python per byte."""
    raw = data.encode() if isinstance(data, str) else data
    marks = raw.count(b",") + 2 * raw.count(b":") + raw.count(b"[") + raw.count(b"{")
    if marks > 2 * max_nodes:
        raise DocumentRefused(
            f"the JSON has {marks} separators and brackets (',', ':' counted twice, '[', "
            f"'{{'), more than a {what} of {max_nodes} nodes (values, lists and maps) can have"
        )


def measure_json(value: Any, *, max_nodes: int, max_depth: int, what: str = "document") -> int:
    """The nodes of a decoded JSON value (a map's keys too); ``DocumentRefused`` past
    ``max_nodes`` or ``max_depth``."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        nodes += 1 + (len(item) if isinstance(item, dict) else 0)
        if nodes > max_nodes:
            raise DocumentRefused(too_many_nodes(what, max_nodes))
        if isinstance(item, dict | list):
            if depth >= max_depth:
                raise DocumentRefused(too_deep(max_depth))
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return nodes


# -- plugins ------------------------------------------------------------------------------


class OutputTooLarge(InputRefused):
    """A plugin wrote more than its bound to stdout (it was killed, its answer refused)."""


def _kill_group(process: trio.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.kill()


async def _kill(process: trio.Process) -> None:
    """As Go's exec.CommandContext: the plugin is killed outright when its time is up,
    with every process it started (its own session): a child left writing to the pipes
    would hold them open, and the run with them, until the timeout."""
    _kill_group(process)


async def _keep(stream: trio.abc.ReceiveStream, limit: int, into: list[bytes]) -> bool:
    """Read ``stream`` to its end, keeping its first ``limit`` bytes in ``into``; True
    (and stop reading) as soon as it has more."""
    kept = 0
    async for chunk in stream:
        into.append(bytes(chunk[: limit - kept]))
        kept += len(into[-1])
        if len(chunk) > len(into[-1]):
            return True
    return False


async def _drain(stream: trio.abc.ReceiveStream, limit: int, into: list[bytes]) -> None:
    """Like :func:`_keep`, but read on to the end (a plugin blocked on a full stderr pipe
    would only wait for its timeout)."""
    if await _keep(stream, limit, into):
        async for _ in stream:
            pass


async def run_plugin(
    argv: Sequence[str],
    *,
    stdin: bytes,
    env: Mapping[str, str],
    timeout: float,
    stdout_limit: int,
    stderr_kept: int = 64 * 1024,
) -> tuple[int, bytes, bytes]:
    """Run a plugin (a credential provider, an exec credential plugin) in a session of its
    own; (exit status, stdout, the first ``stderr_kept`` bytes of stderr).

    ``trio.TooSlowError`` past ``timeout`` and :class:`OutputTooLarge` past
    ``stdout_limit`` bytes on stdout, the plugin and its children killed either way;
    ``OSError`` when it cannot be started. Nothing here logs what the plugin wrote.
    """
    out: list[bytes] = []
    err: list[bytes] = []
    start = functools.partial(
        trio.run_process,
        list(argv),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        check=False,
        env=dict(env),
        start_new_session=True,
        deliver_cancel=_kill,
    )
    with trio.fail_after(timeout):
        try:
            async with trio.open_nursery() as nursery:
                process: trio.Process = await nursery.start(start)
                assert process.stdout is not None and process.stderr is not None
                nursery.start_soon(_drain, process.stderr, stderr_kept, err)
                too_large = await _keep(process.stdout, stdout_limit, out)
                if too_large:
                    _kill_group(process)
                    await process.stdout.aclose()
        except BaseExceptionGroup as group:  # a plugin that cannot start: its OSError
            leaves = group.exceptions
            if len(leaves) == 1 and isinstance(leaves[0], OSError):
                raise leaves[0] from None
            raise
    if too_large:
        raise OutputTooLarge(f"output larger than {stdout_limit} bytes")
    assert process.returncode is not None
    return process.returncode, b"".join(out), b"".join(err)
