"""systemd notifications: the environment read as go-systemd reads it, READY=1, and the
watchdog pinging at half its period only while the health checks pass."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet.config import ConfigError
from kubelet.server.healthz import NamedCheck, ping
from kubelet.server.sdnotify import SystemdUnit, run_watchdog, send_ready


@pytest.fixture
def listener(short_tmp: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(short_tmp / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    with sock:
        yield path, sock


def received(sock: socket.socket) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(sock.recv(4096))
        except BlockingIOError:
            return out


def test_the_environment_as_systemd_passes_it() -> None:
    assert SystemdUnit.from_environ({}) == SystemdUnit()
    unit = SystemdUnit.from_environ(
        {"NOTIFY_SOCKET": "/run/n.sock", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "42"},
        pid=42,
    )
    assert (unit.notify_socket, unit.watchdog_period, unit.watchdog_interval) == (
        "/run/n.sock",
        30.0,
        15.0,
    )
    other = SystemdUnit.from_environ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "7"}, pid=42)
    assert other.watchdog_interval == 0  # the watchdog is another process's


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"WATCHDOG_USEC": "soon"}, "error converting WATCHDOG_USEC: 'soon'"),
        ({"WATCHDOG_USEC": "0"}, "error WATCHDOG_USEC must be a positive number"),
        ({"WATCHDOG_USEC": "1000000"}, "configure watchdog timeout too small: 1s"),
        ({"WATCHDOG_USEC": "5000000", "WATCHDOG_PID": "x"}, "error converting WATCHDOG_PID"),
    ],
)
def test_an_unusable_watchdog_stops_start_up(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        SystemdUnit.from_environ(environ, pid=1)
    assert message in str(exc.value)


async def test_ready_goes_to_the_socket_and_not_elsewhere(
    listener: tuple[str, socket.socket],
) -> None:
    path, sock = listener
    await send_ready(SystemdUnit(path))
    assert received(sock) == [b"READY=1"]
    assert await SystemdUnit().notify("READY=1") is False  # not under systemd
    await send_ready(SystemdUnit(path + ".gone"))  # logged, not raised


async def test_the_abstract_namespace() -> None:
    name = f"kubelet-test-{id(object())}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        assert await SystemdUnit("@" + name).notify("READY=1")
        assert sock.recv(100) == b"READY=1"


async def test_the_watchdog_pings_at_half_its_period_while_healthy(
    listener: tuple[str, socket.socket], autojump_clock: trio.testing.MockClock
) -> None:
    path, sock = listener
    healthy = True
    checks = [
        NamedCheck("ping", ping),
        NamedCheck("syncloop", lambda: None if healthy else "stuck"),
    ]
    unit = SystemdUnit(path, watchdog_period=20.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_watchdog, unit, checks)
        await trio.sleep(25)  # pings at 0, 10, 20
        assert received(sock) == [b"WATCHDOG=1"] * 3
        healthy = False
        await trio.sleep(30)  # 30, 40, 50: unhealthy, no ping
        assert received(sock) == []
        healthy = True
        await trio.sleep(10)  # 60
        assert received(sock) == [b"WATCHDOG=1"]
        nursery.cancel_scope.cancel()
