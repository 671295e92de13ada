"""A FakeApiServer process and a kubelet process joined to it, on real containerd."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient
from kubelet.cri.__main__ import cleanup

CONTAINERD_ENDPOINT = os.environ.get(
    "KUBELET_E2E_CRI_ENDPOINT", "unix:///run/containerd/containerd.sock"
)


CONFIG_HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
LEGACY_FLAG_DEFAULTS = (
    "readOnlyPort: 10255\n"
    "authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}\n"
    "authorization: {mode: AlwaysAllow}\n"
)
"""What a kubelet without ``--config`` defaults to (the flags' old defaults): a config
file made only for the podLogsDir must not change the rest."""


def own_pod_logs(args: list[str], where: Path) -> list[str]:
    """A kubelet's arguments with a podLogsDir of its own under ``where``: its container
    GC removes the log directory of every pod it does not know there, as upstream's does,
    so no two test kubelets may share one. An existing ``--config`` file gets the line."""
    if args[1:3] != ["-m", "kubelet"]:
        return args
    line = f"podLogsDir: {where / 'pod-logs'}\n"
    if "--config" in args:
        config = Path(args[args.index("--config") + 1])
        text = config.read_text()
        if "podLogsDir:" not in text:
            config.write_text(text + line)
        return args
    config = where / "pod-logs-config.yaml"
    config.write_text(CONFIG_HEADER + line + LEGACY_FLAG_DEFAULTS)
    return [*args, "--config", str(config)]


class Processes:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        args = own_pod_logs(args, log.parent)
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


NODE_REGISTERED_WITHIN = 60.0
"""seconds a kubelet process has to register its Node (a loaded machine starts Python
slowly; a healthy start takes a few seconds)"""


async def node_registered(api: httpx.AsyncClient, node: str) -> None:
    """Wait until the kubelet has registered ``node`` with the API server."""
    with trio.fail_after(NODE_REGISTERED_WITHIN):
        while (await api.get(f"/api/v1/nodes/{node}")).status_code != 200:
            await trio.sleep(0.1)


@pytest.fixture
async def cluster(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> AsyncIterator[tuple[str, str, Processes]]:
    async with open_cluster(cri[0], short_tmp) as found:
        yield found


@contextlib.asynccontextmanager
async def open_cluster(
    runtime: RuntimeClient, short_tmp: Path, extra: Sequence[str] = (), root_dir: Path | None = None
) -> AsyncIterator[tuple[str, str, Processes]]:
    """FakeApiServer and a kubelet joined to it (``extra``: more kubelet flags)."""
    procs = Processes()
    port_file = short_tmp / "port"
    procs.start(
        [
            sys.executable,
            "-m",
            "kubelet.testing.fakeapiserver",
            "--listen",
            "127.0.0.1:0",
            "--port-file",
            str(port_file),
        ],
        short_tmp / "apiserver.log",
    )
    with trio.fail_after(60):  # a loaded machine starts Python slowly
        while not port_file.exists() or not port_file.read_text().strip():
            await trio.sleep(0.05)
    url = f"http://127.0.0.1:{port_file.read_text().strip()}"
    node = f"e2e-{uuid.uuid4().hex[:6]}"
    kubeconfig = short_tmp / "kubelet.conf"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "e2e",
                "clusters": [{"name": "e2e", "cluster": {"server": url}}],
                "users": [{"name": "kubelet", "user": {"token": "e2e-token"}}],
                "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "kubelet"}}],
            }
        )
    )
    procs.start(
        [
            sys.executable,
            "-m",
            "kubelet",
            "--kubeconfig",
            str(kubeconfig),
            "--hostname-override",
            node,
            "--enable-server=false",
            "--healthz-port=0",
            "--read-only-port=0",
            "--root-dir",
            str(root_dir or short_tmp / "root"),
            "--container-runtime-endpoint",
            CONTAINERD_ENDPOINT,
            "--fail-swap-on=false",  # as upstream's node e2e: a CI machine may swap
            "--fail-cgroupv1=false",  # this machine is cgroup v1 (hybrid)
            *extra,
        ],
        short_tmp / "kubelet.log",
    )
    try:
        yield url, node, procs
    finally:
        procs.stop_all()
        await cleanup(runtime, kubelet_only=True)
        # a CRI call the kubelet sent just before it died may still complete: once more
        await trio.sleep(1)
        await cleanup(runtime, kubelet_only=True)
