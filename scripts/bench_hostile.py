#!/usr/bin/env python3
"""Hostile input against a running kubelet, /healthz watched throughout.

    .venv/bin/python scripts/bench_hostile.py [--nofile 4096] [--flood N] [--quick]
                                              [--rounds N] [--inputs a,b]

Starts FakeRuntime (a process) and a standalone kubelet process on ephemeral ports: the
main server over TLS with anonymous requests refused, the read-only and healthz ports,
five static pods from a manifest directory and one from a manifest URL (served here, on
loopback), and an open-files limit of ``--nofile`` (hard and soft, set in the child before
it executes, so the flood can go past it without 20,000 sockets here). Then, one function
per input, in turn:

- ``http2_large_bodies``: 100 KiB HTTP/2 POSTs to the main (TLS, 401) and read-only
  (prior knowledge, 405) servers, each followed by a GET on the same connection;
- ``idle_flood``: ``--flood`` idle connections to the read-only port (beyond the limit),
  held while a new static pod is written and started;
- ``slowloris``: connections sending their request headers one byte a second;
- ``tls_garbage``: connections sending random bytes to the TLS port;
- ``manifest_fifos``: a FIFO and a symlink to a FIFO in the manifest directory, then a
  new ordinary manifest, which must start;
- ``huge_manifest``: a manifest near the 10 MiB limit made of tiny maps, then a new
  ordinary manifest, which must start;
- ``url_trickle`` / ``url_endless``: the manifest URL sends one byte a second, or a body
  without end, for a while (the URL's pod must keep running), then recovers.

/healthz (127.0.0.1, a new connection each time, as a prober does) is polled every 50 ms.
Printed: the time /healthz was unavailable (a poll with no ``200 ok`` within 1 s, until the
next success; goal ≤ 1 s), whether the kubelet survived, pods disturbed (running
containers replaced or stopped), RSS and descriptors of the kubelet before and after
(goal: RSS back within 20 %), and one line per input.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import resource
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import attrs
import trio
import trio_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kubelet import BUSYBOX, fake_process, memory

from kubelet.cri import api, connect
from kubelet.testing.h2client import H2Client
from kubelet.testing.hostile import ManifestServer, make_fifo, many_maps_manifest, serve_manifests

KIB = 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def manifest(name: str) -> str:
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n"
        f"  - name: main\n    image: {BUSYBOX}\n    imagePullPolicy: IfNotPresent\n"
    )


# -- the target -------------------------------------------------------------------------------


@attrs.define
class Target:
    """The kubelet under test: its process, ports and directories."""

    root: Path
    endpoint: str
    nofile: int
    url: str
    main: int = attrs.field(factory=free_port)
    read_only: int = attrs.field(factory=free_port)
    healthz: int = attrs.field(factory=free_port)
    proc: trio.Process | None = None

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def log_file(self) -> Path:
        return self.root / "kubelet.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss(self) -> float:
        return memory(self.pid)[0]

    def log_lines(self, text: str) -> int:
        return self.log_file.read_text(errors="replace").count(text)

    async def start(self) -> None:
        self.manifests.mkdir(parents=True, exist_ok=True)
        for i in range(5):
            (self.manifests / f"steady-{i}.yaml").write_text(manifest(f"steady-{i}"))
        # FakeRuntime's pods have no processes or logs of a real runtime: this kubelet keeps
        # off the host's kubepods tree and /var/log/pods (its orphan sweeps would take them)
        config = self.root / "config.yaml"
        config.write_text(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            f"podLogsDir: {self.root / 'pod-logs'}\n"
            # the flags' defaults, which a config file's v1beta1 defaults would replace
            "authentication: {webhook: {enabled: false}}\nauthorization: {mode: AlwaysAllow}\n"
        )
        argv = [
            sys.executable, "-m", "kubelet", "--config", str(config),
            "--pod-manifest-path", str(self.manifests),
            "--hostname-override", "hostile",
            "--root-dir", str(self.root / "root"),
            "--cgroups-per-qos=false", "--enforce-node-allocatable=",
            "--fail-swap-on=false", "--container-runtime-endpoint", self.endpoint,
            "--address", "127.0.0.1",
            "--port", str(self.main),
            "--anonymous-auth=false",
            "--read-only-port", str(self.read_only),
            "--healthz-bind-address", "127.0.0.1",
            "--healthz-port", str(self.healthz),
            "--manifest-url", self.url,
            "--http-check-frequency", "2s",
        ]  # fmt: skip
        nofile = self.nofile

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with self.log_file.open("wb") as log:
            self.proc = await trio.lowlevel.open_process(
                argv, stdout=subprocess.DEVNULL, stderr=log, preexec_fn=limit,
                env={**os.environ, "KUBELET_CONTAINERS_LOG_DIR": str(self.root / "containers")},
            )  # fmt: skip
        with trio.fail_after(30):
            while " started: node hostile" not in self.log_file.read_text(errors="replace"):
                if not self.alive():
                    raise SystemExit(f"kubelet exited:\n{self.log_file.read_text()[-3000:]}")
                await trio.sleep(0.05)

    async def stop(self) -> None:
        if self.proc is None:
            return
        with trio.CancelScope(shield=True):
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGTERM)
                with trio.move_on_after(10):
                    await self.proc.wait()
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGKILL)
                await self.proc.wait()


# -- /healthz, watched --------------------------------------------------------------------------


@attrs.define
class Availability:
    polls: int = 0
    failures: int = 0
    down: float = 0.0
    longest: float = 0.0
    down_since: float | None = None

    def sample(self, at: float, ok: bool) -> None:
        self.polls += 1
        if not ok:
            self.failures += 1
            if self.down_since is None:
                self.down_since = at
        elif self.down_since is not None:
            gap = at - self.down_since
            self.down += gap
            self.longest = max(self.longest, gap)
            self.down_since = None


async def healthz_ok(port: int) -> bool:
    try:
        with trio.move_on_after(1):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                await stream.send_all(
                    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                )
                data = b""
                while chunk := await stream.receive_some(4096):
                    data += chunk
                return data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"\r\n\r\nok")
    except OSError:
        pass
    return False


async def watch_healthz(target: Target, availability: Availability) -> None:
    while True:
        t0 = time.monotonic()
        availability.sample(t0, await healthz_ok(target.healthz))
        await trio.sleep(max(0.0, 0.05 - (time.monotonic() - t0)))


# -- the hostile inputs -------------------------------------------------------------------------


def insecure_tls() -> ssl.SSLContext:
    return H2Client.tls_context()


async def http2_large_bodies(target: Target) -> str:
    """100 KiB POSTs over HTTP/2, then a GET on the same connection (20 rounds per server)."""
    results: dict[str, list[int]] = {"main": [], "read-only": []}
    for name, port, tls in (
        ("main", target.main, insecure_tls()),
        ("read-only", target.read_only, None),
    ):
        client = await H2Client.connect("127.0.0.1", port, tls=tls)
        try:
            for _ in range(20):
                post = await client.request("POST", "/pods", body=b"x" * (100 * KIB))
                get = await client.request("GET", "/healthz")
                results[name] += [post.status, get.status]
            if client.closed or client.terminated is not None:
                results[name].append(-1)
        finally:
            await client.aclose()
    summary = ", ".join(
        f"{name}: {sorted(set(codes))} on one connection" for name, codes in results.items()
    )
    return f"40 POSTs of 100 KiB + 40 GETs; statuses {summary}"


async def idle_flood(target: Target, count: int, hold: float = 5.0) -> str:
    """``count`` idle connections to the read-only port; a new pod is started meanwhile.

    Beyond the server's bound and the kernel's listen backlog, connects wait for SYN
    retransmits; the accepted ones are closed at the 32 s header deadline, which makes
    room for the rest.
    """
    streams: list[trio.SocketStream] = []
    refused = 0
    t0 = time.monotonic()
    limiter = trio.CapacityLimiter(256)

    async def open_one() -> None:
        nonlocal refused
        async with limiter:
            try:
                streams.append(await trio.open_tcp_stream("127.0.0.1", target.read_only))
            except OSError:
                refused += 1

    peak_fds = 0
    started: float | None = None

    async def new_pod_meanwhile() -> None:
        nonlocal started, peak_fds
        await trio.sleep(2)  # the flood is at the bound by now
        peak_fds = target.fds()
        name = f"late-{len(list(target.manifests.iterdir()))}"
        (target.manifests / f"{name}.yaml").write_text(manifest(name))
        started = await wait_running(target, f"{name}-hostile", timeout=30)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(new_pod_meanwhile)
            for _ in range(count):
                nursery.start_soon(open_one)
        opened = time.monotonic() - t0
        peak_fds = max(peak_fds, target.fds())
        await trio.sleep(max(0.0, hold - (time.monotonic() - t0)))
    finally:
        for stream in streams:
            await trio.aclose_forcefully(stream)
    pod = f"{started:.2f} s" if started is not None else "did not start"
    return (
        f"{len(streams)} connections open (the last after {opened:.1f} s: backlog full, SYNs "
        f"retried), {refused} refused; kubelet "
        f"descriptors at peak {peak_fds}/{target.nofile}; new pod running after {pod}"
    )


async def slowloris(target: Target, count: int = 200) -> str:
    """``count`` connections sending their headers one byte a second, until closed."""
    closed_after: list[float] = []
    request = b"GET /pods HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000

    async def one() -> None:
        t0 = time.monotonic()
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", target.read_only)
        except OSError:
            return
        async with stream:
            with trio.move_on_after(60):
                try:
                    for byte in request:
                        await stream.send_all(bytes([byte]))
                        with trio.move_on_after(1):
                            if not await stream.receive_some(1):
                                break
                except trio.BrokenResourceError:
                    pass
                closed_after.append(time.monotonic() - t0)

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
    if not closed_after:
        return "no connection was closed by the server"
    closed_after.sort()
    return (
        f"{len(closed_after)}/{count} closed by the server after "
        f"{closed_after[0]:.1f}-{closed_after[-1]:.1f} s"
    )


async def tls_garbage(target: Target, count: int = 500) -> str:
    """``count`` connections sending random bytes to the TLS port."""
    closed = 0
    rng = random.Random(12)

    async def one() -> None:
        nonlocal closed
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", target.main)
        except OSError:
            return
        async with stream:
            with trio.move_on_after(10), contextlib.suppress(trio.BrokenResourceError):
                await stream.send_all(rng.randbytes(rng.randint(1, 4096)))
                while await stream.receive_some(4096):
                    pass
                closed += 1

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
    return f"{closed}/{count} closed by the server within 10 s"


async def new_pod_starts(target: Target, name: str, timeout: float = 20.0) -> str:
    """Write an ordinary manifest and time it to running: the source was not held up."""
    (target.manifests / f"{name}.yaml").write_text(manifest(name))
    took = await wait_running(target, f"{name}-hostile", timeout)
    return f"then a new pod ran after {took:.2f} s" if took is not None else "NEW POD NEVER RAN"


async def manifest_fifos(target: Target) -> str:
    beside = target.root / "outside.fifo"
    if not beside.exists():
        make_fifo(beside)
    fifo = target.manifests / "fifo.yaml"
    link = target.manifests / "fifo-link.yaml"
    for path in (fifo, link):
        path.unlink(missing_ok=True)
    make_fifo(fifo)
    link.symlink_to(beside)
    result = await new_pod_starts(target, f"after-fifo-{time.monotonic_ns() % 10**6}")
    skipped = target.log_lines("fifo.yaml skipped") + target.log_lines("fifo-link.yaml skipped")
    return f"FIFO and symlink to a FIFO written; {result}; 'skipped' lines {skipped}"


async def huge_manifest(target: Target) -> str:
    big = target.manifests / "many-maps.yaml"
    big.write_bytes(many_maps_manifest())
    result = await new_pod_starts(target, f"after-huge-{time.monotonic_ns() % 10**6}")
    refused = target.log_lines("many-maps.yaml")
    big.unlink()
    return f"near-10 MiB manifest of tiny maps written; {result}; log lines naming it {refused}"


async def url_pod_containers(target: Target) -> set[str]:
    running = await running_containers(target.endpoint)
    return {cid for cid, pod in running.items() if pod == "url-pod-hostile"}


async def url_misbehaves(target: Target, server: ManifestServer, mode: str, hold: float) -> str:
    """The manifest URL misbehaves for ``hold`` seconds; its pod must keep running."""
    before = await url_pod_containers(target)
    requests = server.requests
    server.mode = mode
    await trio.sleep(hold)
    server.mode = "ok"
    await trio.sleep(3)
    after = await url_pod_containers(target)
    kept = "kept running" if before and before == after else "DISTURBED"
    return f"{mode} for {hold:.0f} s ({server.requests - requests} requests): the URL's pod {kept}"


async def warm_up(target: Target) -> None:
    """One ordinary request of each kind, so that the RSS baseline is a kubelet that has
    served TLS, HTTP/2 and HTTP/1.1 once (their code and OpenSSL's tables loaded)."""
    for port, tls in ((target.main, insecure_tls()), (target.read_only, None)):
        client = await H2Client.connect("127.0.0.1", port, tls=tls)
        await client.request("GET", "/healthz")
        await client.aclose()
    await healthz_ok(target.read_only)


# -- pods ---------------------------------------------------------------------------------------


async def running_containers(endpoint: str) -> dict[str, str]:
    """Running container id → its pod name, as the runtime reports."""
    async with connect(endpoint) as (runtime, _):
        containers = await runtime.list_containers(state=api.CONTAINER_RUNNING)
    return {c.id: c.labels.get("io.kubernetes.pod.name", "") for c in containers}


async def wait_running(target: Target, pod: str, timeout: float) -> float | None:
    t0 = time.monotonic()
    with trio.move_on_after(timeout):
        while pod not in (await running_containers(target.endpoint)).values():
            await trio.sleep(0.05)
        return time.monotonic() - t0
    return None


# -- orchestration ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def kubelet(nofile: int, url: str) -> AsyncIterator[Target]:
    with tempfile.TemporaryDirectory(prefix="hostile-", dir="/tmp") as tmp:
        root = Path(tmp)
        endpoint = f"unix://{root / 'cri.sock'}"
        async with fake_process(endpoint):
            target = Target(root, endpoint, nofile, url)
            try:
                await target.start()
                yield target
            finally:
                await target.stop()


async def run(args: argparse.Namespace) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # our side of the flood
    flood = args.flood or args.nofile + 1000
    if flood + 200 > hard:
        raise SystemExit(f"--flood {flood} needs more descriptors than this process has ({hard})")
    server = ManifestServer(body=manifest("url-pod").encode())
    async with trio_asyncio.open_loop(), trio.open_nursery() as serving:
        url = await serving.start(serve_manifests, server)
        async with kubelet(args.nofile, url) as target:
            await measure(args, target, server, flood)
        serving.cancel_scope.cancel()


async def measure(
    args: argparse.Namespace, target: Target, server: ManifestServer, flood: int
) -> None:
    with trio.fail_after(30):
        while len(await running_containers(target.endpoint)) < 6:
            await trio.sleep(0.1)
    before = await running_containers(target.endpoint)
    await warm_up(target)
    await trio.sleep(2)
    rss0, fds0 = target.rss(), target.fds()
    availability = Availability()
    inputs: list[tuple[str, Callable[[], Awaitable[str]]]] = [
        ("http2_large_bodies", lambda: http2_large_bodies(target)),
        ("idle_flood", lambda: idle_flood(target, flood)),
        ("slowloris", lambda: slowloris(target, 50 if args.quick else 200)),
        ("tls_garbage", lambda: tls_garbage(target)),
        ("manifest_fifos", lambda: manifest_fifos(target)),
        ("huge_manifest", lambda: huge_manifest(target)),
        ("url_trickle", lambda: url_misbehaves(target, server, "trickle", 15)),
        ("url_endless", lambda: url_misbehaves(target, server, "endless", 6)),
    ]
    if args.inputs:
        wanted = args.inputs.split(",")
        inputs = [(n, d) for n, d in inputs if n in wanted]
    inputs *= args.rounds
    lines: list[tuple[str, str]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_healthz, target, availability)
        for name, drive in inputs:
            t0 = time.monotonic()
            try:
                summary = await drive()
            except Exception as exc:  # an input's own failure is a result too
                summary = f"input failed: {exc!r}"
            if not target.alive():
                lines.append((name, f"{summary} [kubelet gone]"))
                break
            rss = target.rss()
            lines.append((name, f"{summary} [{time.monotonic() - t0:.1f} s, RSS {rss:.1f} MiB]"))
        await trio.sleep(5)  # settle: connections closed, memory returned
        nursery.cancel_scope.cancel()
    if availability.down_since is not None:
        availability.sample(time.monotonic(), True)
    survived = target.alive()
    after = await running_containers(target.endpoint)
    disturbed = sum(1 for cid in before if cid not in after)
    rss1, fds1 = (target.rss(), target.fds()) if survived else (0.0, 0)
    paused = target.log_lines("accept paused")
    limited = target.log_lines("connection limit reached")
    failed = target.log_lines("connection failed")
    print(f"kubelet open-files limit {args.nofile}, flood {flood} connections")
    width = max(len(n) for n, _ in lines)
    for name, summary in lines:
        print(f"  {name:<{width}}  {summary}")
    print(
        f"/healthz unavailable: {availability.down:.2f} s in all, "
        f"longest {availability.longest:.2f} s "
        f"({availability.failures} of {availability.polls} polls failed; goal ≤ 1 s)"
    )
    print(
        f"kubelet survived: {'yes' if survived else 'NO'}; "
        f"pods disturbed: {disturbed} of {len(before)}"
    )
    if survived:
        change = 100 * (rss1 - rss0) / rss0
        print(f"RSS {rss0:.1f} → {rss1:.1f} MiB ({change:+.0f} %; goal within 20 %)")
        print(f"descriptors {fds0} → {fds1}")
    print(
        f"log lines: 'connection limit reached' {limited}, 'accept paused' {paused}, "
        f"'connection failed' {failed}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nofile", type=int, default=4096, help="the kubelet's RLIMIT_NOFILE")
    parser.add_argument("--flood", type=int, help="idle connections (default nofile + 1000)")
    parser.add_argument("--quick", action="store_true", help="fewer slowloris connections")
    parser.add_argument("--rounds", type=int, default=1, help="run the inputs this many times")
    parser.add_argument("--inputs", help="comma-separated subset of the inputs, in their order")
    trio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
