#!/usr/bin/env python3
"""Hostile input against a running kubelet, each input measured on its own.

    .venv/bin/python scripts/bench_hostile.py [--nofile 4096] [--flood N] [--quick]
                                              [--rounds N] [--inputs a,b]
                                              [--address-space MiB] [--scale F]
                                              [--json PATH] [--keep DIR]

Starts FakeRuntime (with its streaming server) and FakeApiServer in this process and a
kubelet process joined to them (``hostile_target``): the main server over TLS on a
serving pair and a client CA bundle this script controls, anonymous requests refused
(the script's client certificate is trusted), the read-only and healthz ports, five
static pods from a manifest directory and one from a manifest URL (served here, on
loopback), a credential provider plugin for ``registry.hostile`` images, an open-files
limit of ``--nofile`` and an address space of ``--address-space`` MiB (set in the child
before it executes: a runaway input fails in the kubelet, not on the host). Then, one
function per input, in turn.

At the servers and the static pod sources:

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

Past the servers (``hostile_inputs``; ``--quick`` scales the file counts and the plugin's
endless output down):

- ``env_bomb``: a ~2 KB pod whose 40 variables each reference the one before twice
  (CreateContainerConfigError);
- ``volume_walk``: 1.2 M files in one emptyDir, 40 clients polling /stats/summary;
- ``size_limit_evasion``: 200 MB behind 1 M empty files in a ``sizeLimit: 40Mi``
  emptyDir (evicted);
- ``log_fifo_swap``: a FIFO renamed over a container's log while ``follow=true`` reads it;
- ``api_malformed``: the pod watch answers an object whose metadata is a string, a list,
  a 100,000-deep body, a 10 MiB pod name, then a bad list (a new pod must run after);
- ``pod_resources_huge``: a gRPC message declared as 1 GiB to the pod-resources socket,
  streamed as long as the server reads (RESOURCE_EXHAUSTED);
- ``tls_reload``: a FIFO, then a symlink to /dev/zero at the certificate path, an 89 MB
  client-CA bundle (the old ones keep serving);
- ``credential_plugin``: the plugin answers 100,000-deep JSON, 90 MB, 1 GiB of zeros;
- ``log_limit_bytes``: a 100 MiB single log line asked with ``limitBytes=10`` (fast);
- ``config_bomb``: a YAML alias bomb in ``clusterDNS``, 100,000-deep YAML and JSON as
  ``--config`` of separate kubelet processes (exit 1 fast, peak RSS from ``wait4``);
- ``exec_resize``: 60,000 ``[`` as a resize message on a tty WebSocket exec (the stream
  goes on);
- ``spdy_inflation``: the runtime's SPDY SYN_REPLY inflates to 1 GiB while the kubelet
  translates a WebSocket v5 exec.

At the plugin sockets (``hostile_plugins``):

- ``device_registration_flood``: thousands of Register calls with resource names of
  maximal length naming an endpoint outside the directory, a symbolic link to a plugin
  outside, a socket that never answers, or nothing; then a good plugin registers;
- ``device_huge_list``: a plugin's ListAndWatch lists 100,000 devices;
- ``registry_flood``: the plugin registry holds thousands of files, a FIFO, looping
  symbolic links and 200 sockets that never answer GetInfo; a device plugin registers.

Per input: the longest /healthz gap (polled every 50 ms on a new connection, a poll with no
``200 ok`` within 1 s counts as down; goal ≤ 1 s), the longest event-loop stall (the
kubelet's ``kubelet_event_loop_lag_max_seconds`` when the input set a new maximum, else the
bucket of ``kubelet_event_loop_lag_seconds`` it fell in; goal < 100 ms), the peak RSS (VmRSS
every 50 ms and VmHWM after resetting it through ``/proc/<pid>/clear_refs``; bound: the
normal peak after warm-up + 256 MiB), whether the kubelet survived and how many of the five
static pods' containers were replaced or stopped. At the end: pods disturbed over the run,
RSS and descriptors before and after (goal: RSS back within 20 %). ``--json`` writes the
per-input figures (``tests/integration/test_hostile_bench.py`` runs a cheap subset).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import random
import resource
import ssl
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
import trio_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_inputs import INPUTS
from hostile_plugins import PLUGIN_INPUTS
from hostile_target import (
    RSS_HEADROOM,
    Target,
    cluster,
    distribution,
    manifest,
    measured,
    memory,
    scrape_lag,
    unmet,
    warm_up,
)

from kubelet.testing import H2Client, ManifestServer, make_fifo, many_maps_manifest, serve_manifests

QUICK_SCALE = 0.025
"""``--quick``: 30,000 files for the volume walk, 25,000 for the sizeLimit input."""
KIB = 1024


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
        started = await target.wait_running(f"{name}-hostile", timeout=30)

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
    took = await target.wait_running(f"{name}-hostile", timeout)
    return f"then a new pod ran after {took:.2f} s" if took is not None else unmet("no new pod ran")


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
    running = target.running()
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
    kept = "kept running" if before and before == after else unmet("disturbed")
    return f"{mode} for {hold:.0f} s ({server.requests - requests} requests): the URL's pod {kept}"


async def server_warm_up(target: Target) -> None:
    """HTTP/2 on both servers once, so that the normal peak has their code loaded."""
    for port, tls in ((target.main, insecure_tls()), (target.read_only, None)):
        client = await H2Client.connect("127.0.0.1", port, tls=tls)
        await client.request("GET", "/healthz")
        await client.aclose()


# -- orchestration ------------------------------------------------------------------------------

Drive = Callable[[], Awaitable[str]]


def server_inputs(
    args: argparse.Namespace, target: Target, server: ManifestServer, flood: int
) -> list[tuple[str, Drive]]:
    """The inputs aimed at the servers and the static pod sources."""
    return [
        ("http2_large_bodies", lambda: http2_large_bodies(target)),
        ("idle_flood", lambda: idle_flood(target, flood)),
        ("slowloris", lambda: slowloris(target, 50 if args.quick else 200)),
        ("tls_garbage", lambda: tls_garbage(target)),
        ("manifest_fifos", lambda: manifest_fifos(target)),
        ("huge_manifest", lambda: huge_manifest(target)),
        ("url_trickle", lambda: url_misbehaves(target, server, "trickle", 15)),
        ("url_endless", lambda: url_misbehaves(target, server, "endless", 6)),
    ]


def all_inputs(
    args: argparse.Namespace, target: Target, server: ManifestServer, flood: int
) -> list[tuple[str, Drive]]:
    scale = args.scale if args.scale is not None else QUICK_SCALE if args.quick else 1.0
    inputs = server_inputs(args, target, server, flood)
    for name, drive in {**INPUTS, **PLUGIN_INPUTS}.items():
        inputs.append((name, functools.partial(drive, target, scale)))
    if args.inputs:
        wanted = args.inputs.split(",")
        unknown = set(wanted) - {name for name, _ in inputs}
        if unknown:
            raise SystemExit(f"unknown inputs: {', '.join(sorted(unknown))}")
        inputs = [(n, d) for n, d in inputs if n in wanted]
    return inputs * int(args.rounds)


@contextlib.asynccontextmanager
async def kubelet(args: argparse.Namespace, url: str) -> AsyncIterator[Target]:
    with contextlib.ExitStack() as stack:
        if args.keep is not None:
            root = args.keep
            root.mkdir(parents=True)
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hostile-")))
        async with cluster(root) as (fake, api_server):
            target = Target(root, fake, api_server, args.nofile, url, args.address_space)
            if args.quick:
                target.endless_bytes = 1 << 28
            try:
                await target.start()
                yield target
            finally:
                await target.stop()


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # our side of the flood
    flood = args.flood or args.nofile + 1000
    if flood + 200 > hard:
        raise SystemExit(f"--flood {flood} needs more descriptors than this process has ({hard})")
    server = ManifestServer(body=manifest("url-pod").encode())
    async with trio_asyncio.open_loop(), trio.open_nursery() as serving:
        url = await serving.start(serve_manifests, server)
        async with kubelet(args, url) as target:
            results = await measure(args, target, server, flood)
        serving.cancel_scope.cancel()
    return results


async def measure(
    args: argparse.Namespace, target: Target, server: ManifestServer, flood: int
) -> list[dict[str, Any]]:
    with trio.fail_after(60):
        while len(target.running()) < 6:
            await trio.sleep(0.1)
    before = target.running()
    await server_warm_up(target)
    await warm_up(target)
    await trio.sleep(2)
    target.normal_peak = memory(target.pid)[1]
    rss0, fds0 = target.rss(), target.fds()
    lag0 = await scrape_lag(target)
    results: list[dict[str, Any]] = []
    restarts = 0
    print(f"kubelet normal peak RSS {target.normal_peak:.1f} MiB (bound: +{RSS_HEADROOM:.0f} MiB)")
    for name, drive in all_inputs(args, target, server, flood):
        summary, figures = await measured(target, drive, 120 if args.quick else 900)
        print(f"  {name}: {summary}\n    {figures.line()}", flush=True)
        results.append({"input": name, "summary": summary, **figures.as_dict()})
        if not figures.survived:
            restarts += 1
            print(f"    kubelet exited ({error_line(target)}); started again for the next input")
            await target.launch()
            await warm_up(target)
    await trio.sleep(5)  # settle: connections closed, memory returned
    survived = target.alive() and not restarts
    after = target.running()
    disturbed = sum(1 for cid in before if cid not in after)
    print(
        f"kubelet survived: {'yes' if survived else f'NO ({restarts} restarts)'}; "
        f"pods disturbed: {disturbed} of {len(before)}"
    )
    if survived:
        rss1, fds1 = target.rss(), target.fds()
        change = 100 * (rss1 - rss0) / rss0
        print(f"RSS {rss0:.1f} → {rss1:.1f} MiB ({change:+.0f} %; goal within 20 %)")
        print(f"descriptors {fds0} → {fds1}")
    lag1 = await scrape_lag(target) if target.alive() else None
    if lag0 is not None and lag1 is not None and not restarts:
        print(f"event-loop stalls of 5 ms or more over the run: {distribution(lag0, lag1)}")
    held = target.log_lines("Event loop held")
    print(
        f"log lines: 'connection limit reached' {target.log_lines('connection limit reached')}, "
        f"'accept paused' {target.log_lines('accept paused')}, "
        f"'connection failed' {target.log_lines('connection failed')}, 'Event loop held' {held}"
    )
    return results


def error_line(target: Target) -> str:
    """The last line of the kubelet's log that names an error (its traceback's last)."""
    lines = [line.strip(" |") for line in target.log_file.read_text(errors="replace").splitlines()]
    errors = [line for line in lines if "Error" in line or line.startswith("E1")]
    return errors[-1][:200] if errors else "no error logged"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nofile", type=int, default=4096, help="the kubelet's RLIMIT_NOFILE")
    parser.add_argument("--flood", type=int, help="idle connections (default nofile + 1000)")
    parser.add_argument(
        "--quick", action="store_true", help="fewer connections and files, smaller outputs"
    )
    parser.add_argument("--rounds", type=int, default=1, help="run the inputs this many times")
    parser.add_argument("--inputs", help="comma-separated subset of the inputs, in their order")
    parser.add_argument(
        "--address-space", type=int, default=4096, help="the kubelet's RLIMIT_AS in MiB"
    )
    parser.add_argument(
        "--scale", type=float, help="file counts of the volume inputs (1: 1.2 M and 1 M files)"
    )
    parser.add_argument("--json", type=Path, help="also write the per-input figures here")
    parser.add_argument(
        "--keep", type=Path, help="a new directory for the run's files, kept (the kubelet's log)"
    )
    args = parser.parse_args()
    results = trio.run(run, args)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
