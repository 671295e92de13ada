"""The debug console over its unix socket, inside this test's Trio run (as inside the agent)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio

from kubelet.api import ObjectMeta, Pod
from kubelet.config import ConfigError
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.debug import serve_console
from kubelet.debug.client import Connection, repl
from kubelet.debug.console import INTERRUPT, PROMPT_END, PROMPT_START, listen_unix
from kubelet.pods import PodManager, PodWorkers
from kubelet.pods.workers import PodSyncer, SyncResult


class _Syncer(PodSyncer):
    async def sync_pod(self, pod: Pod) -> SyncResult:
        return SyncResult()

    async def terminate_pod(self, pod: Pod, grace: int | None) -> None:
        pass


@attrs.define
class Target:
    runtime: RuntimeClient
    pods: PodManager
    workers: PodWorkers


class Client:
    """The console protocol from the test's side (async, on a trio stream)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    async def read(self) -> tuple[str, str]:
        """(output, prompt) up to the next prompt."""
        with trio.fail_after(10):
            while PROMPT_END.encode() not in self.buf:
                data = await self.stream.receive_some(65536)
                assert data, f"console closed; got {self.buf!r}"
                self.buf += data
        frame, _, self.buf = self.buf.partition(PROMPT_END.encode())
        output, _, prompt = frame.decode().rpartition(PROMPT_START)
        return output, prompt

    async def run(self, *lines: str) -> str:
        """Send ``lines``; the output of the last one (after its prompt)."""
        output = ""
        for line in lines:
            await self.stream.send_all(line.encode() + b"\n")
            output, _ = await self.read()
        return output


