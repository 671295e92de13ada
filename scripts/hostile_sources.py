#!/usr/bin/env python3
"""Hostile inputs for the static pod sources, for a chaos benchmark.

    .venv/bin/python scripts/hostile_sources.py files DIR      # put them into a manifest dir
    .venv/bin/python scripts/hostile_sources.py serve [--seconds S]  # hostile manifest URLs
    .venv/bin/python scripts/hostile_sources.py measure         # our sources against them

``files`` writes into DIR (a kubelet's --pod-manifest-path): ``fifo.yaml`` (a FIFO),
``fifo-link.yaml`` (a symlink to a FIFO kept in ``DIR.fifo``) and ``many-maps.yaml``
(a manifest just under 10 MiB made of tiny maps). ``serve`` serves, on ephemeral
loopback ports, a URL that trickles one byte a second and a URL whose body never
ends, and prints them (one ``name url`` line each) for ``--manifest-url``.
``measure`` runs the kubelet's own FileSource and URLSource, in this process, against
all of them beside three ordinary manifests, and prints what they cost: time to the
first SET, the longest the event loop went without running a task, RSS and open
descriptors before and after, and the lines logged.

For a chaos benchmark: ``create_files(directory)`` and ``serve_urls(task_status=...)``
(a trio task, started with ``{"trickle": url, "endless": url}``) are importable.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

from kubelet.api import Pod
from kubelet.sources import FileSource, PodOperation, URLSource
from kubelet.testing import ManifestServer, hostile_files, serve_manifests

NODE = "hostile-node"
ORDINARY = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n"
    "  - name: c\n    image: busybox:1.36\n    command: [sleep, '3600']\n"
)


def create_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The hostile files, in ``directory``; returns their paths."""
    return hostile_files(directory)


async def serve_urls(
    *, task_status: trio.TaskStatus[dict[str, str]] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve the trickling and the endless manifest URL until cancelled."""
    async with trio.open_nursery() as nursery:
        urls = {
            mode: await nursery.start(serve_manifests, ManifestServer(mode=mode))
            for mode in ("trickle", "endless")
        }
        task_status.started(urls)


class _Sink:
    def __init__(self) -> None:
        self.sets: list[tuple[float, int]] = []

    def register(self, source: str) -> None:
        pass

    async def update(
        self,
        source: str,
        op: PodOperation,
        pods: Sequence[Pod],
        *,
        origins: Mapping[str, str] | None = None,
    ) -> None:
        self.sets.append((time.perf_counter(), len(pods)))


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def measure(seconds: float) -> None:
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(f"{record.levelname} {record.name}: {record.getMessage()[:160]}")

    logging.getLogger("kubelet.sources").addHandler(Keep(logging.INFO))
    logging.getLogger("kubelet.sources").setLevel(logging.INFO)
    longest = 0.0

    async def loop_watch() -> None:
        nonlocal longest
        while True:
            before = time.perf_counter()
            await trio.sleep(0.005)
            longest = max(longest, time.perf_counter() - before - 0.005)

    with tempfile.TemporaryDirectory() as tmp:
        manifests = Path(tmp, "manifests")
        create_files(manifests)
        for i in range(3):
            Path(manifests, f"ordinary-{i}.yaml").write_text(ORDINARY.format(name=f"ok{i}"))
        rss, fds = _rss_mib(), _fds()
        sink = _Sink()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop_watch)
            urls = await nursery.start(serve_urls)
            started = time.perf_counter()
            await nursery.start(FileSource(manifests, NODE, check_frequency=1.0).run, sink)
            file_first = time.perf_counter() - started
            for url in urls.values():
                nursery.start_soon(URLSource(url, NODE, check_frequency=5.0).run, sink)
            await trio.sleep(seconds)
            nursery.cancel_scope.cancel()
        print(f"file source: first SET after {file_first:.3f} s with {sink.sets[0][1]} pods")
        print(f"file source: {len(sink.sets)} SETs in {seconds:g} s (relists every 1 s)")
        print(f"event loop: longest without running a task {longest * 1000:.1f} ms")
        print(f"RSS {rss:.0f} → {_rss_mib():.0f} MiB, open descriptors {fds} → {_fds()}")
        print(f"lines logged ({len(lines)}):")
        for line in lines:
            print("  " + line)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Hostile inputs for the static pod sources: a FIFO manifest, "
        "a symlink to a FIFO, a near-10 MiB manifest of tiny maps, a trickling and an "
        "endless manifest URL.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 2)[2] if __doc__ else None,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    files = commands.add_parser("files", help="write the hostile files into DIR")
    files.add_argument("dir", type=Path, help="a static pod path (created if missing)")
    serve = commands.add_parser("serve", help="serve the hostile URLs on loopback")
    serve.add_argument("--seconds", type=float, default=None, help="stop after S s (default: ^C)")
    meas = commands.add_parser("measure", help="run our sources against them, print the cost")
    meas.add_argument("--seconds", type=float, default=25.0, help="how long (default 25)")
    args = parser.parse_args()
    if args.command == "files":
        for path in create_files(args.dir):
            print(path)
    elif args.command == "serve":

        async def run() -> None:
            async with trio.open_nursery() as nursery:
                urls = await nursery.start(serve_urls)
                for name, url in urls.items():
                    print(name, url, flush=True)
                if args.seconds is not None:
                    await trio.sleep(args.seconds)
                    nursery.cancel_scope.cancel()

        with contextlib.suppress(KeyboardInterrupt):
            trio.run(run)
    else:
        trio.run(measure, args.seconds)


if __name__ == "__main__":
    main()
