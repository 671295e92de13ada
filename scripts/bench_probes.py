#!/usr/bin/env python3
"""CPU cost and timing jitter of the prober: N pods × 3 probes at a 10 s period.

    .venv/bin/python scripts/bench_probes.py [--pods 110] [--seconds 60] [--noop]

The prober manager runs in this process against real targets in other processes: a
FakeRuntime process answers the exec probes (liveness, CRI ExecSync), a small HTTP
server process answers the httpGet probes (readiness) and the tcpSocket probes
(startup, then idle once started). After a warm-up period the script measures this
process's CPU time (getrusage) over ``--seconds`` and the lateness of every probe
against its schedule (interval − period), and prints the share of one core and the
jitter percentiles. Targets: < 2 % of one core; p99 lateness < 50 ms.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import trio
import trio_asyncio

from kubelet.api import (
    Container,
    ExecAction,
    HTTPGetAction,
    ObjectMeta,
    Pod,
    PodSpec,
    Probe,
    TCPSocketAction,
)
from kubelet.cri import (
    RuntimePodStatus,
    api,
    connect,
    container_info_from_cri,
    sandbox_info_from_cri,
)
from kubelet.handlers import ProbeOutcome, ProbeResult, ProbeTarget
from kubelet.prober import ActionProber, ProbeKind, ProberManager

PERIOD = 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Timing:
    """Wraps the real prober and records when each probe of each worker ran."""

    def __init__(self, inner: ActionProber) -> None:
        self.inner = inner
        self.times: dict[tuple[str, str, ProbeKind], list[float]] = defaultdict(list)

    async def __call__(self, kind: ProbeKind, probe: Probe, target: ProbeTarget) -> ProbeOutcome:
        self.times[(target.pod.uid, target.container.name, kind)].append(trio.current_time())
        return await self.inner(kind, probe, target)


class NoopProber:
    """Succeeds at once, no I/O: what the workers cost without the probes (``--noop``)."""

    async def __call__(self, kind: ProbeKind, probe: Probe, target: ProbeTarget) -> ProbeOutcome:
        return ProbeOutcome(ProbeResult.SUCCESS)


def make_pod(i: int, port: int) -> Pod:
    probe = {"period_seconds": PERIOD, "timeout_seconds": 1}
    container = Container(
        name="app",
        image="busybox:1.35",
        liveness_probe=Probe(exec=ExecAction(command=("true",)), **probe),  # type: ignore[arg-type]
        readiness_probe=Probe(
            http_get=HTTPGetAction(port=port, path="/", host="127.0.0.1"), **probe
        ),  # type: ignore[arg-type]
        startup_probe=Probe(tcp_socket=TCPSocketAction(port=port, host="127.0.0.1"), **probe),  # type: ignore[arg-type]
    )
    return Pod(
        metadata=ObjectMeta(name=f"p{i}", namespace="bench", uid=f"uid-{i}"),
        spec=PodSpec(containers=(container,)),
    )


def helper_processes(sock: Path, port: int, www: Path) -> list[subprocess.Popen[bytes]]:
    """A FakeRuntime serving ``sock`` and an HTTP server of ``www`` on ``port``."""
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kubelet.testing.fakeruntime",
                "--listen",
                f"unix://{sock}",
                "--image",
                "registry.k8s.io/pause:3.9",
                "--image",
                "busybox:1.35",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "http.server",
                str(port),
                "--bind",
                "127.0.0.1",
                "--directory",
                str(www),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]


async def run_pod(runtime: Any, pod: Pod) -> RuntimePodStatus:
    """A sandbox and one running container for ``pod`` on the runtime; its status."""
    config = api.PodSandboxConfig(
        metadata=api.PodSandboxMetadata(name=pod.metadata.name, uid=pod.uid, namespace="bench")
    )
    sid = await runtime.run_pod_sandbox(config)
    cid = await runtime.create_container(
        sid,
        api.ContainerConfig(
            metadata=api.ContainerMetadata(name="app"),
            image=api.ImageSpec(image="busybox:1.35"),
            labels={"io.kubernetes.container.name": "app"},
        ),
        config,
    )
    await runtime.start_container(cid)
    cstatus = (await runtime.container_status(cid)).status
    sstatus = (await runtime.pod_sandbox_status(sid)).status
    return RuntimePodStatus(
        uid=pod.uid,
        sandboxes=(sandbox_info_from_cri(sstatus),),
        containers=(container_info_from_cri(cstatus, sandbox_id=sid),),
    )


async def bench(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-probes-"))
    sock = tmp / "cri.sock"
    port = free_port()
    www = tmp / "www"
    www.mkdir()
    (www / "index.html").write_text("ok")
    procs = helper_processes(sock, port, www)
    try:
        with trio.fail_after(20):
            while not sock.exists():
                await trio.sleep(0.05)
        await trio.sleep(0.5)
        async with trio_asyncio.open_loop(), connect(f"unix://{sock}") as (runtime, _):
            pods = [make_pod(i, port) for i in range(args.pods)]
            statuses = {pod.uid: await run_pod(runtime, pod) for pod in pods}
            timing = Timing(NoopProber() if args.noop else ActionProber(runtime))
            manager = ProberManager(runtime, prober=timing, host_ip="127.0.0.1")
            async with trio.open_nursery() as nursery:
                await nursery.start(manager.run)
                for pod in pods:
                    manager.add_pod(pod)
                    manager.update_pod_status(pod.uid, statuses[pod.uid])
                # warm up: start-up jitter spreads the first probes over one period, and
                # startup probes must pass before liveness/readiness begin
                await trio.sleep(2 * PERIOD + 2)
                cpu0, wall0 = cpu_now(), time.monotonic()
                mark = trio.current_time()
                await trio.sleep(args.seconds)
                cpu = cpu_now() - cpu0
                wall = time.monotonic() - wall0
                workers = len(manager.workers)
                nursery.cancel_scope.cancel()
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
    lateness = []
    probes = 0
    for times in timing.times.values():
        measured = [t for t in times if t >= mark]
        probes += len(measured)
        ordered = [t for t in times if t >= mark - PERIOD]
        lateness += [(b - a - PERIOD) * 1000 for a, b in itertools.pairwise(ordered)]
    lateness.sort()
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    print(f"pods: {args.pods}; probe workers: {workers}; probes run in {wall:.0f} s: {probes}")
    print(f"prober CPU: {cpu:.2f} s over {wall:.1f} s = {100 * cpu / wall:.2f} % of one core")
    if lateness:
        p50 = statistics.median(lateness)
        p99 = lateness[min(len(lateness) - 1, int(len(lateness) * 0.99))]
        worst = lateness[-1]
        print(f"probe lateness vs period: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {worst:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--noop", action="store_true", help="probes succeed at once without I/O (the baseline)"
    )
    trio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
