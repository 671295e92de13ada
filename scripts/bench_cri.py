#!/usr/bin/env python3
"""Latency of CRI calls through the kubelet's trio client, and what the bridge costs.

    .venv/bin/python scripts/bench_cri.py [--quick] [--n-fake N] [--n-containerd N]

Measures median and p99 (ms) of Version, ContainerStatus and ListContainers against
(i) an in-process FakeRuntime (server and client share one trio-asyncio loop, as in the
integration tests), (ii) the real containerd (skipped, with a note, when unreachable),
and (iii) the trio-asyncio bridge: Version from plain asyncio grpclib vs from our trio
client, both against one FakeRuntime served by a separate process.

Then the client's own cost under load, what a pod ramp pays: ``--n-throughput`` Version
calls with 100 in flight (the channel's limit) against the FakeRuntime process, as the
client process's CPU seconds per call (``time.process_time``), from our trio client and
from plain asyncio grpclib. ``--throughput-only`` runs just that.

The plain-asyncio client runs in a child process of this script that never imports
trio_asyncio (importing it patches asyncio process-wide), on an explicit
``asyncio.SelectorEventLoop``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from kubelet.cri import RuntimeClient, api

CONTAINERD_ENDPOINT = "unix:///run/containerd/containerd.sock"
BUSYBOX = "docker.io/library/busybox:latest"
REQUEST_TIMEOUT = 120.0  # what our client sends as grpc-timeout; the asyncio twin does too
IN_FLIGHT = 100  # calls in flight in the throughput figure: the channel's limit

Row = tuple[str, str, list[int]]
T = TypeVar("T")


# -- statistics and printing ---------------------------------------------------------------


def p99(samples: list[int]) -> float:
    """Nearest-rank 99th percentile."""
    ordered = sorted(samples)
    return float(ordered[max(0, -(-len(ordered) * 99 // 100) - 1)])


def print_rows(rows: list[Row]) -> None:
    header = ("target", "rpc", "n", "median ms", "p99 ms", "mean ms")
    lines = [
        (
            target,
            rpc,
            str(len(s)),
            f"{statistics.median(s) / 1e6:.3f}",
            f"{p99(s) / 1e6:.3f}",
            f"{statistics.fmean(s) / 1e6:.3f}",
        )
        for target, rpc, s in rows
    ]
    widths = [max(len(x[i]) for x in [header, *lines]) for i in range(len(header))]
    for i, line in enumerate([header, *lines]):
        print(
            "  ".join(
                cell.ljust(w) if j < 2 else cell.rjust(w)
                for j, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if i == 0:
            print("  ".join("-" * w for w in widths))


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def print_machine() -> None:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores ({usable} usable), {cpu_model()}")
    print(f"load average: {load}; python {platform.python_version()}")
    from google.protobuf.internal import api_implementation

    names = ("trio", "trio-asyncio", "grpclib", "protobuf")
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in names)
    print(f"versions: {versions} (protobuf backend: {api_implementation.Type()})")


# -- plain asyncio child (no trio, no trio_asyncio) ------------------------------------------


def _load_pb2() -> ModuleType:
    """The generated messages, loaded without importing ``kubelet.cri`` (→ trio_asyncio)."""
    spec = importlib.util.find_spec("kubelet")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "cri" / "cri_api_pb2.py"
    mspec = importlib.util.spec_from_file_location("bench_cri_api_pb2", path)
    assert mspec is not None and mspec.loader is not None
    module = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(module)
    return module


def _plain_version_call(endpoint: str) -> tuple[Any, Callable[[], Awaitable[Any]]]:
    """A plain grpclib channel to ``endpoint`` and a Version call on it (asyncio side)."""
    from grpclib.client import Channel, UnaryUnaryMethod

    pb2 = _load_pb2()
    channel = Channel(path=endpoint.removeprefix("unix://"))
    version = UnaryUnaryMethod(
        channel,
        "/runtime.v1.RuntimeService/Version",
        pb2.VersionRequest,
        pb2.VersionResponse,
    )
    req = pb2.VersionRequest(version="0.1.0")
    return channel, lambda: version(req, timeout=REQUEST_TIMEOUT)


def _on_plain_asyncio(run: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``run()`` on a plain asyncio loop (the baseline the bridge is measured against)."""
    loop = asyncio.SelectorEventLoop()
    try:
        result = loop.run_until_complete(run())
    finally:
        loop.close()
    if "trio_asyncio" in sys.modules:
        raise SystemExit("asyncio child imported trio_asyncio: the baseline is not plain asyncio")
    return result


