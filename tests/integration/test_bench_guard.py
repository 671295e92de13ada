"""The quick benchmark against the recorded figures: CRI calls per pod and RSS are gated,
times are printed (``scripts/bench_guard.py``, ``scripts/bench_baseline.json``)."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
import trio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def guard() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(
        "bench_guard", ROOT / "scripts" / "bench_guard.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_band_lets_noise_through_and_stops_a_regression(guard: ModuleType) -> None:
    baseline = json.loads(guard.BASELINE.read_text())
    size, base = next(iter(baseline["sizes"].items()))
    same = {size: copy.deepcopy(base)}
    assert guard.regressions(same, baseline) == []
    noisy = copy.deepcopy(same)
    noisy[size]["calls_per_pod"]["ListContainers"] *= 1.3  # relists follow the ramp's length
    noisy[size]["peak_rss_mib"] *= 1.08
    noisy[size]["wall_s"] *= 3  # times are not gated
    assert guard.regressions(noisy, baseline) == []
    worse = copy.deepcopy(same)
    worse[size]["calls_per_pod"]["ImageStatus"] += 1  # a second ImageStatus per start
    worse[size]["calls_per_pod"]["ListImages"] = 1.0  # a new call per pod
    worse[size]["peak_rss_mib"] *= 1.4
    found = guard.regressions(worse, baseline)
    assert len(found) == 4, found
    for what in ("ImageStatus", "ListImages", "CRI calls per pod", "peak RSS"):
        assert any(what in line for line in found), (what, found)


async def test_the_quick_benchmark_holds_the_recorded_figures(guard: ModuleType) -> None:
    measured = await trio.to_thread.run_sync(guard.measure)
    baseline = json.loads(guard.BASELINE.read_text())
    print(guard.report(measured, baseline))
    assert guard.regressions(measured, baseline) == []
