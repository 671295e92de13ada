#!/usr/bin/env python3
"""The cost of cgroup management per pod: ``ensure_pod`` (QoS update + pod cgroup with its
values) and ``remove_pod`` (process scan + bottom-up removal), through the manager.

    .venv/bin/python scripts/bench_cgroups.py [--pods N] [--real | --systemd]

Default: a temporary tree laid out like this host (v1 hybrid). ``--real`` (root): the
host's own cgroupfs, under a private root ``/trio-kubelet-bench-<pid>`` in every
hierarchy (never under ``/kubepods``, which belongs to a running kubelet), removed at
the end. ``--systemd``: the systemd driver on a temporary tree, each slice through a
private dbus-daemon to the fake systemd (kubelet.testing.fakesystemd, in this process:
its work counts in the CPU figures). Printed: milliseconds per pod for each operation
(median and max), with the manager's worker-thread hop included, as the agent calls it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import trio

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, Quantity, ResourceRequirements
from kubelet.cgroups import (
    CgroupFs,
    CgroupManager,
    CgroupSettings,
    SystemdAccess,
    SystemdBus,
    hugepage_sizes,
    read_layout,
)
from kubelet.testing import FakeSystemd, TreeCgroupFs, private_bus, v1_tree

CAPACITY = {"cpu": Fraction(2), "memory": Fraction(8 << 30), "pid": Fraction(32768)}
CLASSES = ("Guaranteed", "Burstable", "BestEffort")


def make_pod(index: int) -> tuple[Pod, str]:
    qos = CLASSES[index % 3]
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    if qos != "BestEffort":
        requests = {"cpu": Quantity("10m"), "memory": Quantity("16Mi")}
    if qos == "Guaranteed":
        limits = dict(requests)
    container = Container(
        name="c", resources=ResourceRequirements(requests=requests, limits=limits)
    )
    uid = f"bench{index:05d}-0000-4000-8000-000000000000"
    return Pod(
        metadata=ObjectMeta(name=uid, namespace="b", uid=uid), spec=PodSpec(containers=(container,))
    ), qos


Samples = dict[str, list[float]]


async def bench(manager: CgroupManager, count: int) -> Samples:
    """Wall time per operation, and CPU time of the whole process (kernel time of the
    cgroupfs syscalls included) to tell the cost from waiting on a busy machine."""
    await manager.start(CAPACITY)
    pods = [make_pod(i) for i in range(count)]
    active: list[tuple[Pod, str]] = []
    out: Samples = {"create": [], "create cpu": [], "remove": [], "remove cpu": []}
    for pod, qos in pods:
        active.append((pod, qos))
        start, cpu = time.perf_counter(), time.process_time()
        await manager.ensure_pod(pod, qos, active)
        out["create"].append((time.perf_counter() - start) * 1000)
        out["create cpu"].append((time.process_time() - cpu) * 1000)
    for pod, qos in pods:
        start, cpu = time.perf_counter(), time.process_time()
        await manager.remove_pod(manager.pod_cgroup(pod, qos))
        out["remove"].append((time.perf_counter() - start) * 1000)
        out["remove cpu"].append((time.process_time() - cpu) * 1000)
    return out


async def bench_systemd(count: int) -> Samples:
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        tree = Path(tmp) / "cgroup"
        fs = TreeCgroupFs(v1_tree(tree))
        async with private_bus(Path(tmp) / "dbus") as address, trio.open_nursery() as nursery:
            await nursery.start(FakeSystemd(address, tree).serve)
            access = SystemdAccess(bus=address, running=lambda: True)
            bus: SystemdBus = await nursery.start(SystemdBus(access).serve)
            settings = CgroupSettings(driver="systemd")
            manager = CgroupManager(fs, settings, hugepage_sizes=(2 << 20,), slices=bus)
            samples = await bench(manager, count)
            nursery.cancel_scope.cancel()
    return samples


def report(label: str, values: list[float]) -> None:
    median, worst = statistics.median(values), max(values)
    print(f"{label:>10}: median {median:.2f} ms, max {worst:.2f} ms over {len(values)} pods")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=60)
    parser.add_argument("--real", action="store_true")
    parser.add_argument("--systemd", action="store_true")
    args = parser.parse_args()
    if args.systemd:
        samples = await bench_systemd(args.pods)
    elif args.real:
        fs = CgroupFs(read_layout())
        root = f"/trio-kubelet-bench-{os.getpid()}"
        fs.create(root)
        try:
            manager = CgroupManager(
                fs, CgroupSettings(cgroup_root=root), hugepage_sizes=hugepage_sizes()
            )
            samples = await bench(manager, args.pods)
        finally:
            left = fs.remove(root)
            print("cleanup:", "left " + ", ".join(map(str, left)) if left else "removed", root)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            fs = TreeCgroupFs(v1_tree(Path(tmp)))
            manager = CgroupManager(fs, CgroupSettings(), hugepage_sizes=(2 << 20,))
            samples = await bench(manager, args.pods)
    where = "host cgroupfs" if args.real else "temporary tree (v1 hybrid layout)"
    print("systemd driver, fake systemd on a private bus" if args.systemd else where)
    for label, values in samples.items():
        report(label, values)


if __name__ == "__main__":
    trio.run(main)
