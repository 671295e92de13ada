"""The hostile benchmark's cheap inputs, as a test: each one leaves the kubelet alive,
answering /healthz, with its event loop never held for long and its memory bounded.

``scripts/bench_hostile.py --quick`` runs a kubelet process against FakeRuntime and
FakeApiServer (in the script's process) and measures each input on its own (see its
docstring); this test runs the inputs that take seconds, not minutes, and reads the
figures it writes with ``--json``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHEAP = (
    "manifest_fifos",
    "env_bomb",
    "log_fifo_swap",
    "api_malformed",
    "pod_resources_huge",
    "log_limit_bytes",
    "config_bomb",
    "exec_resize",
    "spdy_inflation",
)
"""In the bench's order (a kubelet that dies is started again for the next input)."""
HEALTHZ_GAP = 1.0
"""Seconds /healthz may be unavailable during one input."""
STALL = 0.1
"""Seconds one task step may hold the kubelet's event loop."""


def run_bench(tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / "figures.json"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "bench_hostile.py"), "--quick",
         "--inputs", ",".join(CHEAP), "--json", str(out)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # the bench stops its kubelet on the way out
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output[-5000:]
    figures: list[dict[str, Any]] = json.loads(out.read_text())
    return figures


def test_cheap_hostile_inputs_leave_the_kubelet_healthy(tmp_path: Path) -> None:
    figures = run_bench(tmp_path)
    assert [f["input"] for f in figures] == list(CHEAP)
    failures = []
    for f in figures:
        checks = {
            "kubelet gone": not f["survived"],
            f"/healthz gap {f['healthz_gap']:.2f} s": f["healthz_gap"] > HEALTHZ_GAP,
            f"stall {f['stall']:.3f} s": f["stall"] >= STALL,
            f"peak RSS {f['peak_rss']:.0f} MiB": not f["rss_ok"],
            f"{f['disturbed']} pods disturbed": f["disturbed"] > 0,
            f["summary"]: "[UNMET]" in f["summary"],
        }
        failures += [f"{f['input']}: {what}" for what, failed in checks.items() if failed]
    assert not failures, "\n".join(failures)
