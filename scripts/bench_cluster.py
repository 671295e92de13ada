#!/usr/bin/env python3
"""The kubelet as a cluster node: pods created in the API → Running, and API traffic.

    .venv/bin/python scripts/bench_cluster.py [--pods 1000] [--idle 60]

Three processes: FakeApiServer, FakeRuntime and the ``kubelet`` (``--kubeconfig``).
Once the node is Ready, N pods are created through the API at once; the API is polled
until every pod reports phase Running. Printed: time until all Running and pods/s,
status PATCHes per pod start (from the API server's request log), kubelet CPU seconds
and peak RSS; then, with the pods running and the ramp's events drained, the API
requests the kubelet makes in ``--idle`` seconds, by kind (target per idle minute: 6
lease renewals, at most 6 node status reports, nothing else).
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / MIB
    return 0.0


def pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "docker.io/library/busybox:1.35",
                    "command": ["sleep", "3600"],
                }
            ],
        },
    }


def fake_runtime(tmp: Path, sock: Path) -> subprocess.Popen[bytes]:
    """A FakeRuntime process serving ``sock``, with the pause and busybox images."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubelet.testing.fakeruntime",
            "--listen",
            f"unix://{sock}",
            "--image",
            "registry.k8s.io/pause:3.9",
            "--image",
            "docker.io/library/busybox:1.35",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "cri.log").open("wb"),
    )


def kubelet_process(
    tmp: Path, config: Path, kubeconfig: Path, node: str, sock: Path
) -> subprocess.Popen[bytes]:
    """The kubelet joined to the benchmark's API server, on the FakeRuntime at ``sock``."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubelet",
            "--config",
            str(config),
            "--kubeconfig",
            str(kubeconfig),
            "--hostname-override",
            node,
            "--node-ip",
            "127.0.0.1",
            "--enable-server=false",
            "--healthz-port=0",
            "--read-only-port=0",
            "--root-dir",
            str(tmp / "root"),
            "--fail-swap-on=false",
            "--fail-cgroupv1=false",  # a v1 (hybrid) host is allowed
            # FakeRuntime's pods have no processes: the host's kubepods tree stays with the
            # real runtime's kubelet (this one's orphan sweep would stop its pods)
            "--cgroups-per-qos=false",
            "--enforce-node-allocatable=",
            "--container-runtime-endpoint",
            f"unix://{sock}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "kubelet.log").open("wb"),
        # and its log links stay out of /var/log/containers (the real runtime's kubelet's GC)
        env={**os.environ, "KUBELET_CONTAINERS_LOG_DIR": str(tmp / "containers")},
    )


async def all_running(api: Any, count: int) -> None:
    """Poll the API until ``count`` pods report Running."""
    while True:
        items = api.list("pods", "default")
        running = sum(1 for p in items if (p.get("status") or {}).get("phase") == "Running")
        if running == count:
            return
        await trio.sleep(0.2)


async def events_drained(api: Any) -> float:
    """When the last event was posted: once none came for 5 s (at most 180 s)."""
    drained_at, checked = time.monotonic(), len(api.requests)
    with trio.move_on_after(180):
        while True:
            await trio.sleep(1)
            recent, checked = api.requests[checked:], len(api.requests)
            if any(r.resource == "events" for r in recent):
                drained_at = time.monotonic()
            elif time.monotonic() - drained_at >= 5:
                break
    return drained_at


def report(
    args: argparse.Namespace,
    took: float,
    patches: int,
    cpu: float,
    rss: float,
    drained: float,
    idle: list[Any],
    by_kind: collections.Counter[str],
) -> None:
    """The figures, one per line."""
    print(f"pods created in the API at once: {args.pods}")
    print(f"all Running (as the API reports): {took:.2f} s ({args.pods / took:.0f} pods/s)")
    print(f"status PATCHes per pod start: {patches / args.pods:.2f}")
    print(f"kubelet CPU during the ramp: {cpu:.2f} s; peak RSS {rss:.0f} MiB")
    print(f"last event posted {drained:.1f} s after the pods were created")
    per_minute = 60.0 / args.idle
    print(f"API requests per idle minute ({args.idle:.0f} s measured, open watches not counted):")
    for kind, count in sorted(by_kind.items()):
        print(f"  {kind:70s} {count * per_minute:6.1f}")
    print(f"  {'total':70s} {len(idle) * per_minute:6.1f}")


async def bench(args: argparse.Namespace) -> None:
    from kubelet.testing import FakeApiServer

    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    procs: list[subprocess.Popen[bytes]] = []
    node = "bench"
    api = FakeApiServer()
    try:
        async with api.serve():
            sock = tmp / "cri.sock"
            procs.append(fake_runtime(tmp, sock))
            with trio.fail_after(20):
                while not sock.exists():
                    await trio.sleep(0.05)
            kubeconfig = api.kubeconfig(tmp / "kubelet.conf", user=f"system:node:{node}")
            config = tmp / "kubelet.yaml"
            config.write_text(
                "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                f"podLogsDir: {tmp / 'logs'}\nmaxPods: {max(110, args.pods)}\n"
            )
            kubelet = kubelet_process(tmp, config, kubeconfig, node, sock)
            procs.append(kubelet)
            with trio.fail_after(30):
                while api.get("nodes", None, node) is None:
                    await trio.sleep(0.1)
            await trio.sleep(1)
            before = len(api.requests)
            cpu0 = cpu_seconds(kubelet.pid)
            start = time.monotonic()
            for i in range(args.pods):
                api.create(pod(f"p{i}", node))
            await all_running(api, args.pods)
            took = time.monotonic() - start
            cpu = cpu_seconds(kubelet.pid) - cpu0
            ramp = api.requests[before:]
            patches = sum(1 for r in ramp if r.method == "PATCH" and r.resource == "pods/status")
            # the ramp's events drain at eventRecordQPS; the idle window starts after them
            drained_at = await events_drained(api)
            drained = drained_at - start
            idle_start = len(api.requests)
            await trio.sleep(args.idle)
            idle = api.requests[idle_start:]
            by_kind = collections.Counter(
                f"{r.method} {r.path}"
                if r.resource in ("leases", "nodes")
                else f"{r.method} {r.resource}"
                for r in idle
            )
            rss = peak_rss(kubelet.pid)
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
    report(args, took, patches, cpu, rss, drained, idle, by_kind)
    print(f"(logs in {tmp})")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=60.0)
    trio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