def asyncio_child(endpoint: str, n: int) -> None:
    """Time ``n`` Version calls with grpclib on a real asyncio loop; JSON samples to stdout."""

    async def run() -> list[int]:
        channel, version = _plain_version_call(endpoint)
        try:
            for _ in range(warmup(n)):
                await version()
            samples = []
            for _ in range(n):
                t0 = time.perf_counter_ns()
                await version()
                samples.append(time.perf_counter_ns() - t0)
            return samples
        finally:
            channel.close()

    json.dump({"samples": _on_plain_asyncio(run)}, sys.stdout)


async def _asyncio_in_flight(call: Callable[[], Awaitable[Any]], n: int) -> dict[str, float]:
    """``n`` calls, :data:`IN_FLIGHT` at a time, after a warm-up: CPU seconds and wall."""

    async def worker(k: int) -> None:
        for _ in range(k):
            await call()

    await asyncio.gather(*(worker(warmup(n) // 10 + 1) for _ in range(IN_FLIGHT)))
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(n // IN_FLIGHT) for _ in range(IN_FLIGHT)))
    calls = n // IN_FLIGHT * IN_FLIGHT
    seconds = time.perf_counter() - wall
    return {"cpu": (time.process_time() - cpu) / calls, "rate": calls / seconds}


def asyncio_throughput_child(endpoint: str, n: int) -> None:
    """The plain asyncio twin of :func:`bench_trio_throughput`; JSON to stdout."""

    async def run() -> dict[str, float]:
        channel, version = _plain_version_call(endpoint)
        try:
            return await _asyncio_in_flight(version, n)
        finally:
            channel.close()

    json.dump(_on_plain_asyncio(run), sys.stdout)


def warmup(n: int) -> int:
    return max(20, min(200, n // 10))


# -- trio side -------------------------------------------------------------------------------


async def timed(n: int, call: Callable[[], Awaitable[Any]]) -> list[int]:
    """Samples (ns) of ``n`` sequential calls, after a warm-up."""
    for _ in range(warmup(n)):
        await call()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        await call()
        samples.append(time.perf_counter_ns() - t0)
    return samples


async def three_rpcs(target: str, n: int, runtime: RuntimeClient, container_id: str) -> list[Row]:
    return [
        (target, "Version", await timed(n, runtime.version)),
        (target, "ContainerStatus", await timed(n, lambda: runtime.container_status(container_id))),
        (target, "ListContainers", await timed(n, runtime.list_containers)),
    ]


def pod_config(name: str, uid: str, log_dir: str) -> api.PodSandboxConfig:
    from kubelet.cri import api

    return api.PodSandboxConfig(
        metadata=api.PodSandboxMetadata(name=name, uid=uid, namespace="bench"),
        log_directory=log_dir,
        labels={
            "io.kubernetes.pod.name": name,
            "io.kubernetes.pod.namespace": "bench",
            "io.kubernetes.pod.uid": uid,
        },
        linux=api.LinuxPodSandboxConfig(
            security_context=api.LinuxSandboxSecurityContext(
                namespace_options=api.NamespaceOption(pid=api.CONTAINER)
            )
        ),
    )


def container_config(uid: str) -> api.ContainerConfig:
    from kubelet.cri import api

    return api.ContainerConfig(
        metadata=api.ContainerMetadata(name="bench"),
        image=api.ImageSpec(image=BUSYBOX),
        command=["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
        labels={"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": "bench"},
        log_path="bench/0.log",
        linux=api.LinuxContainerConfig(
            security_context=api.LinuxContainerSecurityContext(
                namespace_options=api.NamespaceOption(pid=api.CONTAINER)
            )
        ),
    )


@contextlib.asynccontextmanager
async def one_container(runtime: RuntimeClient, tmp: Path) -> AsyncIterator[str]:
    """A running busybox container in its own pod; torn down (by uid label) on exit."""
    import trio

    from kubelet.cri.__main__ import POD_UID_LABEL, cleanup

    uid = str(uuid.uuid4())
    log_dir = tmp / f"bench_{uid}"
    log_dir.mkdir()
    try:
        config = pod_config(f"bench-{uid[:8]}", uid, str(log_dir))
        sandbox = await runtime.run_pod_sandbox(config)
        cid = await runtime.create_container(sandbox, container_config(uid), config)
        await runtime.start_container(cid)
        yield cid
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(30):
            report = await cleanup(runtime, labels={POD_UID_LABEL: uid}, stop_timeout=2)
            for line in report.errors:
                print(f"cleanup: {line}", file=sys.stderr)


async def bench_in_process(n: int, tmp: Path) -> list[Row]:
    from kubelet.cri import connect
    from kubelet.testing import FakeRuntime

    fake = FakeRuntime()
    async with (
        fake.serve(tmp / "inproc.sock"),
        connect(fake.endpoint) as (runtime, _),
        one_container(runtime, tmp) as cid,
    ):
        return await three_rpcs("fake in-process", n, runtime, cid)


async def bench_containerd(endpoint: str, n: int, tmp: Path) -> list[Row]:
    import trio

    from kubelet.cri import CriError, connect

    async with connect(endpoint, request_timeout=30.0) as (runtime, _):
        try:
            with trio.fail_after(3):
                info = await runtime.version()
        except (CriError, trio.TooSlowError) as exc:
            print(f"containerd not reachable at {endpoint} ({exc}): skipped")
            return []
        print(f"containerd: {info.runtime_name} {info.runtime_version}")
        async with one_container(runtime, tmp) as cid:
            return await three_rpcs("containerd", n, runtime, cid)


async def bench_trio_version(endpoint: str, n: int) -> list[int]:
    from kubelet.cri import connect

    async with connect(endpoint) as (runtime, _):
        return await timed(n, runtime.version)


async def bench_trio_throughput(endpoint: str, n: int) -> dict[str, float]:
    """``n`` Version calls from our client, :data:`IN_FLIGHT` at a time: CPU and wall."""
    import trio

    from kubelet.cri import connect

    async with connect(endpoint) as (runtime, _):

        async def in_flight(k: int) -> None:
            async def worker() -> None:
                for _ in range(k):
                    await runtime.version()

            async with trio.open_nursery() as nursery:
                for _ in range(IN_FLIGHT):
                    nursery.start_soon(worker)

        await in_flight(warmup(n) // 10 + 1)
        cpu, wall = time.process_time(), time.perf_counter()
        await in_flight(n // IN_FLIGHT)
        calls = n // IN_FLIGHT * IN_FLIGHT
        return {
            "cpu": (time.process_time() - cpu) / calls,
            "rate": calls / (time.perf_counter() - wall),
        }


class _StubStream:
    """A grpclib stream that answers at once: no HTTP/2, no socket."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self._deadline: Any = None

    async def __aenter__(self) -> _StubStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def send_message(self, request: Any, *, end: bool) -> None:
        return None

    async def recv_message(self) -> Any:
        return self.reply


class _StubMethod:
    """What the client calls ``open`` on: a grpclib method, minus grpclib."""

    name = "/runtime.v1.RuntimeService/Version"

    def __init__(self, reply: Any) -> None:
        self.reply = reply

    def open(self, *, timeout: float | None, metadata: Any) -> _StubStream:
        return _StubStream(self.reply)


async def bench_own_share(n: int) -> float:
    """CPU per call of the client's own layers alone: ``n`` Version calls with
    :data:`IN_FLIGHT` in flight through ``CriChannel.call`` (deadline, call slot, the
    trio-asyncio hop, the runtime metrics) on a stub method, so grpclib, h2 and the socket
    cost nothing. The full call's CPU less this is the HTTP/2 client stack's."""
    import trio

    from kubelet.cri import CriChannel, api
    from kubelet.metrics import KubeletMetrics

    metrics = KubeletMetrics("bench", process=False)
    method = _StubMethod(api.VersionResponse(runtime_name="stub"))
    channel = CriChannel(
        "unix:///nonexistent/stub.sock", observer=metrics.observe_runtime_operation
    )

    async def worker(k: int) -> None:
        for _ in range(k):
            await channel.call("Version", method, api.VersionRequest(), REQUEST_TIMEOUT)

    async def in_flight(k: int) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(IN_FLIGHT):
                nursery.start_soon(worker, k)

    try:
        await in_flight(warmup(n) // 10 + 1)
        cpu = time.process_time()
        await in_flight(n // IN_FLIGHT)
        return (time.process_time() - cpu) / (n // IN_FLIGHT * IN_FLIGHT)
    finally:
        channel.close()


async def trio_main(
    args: argparse.Namespace, tmp: Path, fake_endpoint: str
) -> tuple[list[Row], dict[str, float]]:
    import trio_asyncio

    rows: list[Row] = []
    async with trio_asyncio.open_loop():
        if not args.throughput_only:
            rows += await bench_in_process(args.n_fake, tmp)
            rows += await bench_containerd(args.containerd_endpoint, args.n_containerd, tmp)
            rows.append(
                (
                    "fake process, trio",
                    "Version",
                    await bench_trio_version(fake_endpoint, args.n_fake),
                )
            )
        throughput = await bench_trio_throughput(fake_endpoint, args.n_throughput)
        throughput["own"] = await bench_own_share(args.n_throughput)
    return rows, throughput


# -- orchestration ---------------------------------------------------------------------------


def start_fake_process(endpoint: str) -> subprocess.Popen[bytes]:
    """``python -m kubelet.testing.fakeruntime`` on ``endpoint``; returns once it listens."""
    path = Path(endpoint.removeprefix("unix://"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubelet.testing.fakeruntime", "--listen", endpoint],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while not path.is_socket():
        if proc.poll() is not None:
            raise SystemExit(f"fakeruntime exited with {proc.returncode} before listening")
        if time.monotonic() > deadline:
            stop_process(proc)
            raise SystemExit("fakeruntime did not listen within 15s")
        time.sleep(0.02)
    return proc


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM our own child by its PID; SIGKILL it if it lingers."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def run_asyncio_throughput_child(endpoint: str, n: int) -> dict[str, float]:
    out = subprocess.run(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--asyncio-throughput-child",
            endpoint,
            f"--n-throughput={n}",
        ],
        check=True,
        stdout=subprocess.PIPE,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def run_asyncio_child(endpoint: str, n: int) -> list[int]:
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--asyncio-child", endpoint, f"--n-fake={n}"],
        check=True,
        stdout=subprocess.PIPE,
    )
    samples: list[int] = json.loads(out.stdout)["samples"]
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 fake / 100 containerd calls")
    parser.add_argument("--n-fake", type=int, help="calls per RPC against FakeRuntime (2000)")
    parser.add_argument("--n-containerd", type=int, help="calls per RPC against containerd (500)")
    parser.add_argument(
        "--containerd-endpoint",
        default=CONTAINERD_ENDPOINT,
        help=f"containerd's CRI endpoint (default {CONTAINERD_ENDPOINT})",
    )
    parser.add_argument(
        "--n-throughput", type=int, help="calls in the throughput figure (20000; quick 4000)"
    )
    parser.add_argument(
        "--throughput-only", action="store_true", help="only the CPU per call under load"
    )
    parser.add_argument("--asyncio-child", metavar="ENDPOINT", help=argparse.SUPPRESS)
    parser.add_argument("--asyncio-throughput-child", metavar="ENDPOINT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.asyncio_child:
        asyncio_child(args.asyncio_child, args.n_fake)
        return
    if args.asyncio_throughput_child:
        asyncio_throughput_child(args.asyncio_throughput_child, args.n_throughput)
        return
    args.n_fake = args.n_fake or (200 if args.quick else 2000)
    args.n_containerd = args.n_containerd or (100 if args.quick else 500)
    args.n_throughput = args.n_throughput or (4000 if args.quick else 20000)

    import trio

    print_machine()
    tmp = Path(tempfile.mkdtemp(prefix="kb-", dir="/tmp"))  # short: unix socket paths
    fake_endpoint = f"unix://{tmp}/fake.sock"
    try:
        proc = start_fake_process(fake_endpoint)
        try:
            baseline = [] if args.throughput_only else run_asyncio_child(fake_endpoint, args.n_fake)
            rows, ours = trio.run(trio_main, args, tmp, fake_endpoint)
            plain_load = run_asyncio_throughput_child(fake_endpoint, args.n_throughput)
        finally:
            stop_process(proc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not args.throughput_only:
        rows.insert(-1, ("fake process, asyncio", "Version", baseline))
        print()
        print_rows(rows)
        bridged = statistics.median(rows[-1][2])
        plain = statistics.median(baseline)
        print(
            f"\ntrio-asyncio bridge overhead (Version, median): {(bridged - plain) / 1e6:+.3f} "
            f"ms per call ({bridged / plain:.2f}x plain asyncio)"
        )
    print(
        f"\nclient CPU per call, {args.n_throughput} Version calls with {IN_FLIGHT} in flight "
        "(FakeRuntime process):"
    )
    for name, result in (("our trio client", ours), ("plain asyncio grpclib", plain_load)):
        print(
            f"  {name:22} {result['cpu'] * 1e6:6.1f} us CPU per call ({result['rate']:.0f} calls/s)"
        )
    print(
        f"  {'of which our layers':22} {ours['own'] * 1e6:6.1f} us CPU per call (deadline, call "
        "slot, trio-asyncio hop, metrics; on a stub method, without grpclib, h2 or a socket)"
    )


if __name__ == "__main__":
    main()