@pytest.fixture
async def console(
    clients: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> AsyncIterator[tuple[str, Target]]:
    runtime, _ = clients
    pods = PodManager()
    pods.upsert(Pod(metadata=ObjectMeta(name="web", namespace="default", uid="uid-web-1")))
    workers = PodWorkers(_Syncer())
    target = Target(runtime, pods, workers)
    path = str(short_tmp / "debug.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(workers.run)
        await nursery.start(
            lambda task_status: serve_console(path, target, task_status=task_status)
        )
        yield path, target
        nursery.cancel_scope.cancel()
    assert not os.path.exists(path), "the socket file is removed on shutdown"


async def connect(path: str) -> Client:
    client = Client(await trio.open_unix_socket(path))
    banner, prompt = await client.read()
    assert "debug console" in banner and prompt == ">>> "
    return client


async def test_socket_is_private(console: tuple[str, Target]) -> None:
    path, _ = console
    mode = os.stat(path).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600


async def test_await_and_task_tree(console: tuple[str, Target]) -> None:
    path, _ = console
    client = await connect(path)
    assert await client.run("await trio.sleep(0)") == ""
    tree = await client.run("tasks()")
    assert tree.startswith("└─ <init>")
    assert "test_await_and_task_tree" in tree
    assert "serve_listeners" in tree or "serve_console" in tree
    # the console session's own task, awaiting in the console's code
    assert "Session.run" in tree or "run ›" in tree
    assert "[" in tree and ".py:" in tree  # await frames with file:line
    assert "asyncio tasks" in tree  # trio-asyncio's loop is open in this test
    assert await client.run("x = await cri.version()", "x.runtime_name") == "'fakeruntime'\n"


async def test_errors_stay_in_the_console(console: tuple[str, Target]) -> None:
    path, _ = console
    client = await connect(path)
    out = await client.run("1/0")
    assert "Traceback" in out and "ZeroDivisionError: division by zero" in out
    assert 'File "<console>"' in out and "console.py" not in out
    assert "SyntaxError" in await client.run("def (")
    assert await client.run("40 + 2") == "42\n"
    assert await client.run("print('to the session')") == "to the session\n"


async def test_multi_line_input(console: tuple[str, Target]) -> None:
    path, _ = console
    client = await connect(path)
    await client.stream.send_all(b"async def f():\n")
    assert await client.read() == ("", "... ")
    await client.stream.send_all(b"    await trio.sleep(0)\n")
    assert await client.read() == ("", "... ")
    assert await client.run("    return 5", "", "await f()") == "5\n"


async def test_helpers(console: tuple[str, Target]) -> None:
    path, _ = console
    client = await connect(path)
    table = await client.run("pods()")
    assert "default/web" in table and "uid-web-" in table
    assert await client.run("components().pods is not None") == "True\n"
    out = await client.run("resync('default/web')")
    assert out == "resync requested for default/web (uid-web-1)\n"
    assert "LookupError" in await client.run("resync('nope')")


async def test_sessions_have_their_own_namespace(console: tuple[str, Target]) -> None:
    path, _ = console
    one, two = await connect(path), await connect(path)
    await one.run("secret = 1")
    assert "NameError" in await two.run("secret")
    assert await one.run("secret") == "1\n"


async def test_interrupt_and_disconnect_leave_the_agent_alone(
    console: tuple[str, Target],
) -> None:
    path, _ = console
    client = await connect(path)
    await client.stream.send_all(b"await trio.sleep(1000)\n")
    await trio.sleep(0.1)
    await client.stream.send_all(INTERRUPT.encode() + b"\n")
    out, prompt = await client.read()
    assert (out, prompt) == ("KeyboardInterrupt\n", ">>> ")
    # a client that vanishes mid-command
    await client.stream.send_all(b"await trio.sleep(1000)\n")
    await client.stream.aclose()
    await trio.sleep(0.1)
    again = await connect(path)
    assert await again.run("1 + 1") == "2\n"
    await again.stream.send_all(b"exit()\n")
    with trio.fail_after(5):
        assert await again.stream.receive_some() == b"", "exit() ends the session"


async def test_terminal_client(
    console: tuple[str, Target], capsys: pytest.CaptureFixture[str]
) -> None:
    """``kubelet debug``'s blocking client, driven from a thread with scripted input."""
    path, _ = console
    script = iter(["a = 6 * 7", "a", "exit()"])
    prompts: list[str] = []

    def read(prompt: str) -> str:
        prompts.append(prompt)
        return next(script)

    def run() -> int:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        with sock:
            return repl(Connection(sock), read)

    assert await trio.to_thread.run_sync(run) == 0
    assert prompts == [">>> ", ">>> ", ">>> "]
    assert "42\n" in capsys.readouterr().out


# -- what may already be at the socket path -------------------------------------------------


def test_a_regular_file_at_the_path_is_never_deleted(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("an operator's file")
    with pytest.raises(ConfigError) as caught:
        listen_unix(str(path))
    assert str(path) in str(caught.value) and "not a socket" in str(caught.value)
    assert path.read_text() == "an operator's file"


def test_a_directory_at_the_path_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "dir"
    path.mkdir()
    with pytest.raises(ConfigError, match="is a directory"):
        listen_unix(str(path))
    assert path.is_dir()


def test_a_stale_socket_is_replaced(tmp_path: Path) -> None:
    path = str(tmp_path / "debug.sock")
    old = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old.bind(path)
    old.close()  # nobody listens: stale
    sock = listen_unix(path)
    try:
        assert stat.S_ISSOCK(os.stat(path).st_mode)
    finally:
        sock.close()


def test_a_live_socket_of_another_process_is_kept(tmp_path: Path) -> None:
    path = str(tmp_path / "debug.sock")
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(path)
    live.listen(1)
    try:
        inode = os.stat(path).st_ino
        with pytest.raises(ConfigError, match="another process is listening"):
            listen_unix(path)
        assert os.stat(path).st_ino == inode
    finally:
        live.close()


def test_the_kubelet_process_names_the_bad_path(tmp_path: Path) -> None:
    path = tmp_path / "precious"
    path.write_text("keep me")
    result = subprocess.run(
        [
            sys.executable, "-m", "kubelet",
            "--debug-console-socket", str(path),
            "--root-dir", str(tmp_path / "root"),
            "--container-runtime-endpoint", f"unix://{tmp_path}/none.sock",
            "--enable-server=false", "--healthz-port=0", "--read-only-port=0",
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert f"kubelet: --debug-console-socket: {path}: exists and is not a socket" in result.stderr
    assert "Traceback" not in result.stderr
    assert path.read_text() == "keep me"
