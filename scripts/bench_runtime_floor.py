#!/usr/bin/env python3
"""The runtime's floor for one pod start: what any kubelet waits for, measured without one.

    .venv/bin/python scripts/bench_runtime_floor.py [--trials N] [--endpoint unix://...]

A bare CRI client (the kubelet's own, ``kubelet.cri``) makes the four calls of a pod
start back to back -- RunPodSandbox, PodSandboxStatus, CreateContainer, StartContainer --
for a busybox pod like the benchmarks' (``bench_kubelet.py``), N times, 0.5 s apart, and
prints each call's median and minimum and the chain's. No kubelet runs: nothing between
the calls but the client. A kubelet's "manifest → RUNNING" cannot be shorter than this
chain on the same runtime; ``docs/benchmarks.md`` compares the two. Run it as root with
the runtime up (``scripts/containerd-up.sh``) and no kubelet on it (a kubelet's orphan
sweep would remove these sandboxes); every sandbox is stopped and removed at the end.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import trio
import trio_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubelet.cri import DEFAULT_RUNTIME_ENDPOINT, RuntimeClient, api, connect

BUSYBOX = "docker.io/library/busybox:1.35"
CALLS = ("RunPodSandbox", "PodSandboxStatus", "CreateContainer", "StartContainer")


def sandbox_config(name: str, logs: Path) -> api.PodSandboxConfig:
    """What a kubelet asks for a plain pod: its metadata, log directory, hostname, DNS."""
    uid = str(uuid.uuid4())
    config = api.PodSandboxConfig(
        metadata=api.PodSandboxMetadata(name=name, uid=uid, namespace="floor", attempt=0),
        log_directory=str(logs / uid),
        hostname=name,
    )
    (logs / uid).mkdir()
    config.dns_config.servers.append("10.96.0.10")
    config.dns_config.searches.append("floor.svc.cluster.local")
    config.dns_config.options.append("ndots:5")
    return config


async def one_start(runtime: RuntimeClient, name: str, logs: Path) -> tuple[str, list[float]]:
    """One pod's chain: the sandbox id and each call's seconds."""
    config = sandbox_config(name, logs)
    container = api.ContainerConfig(
        metadata=api.ContainerMetadata(name="main"),
        image=api.ImageSpec(image=BUSYBOX),
        command=["sh", "-c", "trap exit TERM; sleep 3600 & wait"],
        log_path="main/0.log",
    )
    marks = [time.perf_counter()]
    sandbox = await runtime.run_pod_sandbox(config)
    marks.append(time.perf_counter())
    await runtime.pod_sandbox_status(sandbox)
    marks.append(time.perf_counter())
    container_id = await runtime.create_container(sandbox, container, config)
    marks.append(time.perf_counter())
    await runtime.start_container(container_id)
    marks.append(time.perf_counter())
    return sandbox, [b - a for a, b in itertools.pairwise(marks)]


async def main(trials: int, endpoint: str) -> None:
    sandboxes: list[str] = []
    took: list[list[float]] = []
    with tempfile.TemporaryDirectory(prefix="runtime-floor-") as tmp:
        async with trio_asyncio.open_loop(), connect(endpoint) as (runtime, _images):
            try:
                for i in range(trials):
                    sandbox, times = await one_start(runtime, f"floor{i}", Path(tmp))
                    sandboxes.append(sandbox)
                    took.append(times)
                    await trio.sleep(0.5)
            finally:
                for sandbox in sandboxes:
                    await runtime.stop_pod_sandbox(sandbox)
                    await runtime.remove_pod_sandbox(sandbox)
    print(f"runtime floor, {trials} pod starts by a bare CRI client on {endpoint}")
    rows = [(call, [t[i] for t in took]) for i, call in enumerate(CALLS)]
    rows.append(("the chain", [sum(t) for t in took]))
    for call, seconds in rows:
        ms = sorted(1000 * s for s in seconds)
        print(f"  {call:18s} median {statistics.median(ms):7.1f} ms   min {ms[0]:7.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=9, help="pod starts (default 9)")
    parser.add_argument("--endpoint", default=DEFAULT_RUNTIME_ENDPOINT, help="CRI endpoint")
    args = parser.parse_args()
    trio.run(main, args.trials, args.endpoint)
