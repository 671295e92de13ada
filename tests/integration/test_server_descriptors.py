"""Descriptor exhaustion for real: the kubelet process with a low open-files limit
and a flood of idle connections to its read-only port.

The limit is lowered to 256 (hard and soft, so the start-up raise keeps it) in the child
before it executes; the flood is 400 idle connections, more than the limit. What the
operator sees must hold: /healthz answers at once, a new static pod starts (the manifest
directory is listed and its file opened), the log has one line for the flood, not one per
connection, and the read-only port serves again once the flood is gone. The kubelet runs
against FakeRuntime served in this test's process on a unix socket; real clock.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import httpx
import pytest
import trio

from kubelet.cri import api
from kubelet.testing import BUSYBOX_IMAGE, FakeRuntime

LIMIT = 256
FLOOD = 400

MANIFEST = f"""\
apiVersion: v1
kind: Pod
metadata:
  name: late
spec:
  containers:
  - name: app
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def lower_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


@attrs.define
class Kubelet:
    proc: trio.Process
    log: Path
    manifests: Path
    read_only: int
    healthz: int

    def text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
async def kubelet(fake: FakeRuntime, short_tmp: Path) -> AsyncIterator[Kubelet]:
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    log = short_tmp / "kubelet.log"
    read_only, healthz = free_port(), free_port()
    # its own podLogsDir: container GC removes the log directories of pods it does not know
    config = short_tmp / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        f"podLogsDir: {short_tmp / 'pod-logs'}\n"
    )
    argv = [
        sys.executable, "-m", "kubelet",
        "--pod-manifest-path", str(manifests),
        "--hostname-override", "fdtest",
        "--root-dir", str(short_tmp / "root"),
        "--container-runtime-endpoint", fake.endpoint,
        "--enable-server=false",
        "--address", "127.0.0.1",
        "--read-only-port", str(read_only),
        "--healthz-bind-address", "127.0.0.1",
        "--healthz-port", str(healthz),
        "--file-check-frequency", "20s",
        "--config", str(config),
        # no pod cgroups: a kubelet process as root on FakeRuntime would otherwise sweep the
        # host's /kubepods and kill the processes of pods it does not know (e2e tests')
        "--cgroups-per-qos=false", "--enforce-node-allocatable=none",
        "--fail-cgroupv1=false",  # this machine is cgroup v1 (hybrid)
    ]  # fmt: skip
    with log.open("wb") as err:
        proc = await trio.lowlevel.open_process(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=lower_limit,
            env={**os.environ, "KUBELET_CONTAINERS_LOG_DIR": str(short_tmp / "containers")},
        )
    try:
        with trio.fail_after(30):
            while " started: node fdtest" not in log.read_text(errors="replace"):
                assert proc.poll() is None, log.read_text(errors="replace")
                await trio.sleep(0.05)
        yield Kubelet(proc, log, manifests, read_only, healthz)
    finally:
        with trio.CancelScope(shield=True):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                with trio.move_on_after(10):
                    await proc.wait()
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                await proc.wait()


async def test_idle_flood_leaves_the_kubelet_its_descriptors(
    kubelet: Kubelet, fake: FakeRuntime
) -> None:
    assert (
        f"Max open files            {LIMIT}" in Path(f"/proc/{kubelet.proc.pid}/limits").read_text()
    )
    flood: list[trio.SocketStream] = []
    try:
        for _ in range(FLOOD):
            flood.append(await trio.open_tcp_stream("127.0.0.1", kubelet.read_only))
        await trio.sleep(0.5)
        async with httpx.AsyncClient(timeout=5) as client:
            with trio.fail_after(1):
                r = await client.get(f"http://127.0.0.1:{kubelet.healthz}/healthz")
            assert (r.status_code, r.text) == (200, "ok")
        # the kubelet's own work: the manifest directory, the file, the CRI socket
        (kubelet.manifests / "late.yaml").write_text(MANIFEST)
        with trio.fail_after(10):
            while not [c for c in fake.containers.values() if c.state == api.CONTAINER_RUNNING]:
                await trio.sleep(0.05)
        open_fds = len(os.listdir(f"/proc/{kubelet.proc.pid}/fd"))
        assert open_fds < LIMIT - 64, open_fds  # the reserve was never touched
        # the flood reached the bound once, and said so once; when it is closed the
        # backlog's dead connections may be accepted fast enough to reach it again
        flooded = kubelet.text()
        assert flooded.count("connection limit reached") == 1, flooded[-3000:]
    finally:
        for stream in flood:
            await trio.aclose_forcefully(stream)
    async with httpx.AsyncClient(timeout=5) as client:
        with trio.fail_after(5):
            while True:
                try:
                    r = await client.get(f"http://127.0.0.1:{kubelet.read_only}/pods")
                    break
                except httpx.TransportError:
                    await trio.sleep(0.1)
        assert [p["metadata"]["name"] for p in r.json()["items"]] == ["late-fdtest"]
    log = kubelet.text()
    assert "Too many open files" not in log and "accept returned" not in log
