"""One eviction monitoring pass: met, min reclaim, grace periods, conditions, fresh figures.

Restates upstream's TestThresholdsMet, TestThresholdsMetGracePeriod,
TestNodeConditionsObservedSince, TestThresholdsUpdatedStats and the pressure
transition of TestMemoryPressure / TestDiskPressureNodeFs as tables.
"""

from __future__ import annotations

import pytest

from kubelet.eviction import parse_thresholds
from kubelet.eviction.observations import Observation, observe_signals
from kubelet.eviction.state import EvictionState, by_eviction_priority, step, thresholds_met
from kubelet.eviction.thresholds import Signal

from .evictionkit import Mi, disk_summary, memory_summary

MEM = Signal.MEMORY_AVAILABLE


def hard_mem(value: str = "1Gi", reclaim: str | None = None) -> tuple:  # type: ignore[type-arg]
    return parse_thresholds(
        {"memory.available": value},
        minimum_reclaim={"memory.available": reclaim} if reclaim else {},
    )


MET_CASES = {
    # threshold, min reclaim, available, enforce min reclaim → met?
    "empty": ("1Gi", None, None, False, False),
    "threshold-met-memory": ("1Gi", None, "500Mi", False, True),
    "threshold-not-met": ("1Gi", None, "2Gi", False, False),
    "threshold-met-with-min-reclaim": ("1Gi", "500Mi", "1.05Gi", True, True),
    "threshold-not-met-with-min-reclaim": ("1Gi", "500Mi", "2Gi", True, False),
    "min-reclaim-ignored-when-not-enforced": ("1Gi", "500Mi", "1.05Gi", False, False),
    "equal is not below": ("1Gi", None, "1Gi", False, False),
}


@pytest.mark.parametrize("name", MET_CASES)
def test_thresholds_met(name: str) -> None:
    value, reclaim, available, enforce, expect = MET_CASES[name]
    thresholds = hard_mem(value, reclaim)
    obs = {}
    if available is not None:
        from kubelet.api import parse_quantity

        amount = parse_quantity(available).value()
        obs = {MEM: Observation(amount, 3 * 1024 * Mi)}
    assert bool(thresholds_met(thresholds, obs, enforce)) is expect


def test_percentage_threshold_uses_capacity() -> None:
    (t,) = parse_thresholds({"nodefs.available": "10%"})
    # 10% of 2Gi is 214748368 with upstream's float32; 204Mi is below it
    assert thresholds_met([t], {t.signal: Observation(204 * Mi, 2048 * Mi)}, False)
    assert not thresholds_met([t], {t.signal: Observation(205 * Mi, 2048 * Mi)}, False)


def test_no_observation_never_met() -> None:
    (t,) = parse_thresholds({"pid.available": "100"})
    assert thresholds_met([t], {}, False) == ()


def test_eviction_priority_puts_memory_first() -> None:
    ts = parse_thresholds(
        {"nodefs.available": "1Gi", "pid.available": "10", "memory.available": "1Gi"},
        enforce_node_allocatable=("pods",),
    )
    ordered = [t.signal for t in by_eviction_priority(ts)]
    assert ordered == [
        MEM,
        Signal.ALLOCATABLE_MEMORY_AVAILABLE,
        Signal.NODEFS_AVAILABLE,
        Signal.PID_AVAILABLE,
    ]


def run(passes: list[tuple[float, str]], thresholds: tuple, transition: float = 300.0) -> list:  # type: ignore[type-arg]
    """(time, memory available) passes → (conditions, signals acted on) per pass."""
    state = EvictionState()
    out = []
    for now, available in passes:
        result = step(
            state,
            thresholds,
            observe_signals(memory_summary(available, time=now).node),
            now,
            transition,
        )
        state = result.state
        out.append((result.conditions, tuple(str(t.signal) for t in result.act_on)))
    return out


def test_hard_threshold_acts_at_once_and_condition_holds_for_transition_period() -> None:
    thresholds = parse_thresholds({"memory.available": "2Gi"})
    got = run([(0, "3Gi"), (10, "1500Mi"), (20, "3Gi"), (309, "3Gi"), (310, "3Gi")], thresholds)
    assert got == [
        ((), ()),
        (("MemoryPressure",), ("memory.available",)),
        (("MemoryPressure",), ()),  # relieved, but within the 5 min transition period
        (("MemoryPressure",), ()),  # 299 s after the last sighting
        ((), ()),  # 300 s after it: the condition clears
    ]


def test_soft_threshold_waits_for_grace_period_but_sets_condition_at_once() -> None:
    thresholds = parse_thresholds({}, {"memory.available": "2Gi"}, {"memory.available": "1m30s"})
    got = run(
        [(0, "1500Mi"), (60, "1500Mi"), (90, "1500Mi"), (100, "3Gi"), (110, "1500Mi")], thresholds
    )
    assert got == [
        (("MemoryPressure",), ()),
        (("MemoryPressure",), ()),
        (("MemoryPressure",), ("memory.available",)),
        (("MemoryPressure",), ()),  # relieved: the grace clock is reset
        (("MemoryPressure",), ()),  # met again at 110: waits 90 s anew
    ]


def test_min_reclaim_keeps_a_met_threshold_until_reclaimed() -> None:
    thresholds = parse_thresholds(
        {"memory.available": "1Gi"}, minimum_reclaim={"memory.available": "500Mi"}
    )
    got = run([(0, "900Mi"), (10, "1200Mi"), (20, "1600Mi"), (30, "1200Mi")], thresholds)
    assert [acts for _, acts in got] == [
        ("memory.available",),
        ("memory.available",),  # above 1Gi but below 1Gi + 500Mi: still met
        (),  # 1600Mi >= 1524Mi: resolved
        (),  # above 1Gi and no longer carried: not met
    ]


def test_stale_figures_do_not_act_twice() -> None:
    thresholds = parse_thresholds({"memory.available": "2Gi"})
    state = EvictionState()
    obs = observe_signals(memory_summary("1Gi", time=100.0).node)
    first = step(state, thresholds, obs, 100.0, 300.0)
    assert first.act_on
    again = step(first.state, thresholds, obs, 110.0, 300.0)
    assert again.act_on == () and again.conditions == ("MemoryPressure",)
    newer = step(
        again.state,
        thresholds,
        observe_signals(memory_summary("1Gi", time=111.0).node),
        120.0,
        300.0,
    )
    assert newer.act_on


def test_disk_and_pid_conditions_in_fixed_order() -> None:
    thresholds = parse_thresholds(
        {"nodefs.available": "2Gi", "pid.available": "100", "memory.available": "1Gi"}
    )
    summary = disk_summary("1Gi", "10Gi")
    obs = dict(observe_signals(summary.node))
    obs[Signal.PID_AVAILABLE] = Observation(50, 1000)
    obs[MEM] = Observation(10, 100 * Mi)
    result = step(EvictionState(), thresholds, obs, 0.0, 300.0)
    assert result.conditions == ("MemoryPressure", "DiskPressure", "PIDPressure")
