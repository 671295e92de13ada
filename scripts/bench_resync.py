#!/usr/bin/env python3
"""CPU of one periodic resync of a running pod whose spec and status did not change.

    PYTHONPATH=<tree> .venv/bin/python scripts/bench_resync.py [--pods 200] [--rounds 10]
                                                 [--no-cgroups] [--workers] [--probes]
                                                 [--profile F]

The whole kubelet runs in this process (``tests/integration/kubelet_harness``: an
in-process FakeRuntime, a cgroup tree in a temporary directory unless ``--no-cgroups``).
Once every pod runs and the PLEG has settled, the script calls the pod syncer's
``sync_pod`` for each pod, ``--rounds`` times over, as the pod workers' minute resync
does, and prints the process CPU time per sync (best round and median). The rest of
the kubelet runs meanwhile (PLEG relists, housekeeping): its share is small against a
round of many syncs, and the best round of several leaves it out mostly.
"""

from __future__ import annotations

import argparse
import cProfile
import statistics
import tempfile
import time
from pathlib import Path

import trio
import trio_asyncio

from kubelet.cri import api
from kubelet.testing import FakeRuntime
from tests.integration.kubelet_harness import (
    EPOCH,
    KUBELET_IMAGES,
    running_kubelet,
)

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: p{i:04d}
spec:
  containers:
  - name: app
    image: busybox:1.35
    resources:
      requests: {{cpu: 10m, memory: 16Mi}}
{probes}"""
PROBES = """\
    readinessProbe: {exec: {command: [cat, /etc/hostname]}, periodSeconds: 10}
    livenessProbe: {exec: {command: [cat, /etc/hostname]}, periodSeconds: 10}
"""


async def bench(
    pods: int,
    rounds: int,
    cgroups: bool,
    through_workers: bool,
    probes: bool,
    profile: str | None,
) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="kbr-", dir="/tmp"))
    fake = FakeRuntime(epoch=EPOCH, images=list(KUBELET_IMAGES))
    extra = ("--max-pods", str(max(110, pods)))
    if not cgroups:
        extra += ("--cgroups-per-qos=false", "--enforce-node-allocatable=")
    async with (
        trio_asyncio.open_loop(),
        fake.serve(tmp / "cri.sock"),
        running_kubelet(fake, tmp, *extra) as h,
    ):
        for i in range(pods):
            h.write(f"p{i:04d}.yaml", MANIFEST.format(i=i, probes=PROBES if probes else ""))

        def running() -> bool:
            started = [c for c in h.containers() if c.state == api.CONTAINER_RUNNING]
            return len(started) >= pods

        await h.wait_for(running, timeout=300, step=0.2)
        await trio.sleep(3)  # the last syncs and relists settle
        assert h.components is not None
        syncer = h.components.syncer
        all_pods = [p for p in h.components.pods.pods() if not p.is_mirror]
        assert len(all_pods) == pods, len(all_pods)
        per_sync = []
        prof = cProfile.Profile() if profile else None
        workers = h.components.workers
        for _ in range(rounds):
            if prof is not None:
                prof.enable()
            t0 = time.process_time()
            if through_workers:
                before = {pod.uid: workers.workers[pod.uid].syncs for pod in all_pods}
                for pod in all_pods:
                    workers.requeue(pod.uid)
                while any(workers.workers[u].syncs == n for u, n in before.items()):
                    await trio.sleep(0.001)
            else:
                for pod in all_pods:
                    result = await syncer.sync_pod(pod)
                    assert result.error is None, result.error
            per_sync.append((time.process_time() - t0) / len(all_pods) * 1e6)
            if prof is not None:
                prof.disable()
        print(
            f"{pods} pods, {rounds} rounds, cgroups {'on' if cgroups else 'off'}"
            f"{', through the workers' if through_workers else ''}"
            f"{', with probes' if probes else ''}: "
            f"CPU per resync best {min(per_sync):.0f} µs, "
            f"median {statistics.median(per_sync):.0f} µs"
        )
        if prof is not None and profile:
            prof.dump_stats(profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-cgroups", action="store_true")
    parser.add_argument(
        "--workers", action="store_true", help="through the pod workers (requeue each pod)"
    )
    parser.add_argument(
        "--probes", action="store_true", help="each container has exec liveness and readiness"
    )
    parser.add_argument("--profile", help="write a cProfile of the syncs to this file")
    args = parser.parse_args()
    trio.run(
        bench, args.pods, args.rounds, not args.no_cgroups, args.workers, args.probes, args.profile
    )


if __name__ == "__main__":
    main()
