#!/usr/bin/env python3
"""Memory pressure to eviction: how fast the notifier path reacts (the goal: within 1 s).

    sudo .venv/bin/python scripts/bench_eviction_notifier.py [--rounds 5] [--no-notifier]

Needs root and a cgroup v1 memory controller (this machine's layout). Each round creates
a memory cgroup of its own (``/sys/fs/cgroup/memory/evbench-<pid>``), starts a "pod"
process in it and runs the real ``EvictionManager`` with a ``memory.available``
threshold on that cgroup as if it were the node (capacity 1 GiB, threshold just below
what is free when the pod idles), its summary read from the cgroup files
(kubelet.stats.cgroupfs) and its kernel notifier armed on the cgroup. The pod then
allocates 200 MiB; the pod killer sends SIGKILL. Printed per round: the time from the
start of the allocation to the kill, and the median. With ``--no-notifier`` the manager
only has its 10 s pass (upstream's behaviour on cgroup v2), for comparison.

Nothing outside the benchmark's own cgroup and process is touched; both are removed.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubelet.api import Container, ObjectMeta, Pod, PodSpec
from kubelet.eviction import Eviction, EvictionConfig, EvictionManager, parse_thresholds
from kubelet.stats import Cgroups, Layout, MemoryUsage, NodeUsage, PodUsage, Summary

Mi = 1024 * 1024
CAPACITY = 1024 * Mi
HOG = """
import sys, time
sys.stdin.readline()
chunks = []
for _ in range(200):
    b = bytearray(1024 * 1024)
    for i in range(0, len(b), 4096):
        b[i] = 1
    chunks.append(b)
time.sleep(60)
"""


class Bench:
    def __init__(self, cgroup: str, child: subprocess.Popen[bytes]) -> None:
        self.cgroups = Cgroups(Path("/"), Layout.V1)
        self.cgroup = cgroup
        self.child = child
        self.pod = Pod(
            metadata=ObjectMeta(name="hog", namespace="bench", uid="uid-hog"),
            spec=PodSpec(containers=(Container(name="hog"),)),
        )
        self.killed_at: float | None = None

    async def summary(self) -> Summary:
        m = self.cgroups.memory(self.cgroup)
        if m is None:
            raise RuntimeError("the benchmark cgroup is gone")
        now = time.time()
        node = MemoryUsage(
            time=now, available=CAPACITY - m.working_set, working_set=m.working_set, usage=m.usage
        )
        pod = PodUsage(uid=self.pod.uid, name="hog", namespace="bench", memory=node)
        pods = (pod,) if self.killed_at is None else ()
        return Summary(node=NodeUsage(memory=node), pods=pods)

    async def evict(self, eviction: Eviction) -> None:
        if self.killed_at is None:
            self.killed_at = time.monotonic()
            os.kill(self.child.pid, signal.SIGKILL)

    async def delete_unused_containers(self) -> None:
        return None

    async def delete_unused_images(self) -> None:
        return None

    def node_event(self, event_type: str, reason: str, message: str) -> None:
        return None

    def pod_event(
        self, pod: Pod, event_type: str, reason: str, message: str, annotations: Mapping[str, str]
    ) -> None:
        print(f"    event {reason}: {message}")


async def one_round(use_notifier: bool) -> float:
    cgroup = f"evbench-{os.getpid()}"
    path = Path("/sys/fs/cgroup/memory") / cgroup
    path.mkdir()
    child = subprocess.Popen([sys.executable, "-c", HOG], stdin=subprocess.PIPE)
    try:
        (path / "cgroup.procs").write_text(str(child.pid))
        await trio.sleep(0.3)
        bench = Bench(cgroup, child)
        idle = bench.cgroups.memory(cgroup)
        assert idle is not None
        # evict once 50 MiB more than at idle is in use
        threshold = CAPACITY - idle.working_set - 50 * Mi
        config = EvictionConfig(
            parse_thresholds({"memory.available": str(threshold)}),
            memory_cgroup_root=path if use_notifier else None,
            local_storage_capacity_isolation=False,
        )

        async def layout() -> tuple[bool, bool]:
            return (False, False)

        manager = EvictionManager(
            config,
            summaries=bench,
            active_pods=lambda: [] if bench.killed_at is not None else [bench.pod],
            killer=bench,
            reclaimer=bench,
            events=bench,
            is_critical=lambda p: False,
            cleaned_up=lambda p: True,
            disk_layout=layout,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            await trio.sleep(0.5)  # the first pass has armed the notifier
            assert child.stdin is not None
            started = time.monotonic()
            child.stdin.write(b"go\n")
            child.stdin.flush()
            with trio.fail_after(30):
                while bench.killed_at is None:
                    await trio.sleep(0.005)
            nursery.cancel_scope.cancel()
        return bench.killed_at - started
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-notifier", action="store_true")
    args = parser.parse_args(argv)
    if not Path("/sys/fs/cgroup/memory/cgroup.event_control").exists():
        sys.exit("needs root and a cgroup v1 memory controller at /sys/fs/cgroup/memory")
    times = []
    for i in range(args.rounds):
        took = trio.run(one_round, not args.no_notifier)
        times.append(took)
        print(f"round {i + 1}: allocation start → pod killed in {took * 1000:.0f} ms")
    mode = "periodic pass only" if args.no_notifier else "kernel notifier"
    print(
        f"{mode}: median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
