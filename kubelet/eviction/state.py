"""One monitoring pass over the thresholds: what is met, what has waited long enough.

``step(state, thresholds, observations, now, transition_period)`` is upstream's
``synchronize`` up to the choice of a resource, with the manager's memory kept in an
immutable ``EvictionState``:

- a threshold is met when its amount (a quantity, or a percentage of the capacity) is
  above what is available; a threshold met before stays met until the amount plus its
  minimum reclaim is available again;
- each met threshold remembers when it was first seen; it drives eviction once its
  grace period has passed (hard thresholds at once);
- node conditions follow the met thresholds (ignoring grace periods) and stay on until
  nothing has triggered them for ``evictionPressureTransitionPeriod``;
- a threshold whose signal was not measured anew since the last pass does not act again
  (the figures may predate the last eviction);
- memory thresholds come first when choosing what to reclaim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

import attrs

from .observations import Observation, Observations
from .thresholds import (
    DISK_PRESSURE,
    MEMORY_PRESSURE,
    PID_PRESSURE,
    SIGNAL_CONDITION,
    SIGNAL_RESOURCE,
    Signal,
    Threshold,
)

__all__ = [
    "CONDITION_ORDER",
    "EvictionState",
    "Step",
    "by_eviction_priority",
    "met_now",
    "step",
    "thresholds_met",
]

CONDITION_ORDER = (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE)
"""Conditions are reported in this order (upstream's order is a Go map's)."""

_MEMORY_SIGNALS = (Signal.MEMORY_AVAILABLE, Signal.ALLOCATABLE_MEMORY_AVAILABLE)


@attrs.frozen
class EvictionState:
    """What the manager remembers between passes."""

    first_observed: Mapping[Threshold, float] = attrs.field(factory=dict)
    conditions_last_observed: Mapping[str, float] = attrs.field(factory=dict)
    thresholds_met: tuple[Threshold, ...] = ()
    """met and past their grace period: kept until their minimum reclaim is satisfied"""
    last_observations: Mapping[Signal, Observation] = attrs.field(factory=dict)
    conditions: tuple[str, ...] = ()
    """the pressure conditions reported now"""


@attrs.frozen
class Step:
    state: EvictionState
    act_on: tuple[Threshold, ...]
    """thresholds past their grace period, measured anew, memory first"""

    @property
    def conditions(self) -> tuple[str, ...]:
        return self.state.conditions


def thresholds_met(
    thresholds: Iterable[Threshold], observations: Observations, enforce_min_reclaim: bool
) -> tuple[Threshold, ...]:
    """The thresholds whose amount (plus minimum reclaim, if asked) is above what is left."""
    out: list[Threshold] = []
    for t in thresholds:
        observed = observations.get(t.signal)
        if observed is None:
            continue
        amount: int | Fraction = t.value.amount(observed.capacity)
        if enforce_min_reclaim and t.min_reclaim is not None:
            amount += t.min_reclaim.amount(observed.capacity)
        if amount > observed.available:
            out.append(t)
    return tuple(out)


def _merge(a: Sequence[Threshold], b: Iterable[Threshold]) -> tuple[Threshold, ...]:
    out = list(a)
    for t in b:
        if not any(_same(t, x) for x in out):
            out.append(t)
    return tuple(out)


def _same(a: Threshold, b: Threshold) -> bool:
    """Upstream's ``hasThreshold``: signal, grace period and value (not minimum reclaim)."""
    return (
        a.signal == b.signal
        and a.grace_period == b.grace_period
        and a.value.quantity == b.value.quantity
        and (a.value.quantity is not None or a.value.percentage == b.value.percentage)
    )


def _conditions(thresholds: Iterable[Threshold]) -> tuple[str, ...]:
    found = {SIGNAL_CONDITION[t.signal] for t in thresholds if t.signal in SIGNAL_CONDITION}
    return tuple(c for c in CONDITION_ORDER if c in found)


def by_eviction_priority(thresholds: Iterable[Threshold]) -> tuple[Threshold, ...]:
    """Memory signals first, signals with nothing to reclaim last; stable otherwise."""

    def rank(t: Threshold) -> int:
        if t.signal in _MEMORY_SIGNALS:
            return 0
        return 1 if t.signal in SIGNAL_RESOURCE else 2

    return tuple(sorted(thresholds, key=rank))


def _updated(t: Threshold, now: Observations, last: Observations) -> bool:
    observed = now.get(t.signal)
    if observed is None:
        return False
    previous = last.get(t.signal)
    if previous is None or observed.time is None:
        return True
    return previous.time is None or observed.time > previous.time


def met_now(
    state: EvictionState, thresholds: Sequence[Threshold], observations: Observations
) -> tuple[Threshold, ...]:
    """The thresholds ``step`` finds met: those above what is left, and those it acted on
    before until their minimum reclaim is available again. None met: nothing to act on."""
    met = thresholds_met(thresholds, observations, enforce_min_reclaim=False)
    if state.thresholds_met:
        met = _merge(met, thresholds_met(state.thresholds_met, observations, True))
    return met


def step(
    state: EvictionState,
    thresholds: Sequence[Threshold],
    observations: Observations,
    now: float,
    transition_period: float,
) -> Step:
    """One pass: the new state and the thresholds to act on."""
    met = met_now(state, thresholds, observations)
    first = {t: state.first_observed.get(t, now) for t in met}
    last_seen = dict(state.conditions_last_observed)
    for condition in _conditions(met):
        last_seen[condition] = now
    conditions = tuple(
        c for c in CONDITION_ORDER if c in last_seen and now - last_seen[c] < transition_period
    )
    ready = tuple(t for t, at in first.items() if now - at >= t.grace_period)
    new_state = EvictionState(
        first_observed=first,
        conditions_last_observed=last_seen,
        thresholds_met=ready,
        last_observations=dict(observations),
        conditions=conditions,
    )
    fresh = tuple(t for t in ready if _updated(t, observations, state.last_observations))
    return Step(new_state, by_eviction_priority(fresh))
