"""The debug console: an ``await``-capable Python prompt inside the running kubelet.

It listens on a unix socket that only root can use (mode 0600, set before the socket
accepts anything). Each connection is a session with its own namespace; input is
compiled with ``PyCF_ALLOW_TOP_LEVEL_AWAIT`` and awaited in the kubelet's own Trio run,
so ``await cri.list_containers()`` or ``await trio.sleep(0)`` work as in code. Helpers:
``tasks()``, ``pods()``, ``components()``, ``resync(pod)``; ``cri`` and ``api`` are the
kubelet's clients.

A failing expression shows its traceback in the session only. A session ending (EOF,
``exit()``, the client vanishing) never touches the kubelet; Ctrl-C in the client
cancels the command that is running.

Wire protocol (line-oriented, so ``socat - UNIX:...`` works too): the client sends
lines; the server answers with output, then ``\\x1e``, the prompt and ``\\x1f``. A line
``\\x03`` cancels the running command or discards pending input.
"""

from __future__ import annotations

import ast
import codeop
import contextlib
import inspect
import io
import logging
import os
import socket
import stat
import traceback
from collections.abc import Callable, Mapping
from types import CodeType, TracebackType
from typing import Any

import trio

from kubelet.config import ConfigError

from . import helpers
from .helpers import ConsoleTarget

log = logging.getLogger(__name__)

PROMPT = ">>> "
MORE = "... "
PROMPT_START = "\x1e"
PROMPT_END = "\x1f"
INTERRUPT = "\x03"
FILENAME = "<console>"
FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
BANNER = (
    "kubelet debug console: await works; helpers tasks(), pods(), components(), "
    "resync(pod); clients cri, api. exit() or Ctrl-D to leave.\n"
)
MAX_LINE = 1 << 20


class _EndSession(Exception):
    """``exit()`` in the console."""


def _exit(*_: Any) -> None:
    raise _EndSession


class _Interrupted(Exception):
    pass


def _user_traceback(exc: BaseException) -> str:
    """The traceback from the console's own code on (our frames are noise to the user)."""
    if isinstance(exc, SyntaxError):
        return "".join(traceback.format_exception_only(type(exc), exc))
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != FILENAME:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _compile(source: str) -> tuple[CodeType | None, CodeType | None]:
    """(statements, last expression): the value of a trailing expression is shown."""
    tree = compile(source, FILENAME, "exec", ast.PyCF_ONLY_AST | FLAGS)
    assert isinstance(tree, ast.Module)
    last: ast.expr | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1].value
        tree.body.pop()
    body = compile(tree, FILENAME, "exec", FLAGS) if tree.body else None
    expr = None
    if last is not None:
        expression = ast.fix_missing_locations(ast.Expression(last))
        expr = compile(expression, FILENAME, "eval", FLAGS)
    return body, expr


async def _run(code: CodeType, namespace: dict[str, Any]) -> Any:
    result = eval(code, namespace)
    if code.co_flags & inspect.CO_COROUTINE:
        result = await result
    return result


