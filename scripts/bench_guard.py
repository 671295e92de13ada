#!/usr/bin/env python3
"""The quick benchmark CI runs against recorded figures (``scripts/bench_baseline.json``).

    .venv/bin/python scripts/bench_guard.py            # measure, compare, exit 1 on a regression
    .venv/bin/python scripts/bench_guard.py --record   # measure and write the baseline

FakeRuntime ramps of 110 and 1,000 static pods (``bench_kubelet.bench_fake``): the CRI
calls per pod by RPC and the kubelet's peak RSS are held to the baseline within a noise
band; wall and CPU times are printed, never gated (a shared CI machine moves them by a
factor of 2). ``tests/integration/test_bench_guard.py`` runs it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_kubelet

BASELINE = Path(__file__).resolve().parent / "bench_baseline.json"
SIZES = (110, 1000)
FIXED_RPCS = frozenset({"RunPodSandbox", "CreateContainer", "StartContainer", "ImageStatus"})
"""Calls each pod start makes once: one more per pod is a regression at once."""
FIXED_SLACK = 0.1
"""Calls per pod a fixed RPC may exceed its baseline by."""
VARIABLE_FACTOR, VARIABLE_SLACK = 1.5, 0.3
"""Lists and status reads follow the ramp's length (relists, periodic syncs): the band."""
TOTAL_FACTOR = 1.25
NEW_RPC = 0.1
"""An RPC the baseline has not seen, at this many calls per pod or more."""
RSS_FACTOR, RSS_SLACK = 1.08, 3.0


def measure(sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    """One ramp per size on a fresh kubelet and fake: calls per pod, peak RSS, times."""
    tmp = "/dev/shm" if Path("/dev/shm").is_dir() else tempfile.gettempdir()
    results = trio.run(bench_kubelet.bench_fake, list(sizes), 0, tmp)
    return {
        str(r.n): {
            "calls_per_pod": {rpc: round(k / r.n, 3) for rpc, k in sorted(r.calls.items())},
            "peak_rss_mib": round(r.peak_rss, 1),
            "wall_s": round(r.wall, 2),
            "cpu_s": round(r.cpu, 2),
        }
        for r in results
    }


def regressions(measured: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """What moved beyond the noise band, one line each (empty: none)."""
    found = []
    for size, base in baseline["sizes"].items():
        now = measured.get(size)
        if now is None:
            continue
        calls, base_calls = now["calls_per_pod"], base["calls_per_pod"]
        for rpc, per_pod in sorted(calls.items()):
            if rpc not in base_calls:
                limit = NEW_RPC
            elif rpc in FIXED_RPCS:
                limit = base_calls[rpc] + FIXED_SLACK
            else:
                limit = base_calls[rpc] * VARIABLE_FACTOR + VARIABLE_SLACK
            if per_pod > limit:
                found.append(f"N={size}: {rpc} {per_pod:.2f} calls per pod (limit {limit:.2f})")
        total, base_total = sum(calls.values()), sum(base_calls.values())
        if total > base_total * TOTAL_FACTOR:
            found.append(
                f"N={size}: {total:.2f} CRI calls per pod (baseline {base_total:.2f}, "
                f"limit {base_total * TOTAL_FACTOR:.2f})"
            )
        rss_limit = base["peak_rss_mib"] * RSS_FACTOR + RSS_SLACK
        if now["peak_rss_mib"] > rss_limit:
            found.append(
                f"N={size}: peak RSS {now['peak_rss_mib']:.0f} MiB (baseline "
                f"{base['peak_rss_mib']:.0f}, limit {rss_limit:.0f})"
            )
    return found


def report(measured: dict[str, Any], baseline: dict[str, Any] | None) -> str:
    lines = []
    for size, now in measured.items():
        base = (baseline or {}).get("sizes", {}).get(size, {})
        total = sum(now["calls_per_pod"].values())
        base_total = sum(base.get("calls_per_pod", {}).values())
        lines.append(
            f"N={size}: all running {now['wall_s']:.2f} s, kubelet CPU {now['cpu_s']:.2f} s "
            f"(baseline {base.get('wall_s', '-')} s, {base.get('cpu_s', '-')} s; not gated); "
            f"CRI calls per pod {total:.2f} (baseline {base_total:.2f}); peak RSS "
            f"{now['peak_rss_mib']:.0f} MiB (baseline {base.get('peak_rss_mib', '-')})"
        )
    return "\n".join(lines)


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=BASELINE.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="write the baseline")
    args = parser.parse_args()
    measured = measure()
    if args.record:
        machine = f"{bench_kubelet.platform.machine()}, {bench_kubelet.os.cpu_count()} cores"
        record = {"commit": _commit(), "machine": machine, "sizes": measured}
        BASELINE.write_text(json.dumps(record, indent=2) + "\n")
        print(report(measured, None))
        return 0
    baseline = json.loads(BASELINE.read_text())
    print(report(measured, baseline))
    found = regressions(measured, baseline)
    for line in found:
        print("regression:", line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
