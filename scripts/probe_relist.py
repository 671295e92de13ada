"""How long the runtime takes to answer a relist's two lists, alone and beside stats calls.

    flock /tmp/containerd-e2e.lock env PYTHONPATH=$PWD .venv/bin/python scripts/probe_relist.py \
        [--rounds 20] [--save DIR] [--endpoint unix:///run/containerd/containerd.sock]

A client of its own (no kubelet in this process, so no loop lag of ours): per round,
ListPodSandbox then ListContainers as the PLEG calls them, first alone, then with a
ListContainerStats (the eviction pass's call) sent just before, then with
ListPodSandboxStats likewise. Prints p50/max per call and mode, in ms, and what share of
the time is decoding the answer (timed apart from the same bytes).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import trio
import trio_asyncio

from kubelet.cri import api, connect


def pm(xs: list[float]) -> str:
    return f"p50 {1000 * statistics.median(xs):6.1f}  max {1000 * max(xs):6.1f} ms"


async def probe(endpoint: str, rounds: int, save: str) -> None:
    async with trio_asyncio.open_loop(), connect(endpoint) as (runtime, _):
        sandboxes = await runtime.list_pod_sandbox()
        containers = await runtime.list_containers()
        print(f"{len(sandboxes)} sandboxes, {len(containers)} containers")
        sb = api.ListPodSandboxResponse(items=sandboxes).SerializeToString()
        ct = api.ListContainersResponse(containers=containers).SerializeToString()
        t0 = time.process_time()
        for _ in range(20):
            api.ListPodSandboxResponse.FromString(sb)
            api.ListContainersResponse.FromString(ct)
        dec = (time.process_time() - t0) / 20
        print(
            f"answers {len(sb) / 1024:.0f} + {len(ct) / 1024:.0f} KiB, decode {dec * 1000:.2f} ms"
        )
        if save:
            Path(save, "ListPodSandbox.bin").write_bytes(sb)
            Path(save, "ListContainers.bin").write_bytes(ct)

        async def lists(out: dict[str, list[float]]) -> None:
            t = time.perf_counter()
            await runtime.list_pod_sandbox()
            u = time.perf_counter()
            await runtime.list_containers()
            v = time.perf_counter()
            out.setdefault("ListPodSandbox", []).append(u - t)
            out.setdefault("ListContainers", []).append(v - u)
            out.setdefault("both", []).append(v - t)

        for mode in ("alone", "ListContainerStats", "ListPodSandboxStats"):
            out: dict[str, list[float]] = {}
            for _ in range(rounds):
                if mode == "alone":
                    await lists(out)
                else:
                    call = (
                        runtime.list_container_stats
                        if mode == "ListContainerStats"
                        else runtime.list_pod_sandbox_stats
                    )

                    async def stats(call=call, out=out, key=f"({mode})") -> None:  # type: ignore[no-untyped-def]
                        t = time.perf_counter()
                        await call()
                        out.setdefault(key, []).append(time.perf_counter() - t)

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(stats)
                        await trio.sleep(0.002)  # the stats request is on its way first
                        await lists(out)
                await trio.sleep(0.3)
            print(f"-- {mode}")
            for name, xs in out.items():
                print(f"   {name:22s} {pm(xs)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--endpoint", default="unix:///run/containerd/containerd.sock")
    parser.add_argument("--save", default="", help="a folder for the two answers (microbenchmarks)")
    args = parser.parse_args()
    trio.run(probe, args.endpoint, args.rounds, args.save)


if __name__ == "__main__":
    main()