class Session:
    """One client: its namespace, its pending input, its output."""

    def __init__(self, stream: trio.SocketStream, namespace: dict[str, Any]) -> None:
        self.stream = stream
        self.namespace = namespace
        self.out = io.StringIO()
        self.pending: list[str] = []
        self.compiler = codeop.CommandCompiler()
        self.compiler.compiler.flags |= FLAGS
        self.lines_send, self.lines = trio.open_memory_channel[str](64)
        self.running: trio.CancelScope | None = None
        namespace["print"] = self.print
        namespace["exit"] = namespace["quit"] = _exit

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` in the console writes to the session, never to the kubelet's stdout."""
        kwargs.setdefault("file", self.out)
        print(*args, **kwargs)

    async def send(self, prompt: str) -> None:
        text, self.out = self.out.getvalue(), io.StringIO()
        await self.stream.send_all(f"{text}{PROMPT_START}{prompt}{PROMPT_END}".encode())

    async def reader(self) -> None:
        """Lines from the client; an interrupt line cancels the running command at once."""
        buf = b""
        async with self.lines_send:
            while True:
                data = await self.stream.receive_some(65536)
                if not data:
                    if self.running is not None:
                        self.running.cancel()  # the client is gone: so is its command
                    return
                buf += data
                if len(buf) > MAX_LINE and b"\n" not in buf:
                    return
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace").rstrip("\r")
                    if line == INTERRUPT and self.running is not None:
                        self.running.cancel()
                        continue
                    await self.lines_send.send(line)

    async def run(self) -> None:
        self.out.write(BANNER)
        await self.send(PROMPT)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.reader)
            async for line in self.lines:
                if line == INTERRUPT:
                    self.pending.clear()
                    self.out.write("KeyboardInterrupt\n")
                    await self.send(PROMPT)
                    continue
                self.pending.append(line)
                source = "\n".join(self.pending)
                try:
                    complete = self.compiler(source, FILENAME, "single")
                except (SyntaxError, ValueError, OverflowError) as exc:
                    self.pending.clear()
                    self.out.write(_user_traceback(exc))
                    await self.send(PROMPT)
                    continue
                if complete is None:
                    await self.send(MORE)
                    continue
                self.pending.clear()
                try:
                    await self.execute(source)
                except _EndSession:
                    nursery.cancel_scope.cancel()
                    return
                await self.send(PROMPT)
            nursery.cancel_scope.cancel()

    async def execute(self, source: str) -> None:
        """Run one complete input; show its value, or its traceback."""
        try:
            body, expr = _compile(source)
        except (SyntaxError, ValueError, OverflowError) as exc:
            self.out.write(_user_traceback(exc))
            return
        with trio.CancelScope() as scope:
            self.running = scope
            try:
                if body is not None:
                    await _run(body, self.namespace)
                if expr is not None:
                    value = await _run(expr, self.namespace)
                    if value is not None:
                        self.namespace["_"] = value
                        self.out.write(f"{value!r}\n")
            except _EndSession:
                raise
            except (Exception, KeyboardInterrupt, SystemExit) as exc:
                self.out.write(_user_traceback(exc))
            finally:
                self.running = None
        if scope.cancelled_caught:
            self.out.write("KeyboardInterrupt\n")


def namespace_for(
    target: ConsoleTarget, api: object | None, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A fresh namespace for one session."""
    return {
        "__name__": "__console__",
        "__builtins__": __builtins__,
        "trio": trio,
        "cri": target.runtime,
        "api": api,
        "components": lambda: target,
        "tasks": helpers.tasks,
        "pods": lambda: helpers.pod_table(target),
        "resync": lambda pod: helpers.resync(target, pod),
        **(extra or {}),
    }


async def _session(stream: trio.SocketStream, make_namespace: Callable[[], dict[str, Any]]) -> None:
    """One connection; nothing it does or suffers escapes to the console server."""
    try:
        async with stream:
            await Session(stream, make_namespace()).run()
    except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass  # the client went away
    except* Exception:
        log.warning("debug console session failed", exc_info=True)


def listen_unix(path: str) -> socket.socket:
    """A listening unix socket at ``path`` with mode 0600.

    Only a stale socket (one nobody listens on) is replaced. Anything else at ``path`` --
    a file, a directory, a live socket of another process -- stops start-up with a
    ``ConfigError`` naming the path, so a mistyped flag never deletes an operator's file.
    """
    claim_socket_path(path)
    parent = os.path.dirname(path) or "."
    os.makedirs(parent, mode=0o750, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)  # before listen(): nobody can connect in between
        sock.listen(16)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise _refused(path, exc.strerror or str(exc)) from exc
    return sock


def _refused(path: str, why: str) -> ConfigError:
    return ConfigError.single("--debug-console-socket", path, why)


def claim_socket_path(path: str) -> None:
    """Make ``path`` free for our socket: nothing there, or a stale socket removed.

    Called at start-up (so a bad path stops the kubelet before it waits for the runtime)
    and again at bind time.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a socket"
        raise _refused(path, f"exists and is {kind}; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)  # stale: left by a kubelet that is gone
        return
    except OSError as exc:
        raise _refused(path, f"cannot check the existing socket: {exc.strerror}") from exc
    finally:
        probe.close()
    raise _refused(path, "another process is listening on this socket")


async def serve_console(
    path: str,
    target: ConsoleTarget,
    api: object | None = None,
    *,
    extra: Mapping[str, Any] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the console on ``path`` until cancelled; the socket file is removed after."""
    sock = listen_unix(path)
    inode = os.stat(path).st_ino
    try:
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        log.info("debug console listening on %s", path)
        async with trio.open_nursery() as nursery:
            task_status.started()
            nursery.start_soon(
                trio.serve_listeners,
                lambda stream: _session(stream, lambda: namespace_for(target, api, extra)),
                [listener],
            )
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == inode:  # never remove a newer kubelet's socket
                os.unlink(path)
