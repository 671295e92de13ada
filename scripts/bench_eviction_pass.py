#!/usr/bin/env python3
"""CPU of one eviction-manager pass over N pods, deterministic.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_eviction_pass.py [--pods 500] [--passes 20]

One pass of the eviction manager every 10 s (``EvictionManager.synchronize`` with the
default hard thresholds, none of them met, over N active pods of which every
``--limit-every``-th has an emptyDir ``sizeLimit``; ``--summary``: the full typed summary,
``UsageReader(provider).summary()``, what the pass once read in full) on the
``SummarySource`` the agent wires, from a synthetic node made in a temporary directory:
cgroup v1 files as this machine lays them out (the node, ``kubepods``, and per pod
``kubepods/besteffort/pod<uid>`` with its sandbox and container directories), /proc
files, one log file per container, an emptyDir with a file in every ``--volume-every``-th
pod, and an in-process runtime shaped like containerd 1.6: N ready sandboxes, N running
containers and their ListContainerStats (CPU, memory, writable layer), each list
decoded from its wire bytes at every call as the CRI client would. No runtime process,
no gRPC: what is measured is the kubelet's own work for the pass (the decoding of the
three lists included; printed apart).

Prints the median, min and max ``time.process_time`` of ``--passes`` passes (after
warm-up), and the longest step of the pass between two yields to the loop (the pass
must give the loop back every ~5 ms). Only the public entry points are used, so the same
script measures any tree: ``PYTHONPATH=<tree> python <this script>``. The cyclic garbage
collector is tuned as the kubelet tunes it (``kubelet.process``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, Volume
from kubelet.config import DEFAULT_EVICTION_HARD
from kubelet.cri import api, labels
from kubelet.eviction import EvictionConfig, EvictionManager, parse_thresholds
from kubelet.process import tune_garbage_collector
from kubelet.stats import HostStats, SummaryProvider, UsageReader

MEMORY_STAT = """cache {cache}
rss {rss}
rss_huge 0
shmem 0
mapped_file 0
dirty 0
writeback 0
workingset_refault_anon 0
workingset_refault_file 0
swap 0
swapcached 0
pgpgin 1000
pgpgout 900
pgfault 2000
pgmajfault 0
inactive_anon 0
active_anon {rss}
inactive_file {inactive}
active_file 4096
unevictable 0
hierarchical_memory_limit 9223372036854771712
hierarchical_memsw_limit 9223372036854771712
total_cache {cache}
total_rss {rss}
total_rss_huge 0
total_shmem 0
total_mapped_file 0
total_dirty 0
total_writeback 0
total_workingset_refault_anon 0
total_workingset_refault_file 0
total_swap 0
total_swapcached 0
total_pgpgin 1000
total_pgpgout 900
total_pgfault 2000
total_pgmajfault 0
total_inactive_anon 0
total_active_anon {rss}
total_inactive_file {inactive}
total_active_file 4096
total_unevictable 0
"""
UNLIMITED = "9223372036854771712\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def memory_files(directory: Path, usage: int, inactive: int, limit: str = UNLIMITED) -> None:
    write(directory / "memory.usage_in_bytes", f"{usage}\n")
    write(directory / "memory.limit_in_bytes", limit)
    write(
        directory / "memory.stat",
        MEMORY_STAT.format(cache=inactive + 4096, rss=usage - inactive, inactive=inactive),
    )


def uid(i: int) -> str:
    return f"0b6c1f0e-{i:04d}-4000-8000-{i:012d}"


def make_node(root: Path, pods: int, volume_every: int) -> tuple[HostStats, Path, Path]:
    host_root, kubelet_root, logs = root / "host", root / "kubelet", root / "logs"
    write(host_root / "proc/stat", "cpu  100 0 50 1000 10 0 0 0 0 0\nbtime 1799990000\n")
    write(host_root / "proc/meminfo", "MemTotal: 24000000 kB\nMemFree: 10000000 kB\n")
    write(host_root / "proc/loadavg", "0.10 0.20 0.30 2/1345 6789\n")
    write(host_root / "proc/sys/kernel/pid_max", "4194304\n")
    write(host_root / "proc/sys/kernel/threads-max", "191000\n")
    write(host_root / "proc/self/cgroup", "4:memory:/\n3:cpu,cpuacct:/\n")
    write(host_root / "proc/self/net/dev", "Inter-|\n face |\n  eth0: " + "1 " * 16 + "\n")
    cg = host_root / "sys/fs/cgroup"
    for top in ("cpuacct", "cpu", "memory", "pids"):
        (cg / top).mkdir(parents=True)
    write(cg / "cpuacct/cpuacct.usage", "5000000000\n")
    memory_files(cg / "memory", 8 << 30, 2 << 30)
    memory_files(cg / "memory/kubepods", 5 << 30, 1 << 30)
    write(cg / "cpuacct/kubepods/cpuacct.usage", "4000000000\n")
    for qos in ("burstable", "besteffort"):
        (cg / "memory/kubepods" / qos).mkdir(parents=True, exist_ok=True)
    for i in range(pods):
        pod = f"kubepods/besteffort/pod{uid(i)}"
        memory_files(cg / "memory" / pod, 10 << 20, 1 << 20)
        write(cg / "cpuacct" / pod / "cpuacct.usage", f"{1000000 + i}\n")
        write(cg / "pids" / pod / "pids.current", "3\n")
        for child in (f"s{i:06d}", f"c{i:06d}"):
            memory_files(cg / "memory" / pod / child, 5 << 20, 1 << 19)
        write(logs / f"default_bb-{i}_{uid(i)}/main/0.log", "x" * 100)
        if volume_every and i % volume_every == 0:
            write(kubelet_root / f"pods/{uid(i)}/volumes/kubernetes.io~empty-dir/scratch/f", "y")
    (kubelet_root / "images").mkdir(parents=True, exist_ok=True)
    return HostStats(host_root), kubelet_root, logs


class Runtime:
    """The three lists of containerd 1.6 for ``pods`` one-container pods, kept as the
    bytes of their responses and decoded at every call."""

    def __init__(self, pods: int, image_mount: str) -> None:
        base = int(time.time() * 1e9) - 3600 * 10**9
        sandboxes, containers = [], []
        for i in range(pods):
            pod_labels = {
                labels.POD_UID: uid(i),
                labels.POD_NAME: f"bb-{i}",
                labels.POD_NAMESPACE: "default",
                "io.kubernetes.container.name": "POD",
            }
            sandboxes.append(
                api.PodSandbox(
                    id=f"s{i:06d}" * 8,
                    metadata=api.PodSandboxMetadata(
                        name=f"bb-{i}", namespace="default", uid=uid(i)
                    ),
                    state=api.SANDBOX_READY,
                    created_at=base + i,
                    labels=pod_labels,
                    annotations={"kubernetes.io/config.source": "file"},
                    runtime_handler="",
                )
            )
            containers.append(
                api.Container(
                    id=f"c{i:06d}" * 8,
                    pod_sandbox_id=f"s{i:06d}" * 8,
                    metadata=api.ContainerMetadata(name="main"),
                    image=api.ImageSpec(image="docker.io/library/busybox:1.35"),
                    image_ref="sha256:" + "ab" * 32,
                    state=api.CONTAINER_RUNNING,
                    created_at=base + i + 10**9,
                    labels={**pod_labels, labels.CONTAINER_NAME: "main"},
                    annotations={
                        labels.CONTAINER_HASH: "a1b2c3d4",
                        labels.CONTAINER_RESTART_COUNT: "0",
                        labels.CONTAINER_TERMINATION_MESSAGE_PATH: "/dev/termination-log",
                        labels.CONTAINER_TERMINATION_MESSAGE_POLICY: "File",
                    },
                )
            )
        self.sandboxes = api.ListPodSandboxResponse(items=sandboxes).SerializeToString()
        self.containers = api.ListContainersResponse(containers=containers).SerializeToString()
        self.image_mount = image_mount
        self._containers = containers
        self.decode_s = 0.0
        self._blob = self._stats()

    async def list_pod_sandbox(self, **_: Any) -> list[api.PodSandbox]:
        t = time.process_time()
        items = list(api.ListPodSandboxResponse.FromString(self.sandboxes).items)
        self.decode_s += time.process_time() - t
        return items

    async def list_containers(self, **_: Any) -> list[api.Container]:
        t = time.process_time()
        items = list(api.ListContainersResponse.FromString(self.containers).containers)
        self.decode_s += time.process_time() - t
        return items

    def _stats(self) -> bytes:
        """containerd's figures now (timestamps move, so the CPU rates have two samples)."""
        now = time.time_ns()
        stats = []
        for i, c in enumerate(self._containers):
            stats.append(
                api.ContainerStats(
                    attributes=api.ContainerAttributes(
                        id=c.id, metadata=c.metadata, labels=c.labels, annotations=c.annotations
                    ),
                    cpu=api.CpuUsage(
                        timestamp=now,
                        usage_core_nano_seconds=api.UInt64Value(value=now // 1000 + i),
                        usage_nano_cores=api.UInt64Value(value=1000 + i),
                    ),
                    memory=api.MemoryUsage(
                        timestamp=now,
                        working_set_bytes=api.UInt64Value(value=(4 << 20) + i),
                        available_bytes=api.UInt64Value(value=0),
                        usage_bytes=api.UInt64Value(value=(5 << 20) + i),
                        rss_bytes=api.UInt64Value(value=3 << 20),
                        page_faults=api.UInt64Value(value=2000),
                        major_page_faults=api.UInt64Value(value=0),
                    ),
                    writable_layer=api.FilesystemUsage(
                        timestamp=now,
                        fs_id=api.FilesystemIdentifier(mountpoint=self.image_mount),
                        used_bytes=api.UInt64Value(value=8192 + i),
                        inodes_used=api.UInt64Value(value=3),
                    ),
                )
            )
        return api.ListContainerStatsResponse(stats=stats).SerializeToString()

    def advance(self) -> None:
        """The runtime's next figures (its work: done before a pass, outside what is timed)."""
        self._blob = self._stats()

    async def list_container_stats(self, **_: Any) -> list[api.ContainerStats]:
        t = time.process_time()
        items = list(api.ListContainerStatsResponse.FromString(self._blob).stats)
        self.decode_s += time.process_time() - t
        return items

    async def image_fs_info(self) -> api.ImageFsInfoResponse:
        usage = api.FilesystemUsage(
            timestamp=time.time_ns(),
            fs_id=api.FilesystemIdentifier(mountpoint=self.image_mount),
            used_bytes=api.UInt64Value(value=1 << 30),
            inodes_used=api.UInt64Value(value=1000),
        )
        return api.ImageFsInfoResponse(image_filesystems=[usage], container_filesystems=[usage])


class LongestStep(trio.abc.Instrument):
    """The longest run of the pass's task between two yields to the loop, in CPU time
    (the wall time of a step grows with whatever else the machine runs)."""

    def __init__(self) -> None:
        self.task: trio.lowlevel.Task | None = None
        self.longest = 0.0
        self._started = 0.0

    def watch(self, task: trio.lowlevel.Task | None) -> None:
        """Count the steps of ``task`` from its next one on (None: of no task)."""
        self.task, self._started = task, 0.0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self._started = time.thread_time()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task and self._started:
            self.longest = max(self.longest, time.thread_time() - self._started)
            self._started = 0.0


def active_pods(pods: int, limit_every: int) -> list[Pod]:
    """The pods the runtime runs, as the pod manager knows them (every ``limit_every``-th
    with an emptyDir sizeLimit: its figures decide a local storage eviction)."""
    out = []
    for i in range(pods):
        limited = bool(limit_every) and i % limit_every == 0
        volumes = (Volume(name="scratch", empty_dir={"sizeLimit": "1Gi"}),) if limited else ()
        out.append(
            Pod(
                metadata=ObjectMeta(name=f"bb-{i}", namespace="default", uid=uid(i)),
                spec=PodSpec(containers=(Container(name="main"),), volumes=volumes, priority=0),
            )
        )
    return out


class Unused:
    """The manager's killer, reclaimer and event sink: a pass without pressure uses none."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the pass used {name}: a threshold or a limit was met")


def eviction_pass(usage: UsageReader, pods: list[Pod]) -> Any:
    """The manager's ``synchronize``, wired as the agent wires it (no threshold is met)."""
    unused: Any = Unused()
    manager = EvictionManager(
        EvictionConfig(parse_thresholds(DEFAULT_EVICTION_HARD)),
        summaries=usage,
        active_pods=lambda: pods,
        killer=unused,
        reclaimer=unused,
        events=unused,
        is_critical=lambda pod: False,
        cleaned_up=lambda pod: True,
        disk_layout=usage.disk_layout,
    )
    return manager.synchronize


async def measure(args: argparse.Namespace, root: Path, steps: LongestStep) -> None:
    host, kubelet_root, logs = make_node(root, args.pods, args.volume_every)
    runtime = Runtime(args.pods, str(kubelet_root / "images"))
    provider = SummaryProvider(
        runtime,  # type: ignore[arg-type]
        runtime,  # type: ignore[arg-type]
        node_name="bench",
        root_dir=str(kubelet_root),
        pod_logs_dir=str(logs),
        host=host,
        psi=False,
    )
    usage = UsageReader(provider)
    summary = await usage.summary()
    assert len(summary.pods) == args.pods, len(summary.pods)
    one_pass = (
        usage.summary
        if args.summary
        else eviction_pass(usage, active_pods(args.pods, args.limit_every))
    )
    for _ in range(args.warmup):
        runtime.advance()
        await one_pass()
    runtime.decode_s = 0.0
    times = []
    for _ in range(args.passes):
        runtime.advance()
        await trio.sleep(0.01)  # the pass starts a step of its own, as after the manager's wait
        steps.watch(trio.lowlevel.current_task())
        t = time.process_time()
        await one_pass()
        times.append(time.process_time() - t)
        steps.watch(None)
    ms = [x * 1000 for x in times]
    tree = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["kubelet"].__file__ or "")))
    what = "full summary" if args.summary else f"eviction pass, 1 pod in {args.limit_every} limited"
    print(f"tree {tree}: {args.pods} pods, {args.passes} passes, {what}")
    print(
        f"  CPU per pass: median {statistics.median(ms):.1f} ms "
        f"(min {min(ms):.1f}, max {max(ms):.1f}); of which decoding the CRI lists "
        f"{runtime.decode_s * 1000 / args.passes:.1f} ms"
    )
    print(f"  longest step between yields: {steps.longest * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--volume-every", type=int, default=10, help="0: no volumes")
    parser.add_argument(
        "--limit-every", type=int, default=10, help="pods with an emptyDir sizeLimit (0: none)"
    )
    parser.add_argument("--summary", action="store_true", help="the full summary, not the pass")
    args = parser.parse_args()
    steps = LongestStep()
    tune_garbage_collector()  # the kubelet's settings (a full collection takes 50 ms here)
    with tempfile.TemporaryDirectory(prefix="evbench-") as tmp:
        trio.run(measure, args, Path(tmp), steps, instruments=[steps])


if __name__ == "__main__":
    main()
