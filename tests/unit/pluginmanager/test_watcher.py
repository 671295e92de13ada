"""The plugin watcher against FakeRegistrar sockets, on a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
import trio

from kubelet.boundedio import inline
from kubelet.pluginmanager import PluginParts, PluginRefused, PluginWatcher, run_plugin_manager
from kubelet.testing.fakecsi import FakeRegistrar

T = TypeVar("T")


class Recorder:
    """A handler that keeps what it was asked; ``fail`` / ``hang`` / ``refuse`` on demand."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = ""
        self.hang = False
        self.refuse = ""

    def validate(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        if self.refuse:
            raise PluginRefused(self.refuse)

    async def register(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        self.calls.append(("register", name))
        if self.hang:
            await trio.sleep_forever()
        if self.fail:
            raise RuntimeError(self.fail)

    async def deregister(self, name: str) -> None:
        self.calls.append(("deregister", name))


@pytest.fixture
def registry(short_tmp: Path) -> Path:
    return short_tmp / "plugins_registry"


async def wait_for(predicate: object, timeout: float = 30) -> float:
    assert callable(predicate)
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.1)
    return trio.current_time()


async def watching(
    nursery: trio.Nursery, root: Path, handler: Recorder
) -> tuple[PluginWatcher, trio.CancelScope]:
    parts = PluginParts(
        root_dir=str(root), handlers={"CSIPlugin": handler}, watch_files=False, io=inline
    )

    async def run(task_status: trio.TaskStatus[tuple[PluginWatcher, trio.CancelScope]]) -> None:
        with trio.CancelScope() as scope:
            await run_plugin_manager(
                parts,
                task_status=_Mapped(task_status, scope),  # type: ignore[arg-type]
            )

    return await nursery.start(run)


class _Mapped:
    def __init__(self, status: trio.TaskStatus[object], scope: trio.CancelScope) -> None:
        self.status, self.scope = status, scope

    def started(self, value: object = None) -> None:
        self.status.started((value, self.scope))


@pytest.fixture
async def nursery(aio_loop: None) -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def test_plugins_present_at_start_register_again_after_a_restart(
    nursery: trio.Nursery, short_tmp: Path, registry: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeRegistrar(registry, "a.example", "/run/a.sock")
    async with plugin.serve():
        handler = Recorder()
        watcher, scope = await watching(nursery, short_tmp, handler)
        await wait_for(lambda: plugin.registered is True)
        assert [p.endpoint for p in watcher.registered.values()] == ["/run/a.sock"]
        scope.cancel()  # the kubelet stops; the plugin stays
        again = Recorder()
        await watching(nursery, short_tmp, again)
        await wait_for(lambda: len(plugin.statuses) == 2)
        assert again.calls == [("register", "a.example")]
        assert plugin.statuses == [(True, ""), (True, "")]


async def test_a_replaced_socket_is_registered_anew_and_a_removed_one_deregistered(
    nursery: trio.Nursery, short_tmp: Path, registry: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeRegistrar(registry, "a.example", "/run/a.sock")
    handler = Recorder()
    await watching(nursery, short_tmp, handler)
    await plugin.start()
    await wait_for(lambda: plugin.registered is True)
    await plugin.crash()
    await plugin.start()  # the plugin restarted: a new socket at the same path
    await wait_for(lambda: len(plugin.statuses) == 2)
    await plugin.stop()
    await wait_for(lambda: handler.calls[-1] == ("deregister", "a.example"))
    assert handler.calls == [
        ("register", "a.example"),
        ("deregister", "a.example"),
        ("register", "a.example"),
        ("deregister", "a.example"),
    ]


async def test_a_failed_registration_is_told_and_tried_again_backing_off(
    nursery: trio.Nursery, short_tmp: Path, registry: Path, autojump_clock: trio.abc.Clock
) -> None:
    plugin = FakeRegistrar(registry, "a.example", "/run/a.sock")
    handler = Recorder()
    handler.fail = "no room"
    async with plugin.serve():
        await watching(nursery, short_tmp, handler)
        await trio.sleep(20)
        assert plugin.statuses[0] == (
            False,
            "RegisterPlugin error -- plugin registration failed with err: no room",
        )
        # 0, 1, 3, 7, 15 s: backing off (not every second)
        assert 4 <= len(plugin.statuses) <= 6
        handler.fail = ""
        await wait_for(lambda: plugin.registered is True, timeout=40)


async def test_a_refused_plugin_hears_why_and_a_hanging_handler_times_out(
    nursery: trio.Nursery, short_tmp: Path, registry: Path, autojump_clock: trio.abc.Clock
) -> None:
    handler = Recorder()
    handler.refuse = "wrong version"
    plugin = FakeRegistrar(registry, "a.example", "/run/a.sock")
    async with plugin.serve():
        await watching(nursery, short_tmp, handler)
        await wait_for(lambda: bool(plugin.statuses))
        assert plugin.statuses[0] == (
            False,
            "RegisterPlugin error -- plugin validation failed with err: wrong version",
        )
        assert handler.calls == []
        handler.refuse = ""
        handler.hang = True
        at = await wait_for(lambda: len(plugin.statuses) >= 2, timeout=120)
        assert plugin.statuses[1] == (
            False,
            "RegisterPlugin error -- plugin registration failed with err: timed out",
        )
        assert at >= 60


async def test_an_oversized_answer_is_refused_and_others_register(
    nursery: trio.Nursery, short_tmp: Path, registry: Path, autojump_clock: trio.abc.Clock
) -> None:
    big = FakeRegistrar(registry, "big.example", "/run/" + "x" * 100_000)
    good = FakeRegistrar(registry, "good.example", "/run/good.sock")
    handler = Recorder()
    async with big.serve(), good.serve():
        await watching(nursery, short_tmp, handler)
        await wait_for(lambda: good.registered is True)
        await trio.sleep(5)
        assert big.statuses == []  # GetInfo refused by the message limit
        assert handler.calls == [("register", "good.example")]


async def test_hidden_files_and_other_files_are_not_plugins(
    nursery: trio.Nursery, short_tmp: Path, registry: Path, autojump_clock: trio.abc.Clock
) -> None:
    registry.mkdir(parents=True)
    (registry / "notes.txt").write_text("not a socket")
    hidden = FakeRegistrar(registry, "h", "/run/h.sock")
    hidden.path = registry / ".hidden.sock"
    handler = Recorder()
    async with hidden.serve():
        watcher, _ = await watching(nursery, short_tmp, handler)
        await trio.sleep(5)
        assert handler.calls == [] and hidden.statuses == []
        assert watcher.registered == {}


async def test_with_the_watch_an_unchanged_registry_is_not_read_every_second(
    nursery: trio.Nursery, short_tmp: Path, registry: Path, autojump_clock: trio.abc.Clock
) -> None:
    scans = 0

    async def counting(fn: Callable[[], T]) -> T:
        nonlocal scans
        scans += 1
        return fn()

    handler = Recorder()
    parts = PluginParts(root_dir=str(short_tmp), handlers={"CSIPlugin": handler}, io=counting)
    await nursery.start(run_plugin_manager, parts)
    await trio.sleep(30)
    assert scans <= 3  # the first scan, the one once the watch began; not one a second
    plugin = FakeRegistrar(registry, "a.example", "/run/a.sock")
    async with plugin.serve():  # inotify's word wakes the scan
        await wait_for(lambda: plugin.registered is True)
    assert handler.calls == [("register", "a.example")]
