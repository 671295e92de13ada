#!/usr/bin/env python3
"""Memory pressure to a stopped pod, end to end: the kubelet process on containerd.

    sudo flock /tmp/containerd-e2e.lock .venv/bin/python scripts/bench_eviction_e2e.py [--rounds 3]

Each round starts a FakeApiServer process and a kubelet process joined to it (on
containerd, ``--root-dir`` of its own) with ``evictionHard: memory.available`` set 400 MiB
below what the machine has available, then creates one pod that, once running, writes
700 MiB into a memory-backed emptyDir (tmpfs pages are charged to the pod). The script
polls the root memory cgroup every 10 ms for the moment the node's available memory
crosses the threshold (working set as the kubelet computes it), and the CRI every 10 ms
for the moment the pod's container stops. Printed per round: crossing → container
stopped, and the median. Upstream's kubelet on cgroup v2 (no notifier) waits for its next
10 s pass; see scripts/bench_eviction_notifier.py for that comparison on one cgroup.

Needs root and cgroup v1 (the notifier); another kubelet must not run against containerd
(take the e2e lock). Everything the round made is removed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import trio
import trio_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubelet.cri import connect, labels
from kubelet.cri.__main__ import cleanup
from kubelet.stats import Cgroups

ENDPOINT = "unix:///run/containerd/containerd.sock"
MiB = 1 << 20
MARGIN = 400 * MiB
FILL_MIB = 700


def available() -> int:
    """The node's available memory as the kubelet computes it (capacity − working set)."""
    cg = Cgroups(Path("/"))
    memory = cg.memory("/")
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0]) * 1024
    assert memory is not None
    return info["MemTotal"] - memory.working_set


def pod(node: str) -> dict[str, object]:
    script = (
        f"trap 'exit 0' TERM; sleep 2; dd if=/dev/zero of=/fill/x bs=1M count={FILL_MIB} & "
        "while true; do sleep 0.2; done"
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hog", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {
                    "name": "hog",
                    "image": "docker.io/library/busybox:1.35",
                    "command": ["sh", "-c", script],
                    "volumeMounts": [{"name": "fill", "mountPath": "/fill"}],
                }
            ],
            "volumes": [{"name": "fill", "emptyDir": {"medium": "Memory"}}],
        },
    }


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("wb"))


async def one_round(tmp: Path) -> float:
    port_file = tmp / "port"
    api = start([sys.executable, "-m", "kubelet.testing.fakeapiserver", "--listen",
                 "127.0.0.1:0", "--port-file", str(port_file)], tmp / "api.log")  # fmt: skip
    kubelet = None
    try:
        with trio.fail_after(20):
            while not port_file.exists() or not port_file.read_text().strip():
                await trio.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        node = f"bench-{uuid.uuid4().hex[:6]}"
        kubeconfig = tmp / "kubelet.conf"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "b",
            "clusters": [{"name": "b", "cluster": {"server": url}}],
            "users": [{"name": "k", "user": {"token": "t"}}],
            "contexts": [{"name": "b", "context": {"cluster": "b", "user": "k"}}],
        }))  # fmt: skip
        threshold = (available() - MARGIN) // MiB
        config = tmp / "kubelet.yaml"
        config.write_text(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            f"evictionHard: {{memory.available: {threshold}Mi}}\n"
        )
        kubelet = start([sys.executable, "-m", "kubelet", "--kubeconfig", str(kubeconfig),
                         "--config", str(config), "--hostname-override", node,
                         "--enable-server=false", "--healthz-port=0", "--read-only-port=0",
                         "--root-dir", str(tmp / "root"), "--fail-swap-on=false",
                         "--fail-cgroupv1=false",  # a v1 (hybrid) host is allowed
                         "--container-runtime-endpoint",
                         ENDPOINT], tmp / "kubelet.log")  # fmt: skip
        async with (
            httpx.AsyncClient(base_url=url, timeout=10) as client,
            connect(ENDPOINT) as (
                runtime,
                _,
            ),
        ):
            with trio.fail_after(30):
                while (await client.get(f"/api/v1/nodes/{node}")).status_code != 200:
                    await trio.sleep(0.1)
            r = await client.post("/api/v1/namespaces/default/pods", json=pod(node))
            assert r.status_code == 201, r.text
            selector = {labels.POD_NAME: "hog"}
            with trio.fail_after(60):
                while not await runtime.list_containers(state=1, labels=selector):
                    await trio.sleep(0.05)
            limit = threshold * MiB
            with trio.fail_after(60):
                while available() >= limit:
                    await trio.sleep(0.01)
            crossed = time.monotonic()
            with trio.fail_after(60):
                while await runtime.list_containers(state=1, labels=selector):
                    await trio.sleep(0.01)
            stopped = time.monotonic()
            with trio.fail_after(30):
                while True:
                    status = (await client.get("/api/v1/namespaces/default/pods/hog")).json()
                    if (status.get("status") or {}).get("reason") == "Evicted":
                        break
                    await trio.sleep(0.1)
            await cleanup(runtime, kubelet_only=True)
        return stopped - crossed
    finally:
        if os.environ.get("BENCH_LOG"):
            for line in (tmp / "kubelet.log").read_text().splitlines():
                if "evict" in line or "crossed" in line or "reclaim" in line:
                    print("   ", line[:200])
        for proc in (kubelet, api):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=10)


async def main(rounds: int) -> None:
    if os.geteuid() != 0:
        sys.exit("needs root (containerd, cgroups)")
    results = []
    async with trio_asyncio.open_loop():
        for i in range(rounds):
            with tempfile.TemporaryDirectory(prefix="evb-", dir="/tmp") as tmp:
                took = await one_round(Path(tmp))
            results.append(took)
            print(f"round {i + 1}: threshold crossed → container stopped in {took * 1000:.0f} ms")
    print(f"median {statistics.median(results) * 1000:.0f} ms, max {max(results) * 1000:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    trio.run(main, parser.parse_args().rounds)
