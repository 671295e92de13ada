"""A real kubelet process under a (test-made) systemd notification socket: READY=1 once
it serves, then WATCHDOG=1 pings at half of ``WATCHDOG_USEC``; a malformed one stops it.

Standalone on FakeRuntime served in this test's process, real clock; the socket is a
unix datagram socket in a temporary directory."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import trio

from kubelet.testing import FakeRuntime


def kubelet_argv(fake: FakeRuntime, tmp: Path) -> list[str]:
    config = tmp / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        f"podLogsDir: {tmp / 'pod-logs'}\n"
    )
    return [
        sys.executable, "-m", "kubelet",
        "--hostname-override", "notifytest", "--root-dir", str(tmp / "root"),
        "--container-runtime-endpoint", fake.endpoint, "--config", str(config),
        "--enable-server=false", "--healthz-port=0", "--read-only-port=0",
        "--cgroups-per-qos=false", "--enforce-node-allocatable=none",
        "--fail-cgroupv1=false",
    ]  # fmt: skip


async def start(fake: FakeRuntime, tmp: Path, environ: dict[str, str]) -> trio.Process:
    with (tmp / "kubelet.log").open("wb") as err:
        return await trio.lowlevel.open_process(
            kubelet_argv(fake, tmp),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={
                **os.environ,
                "KUBELET_CONTAINERS_LOG_DIR": str(tmp / "containers"),
                **environ,
            },
        )


async def test_ready_then_watchdog_pings(fake: FakeRuntime, short_tmp: Path) -> None:
    path = str(short_tmp / "notify")
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    await sock.bind(path)
    proc = await start(fake, short_tmp, {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"})
    log = short_tmp / "kubelet.log"
    try:
        messages: list[bytes] = []
        with trio.move_on_after(60):
            while messages.count(b"WATCHDOG=1") < 3:
                messages.append(await sock.recv(4096))
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        start_at = trio.current_time()
        assert messages[:1] == [b"READY=1"], messages
        assert messages.count(b"WATCHDOG=1") == 3, log.read_text(errors="replace")[-3000:]
        assert "Starting systemd watchdog with interval 1s" in log.read_text(errors="replace")
        with trio.fail_after(30):  # about one a second
            await sock.recv(4096)
        assert trio.current_time() - start_at < 5
    finally:
        sock.close()
        with trio.CancelScope(shield=True):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                with trio.move_on_after(30):
                    await proc.wait()
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                await proc.wait()


async def test_a_malformed_watchdog_period_stops_start_up(
    fake: FakeRuntime, short_tmp: Path
) -> None:
    proc = await start(fake, short_tmp, {"WATCHDOG_USEC": "500000"})
    with trio.fail_after(60):
        code = await proc.wait()
    text = (short_tmp / "kubelet.log").read_text(errors="replace")
    assert code == 1, text[-3000:]
    assert "WATCHDOG_USEC: configure watchdog timeout too small: 500ms" in text
