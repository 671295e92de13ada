"""Eviction signals and thresholds: what the node watches and when it acts (parsing only).

A threshold is "signal < value", the value a quantity ("100Mi") or a percentage of the
signal's capacity ("10%"). Hard thresholds act at once; soft ones after their grace
period. Parsing follows upstream's ``ParseThresholdConfig``: "0%" and "100%" switch a
signal off, a quantity must be positive, a soft threshold needs a grace period, a
minimum reclaim attaches to every threshold of its signal, and a hard
``memory.available`` threshold is copied to ``allocatableMemory.available`` when node
allocatable is enforced on pods. Percentages are float32 as upstream keeps them, so
"10%" of a capacity gives the same byte count.

The containerfs signals are never taken from the user: they follow nodefs (one
filesystem, or images split from writable layers) or imagefs (a dedicated image
filesystem that also holds the writable layers), as ``UpdateContainerFsThresholds``.
"""

from __future__ import annotations

import enum
import math
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

import attrs

from kubelet.api import Format, QuantityError, format_quantity, parse_quantity
from kubelet.config import parse_duration_ns

__all__ = [
    "ALLOCATABLE_MEMORY_AVAILABLE",
    "CONTAINERFS_AVAILABLE",
    "CONTAINERFS_INODES_FREE",
    "DISK_PRESSURE",
    "IMAGEFS_AVAILABLE",
    "IMAGEFS_INODES_FREE",
    "MEMORY_AVAILABLE",
    "MEMORY_PRESSURE",
    "NODEFS_AVAILABLE",
    "NODEFS_INODES_FREE",
    "PID_AVAILABLE",
    "PID_PRESSURE",
    "SIGNAL_CONDITION",
    "SIGNAL_RESOURCE",
    "Signal",
    "Threshold",
    "ThresholdError",
    "ThresholdValue",
    "parse_thresholds",
    "update_containerfs_thresholds",
]


class Signal(enum.StrEnum):
    """The eviction signals (Linux), by their configuration names."""

    MEMORY_AVAILABLE = "memory.available"
    ALLOCATABLE_MEMORY_AVAILABLE = "allocatableMemory.available"
    NODEFS_AVAILABLE = "nodefs.available"
    NODEFS_INODES_FREE = "nodefs.inodesFree"
    IMAGEFS_AVAILABLE = "imagefs.available"
    IMAGEFS_INODES_FREE = "imagefs.inodesFree"
    CONTAINERFS_AVAILABLE = "containerfs.available"
    CONTAINERFS_INODES_FREE = "containerfs.inodesFree"
    PID_AVAILABLE = "pid.available"


MEMORY_AVAILABLE = Signal.MEMORY_AVAILABLE
ALLOCATABLE_MEMORY_AVAILABLE = Signal.ALLOCATABLE_MEMORY_AVAILABLE
NODEFS_AVAILABLE = Signal.NODEFS_AVAILABLE
NODEFS_INODES_FREE = Signal.NODEFS_INODES_FREE
IMAGEFS_AVAILABLE = Signal.IMAGEFS_AVAILABLE
IMAGEFS_INODES_FREE = Signal.IMAGEFS_INODES_FREE
CONTAINERFS_AVAILABLE = Signal.CONTAINERFS_AVAILABLE
CONTAINERFS_INODES_FREE = Signal.CONTAINERFS_INODES_FREE
PID_AVAILABLE = Signal.PID_AVAILABLE

MEMORY_PRESSURE = "MemoryPressure"
DISK_PRESSURE = "DiskPressure"
PID_PRESSURE = "PIDPressure"

MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
INODES = "inodes"
PIDS = "pids"

SIGNAL_CONDITION: Mapping[Signal, str] = {
    MEMORY_AVAILABLE: MEMORY_PRESSURE,
    ALLOCATABLE_MEMORY_AVAILABLE: MEMORY_PRESSURE,
    NODEFS_AVAILABLE: DISK_PRESSURE,
    NODEFS_INODES_FREE: DISK_PRESSURE,
    IMAGEFS_AVAILABLE: DISK_PRESSURE,
    IMAGEFS_INODES_FREE: DISK_PRESSURE,
    CONTAINERFS_AVAILABLE: DISK_PRESSURE,
    CONTAINERFS_INODES_FREE: DISK_PRESSURE,
    PID_AVAILABLE: PID_PRESSURE,
}
"""The node condition a met threshold of each signal sets."""

SIGNAL_RESOURCE: Mapping[Signal, str] = {
    MEMORY_AVAILABLE: MEMORY,
    ALLOCATABLE_MEMORY_AVAILABLE: MEMORY,
    NODEFS_AVAILABLE: EPHEMERAL_STORAGE,
    NODEFS_INODES_FREE: INODES,
    IMAGEFS_AVAILABLE: EPHEMERAL_STORAGE,
    IMAGEFS_INODES_FREE: INODES,
    CONTAINERFS_AVAILABLE: EPHEMERAL_STORAGE,
    CONTAINERFS_INODES_FREE: INODES,
    PID_AVAILABLE: PIDS,
}
"""The resource reclaimed for each signal (named in the eviction message)."""

_COUNT_SIGNALS = frozenset(
    {NODEFS_INODES_FREE, IMAGEFS_INODES_FREE, CONTAINERFS_INODES_FREE, PID_AVAILABLE}
)
_PERCENT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?%+$")
ALLOCATABLE_ENFORCEMENT = "pods"


class ThresholdError(ValueError):
    """An eviction setting upstream refuses; the text names the signal."""


def _float32(value: float) -> float:
    """``value`` rounded to the nearest float32, as Go's ``float32(x)``."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


@attrs.frozen
class ThresholdValue:
    """A quantity, or (when ``quantity`` is None) a float32 fraction of the capacity."""

    quantity: Fraction | None = None
    text: str = ""
    """how a quantity prints (its canonical form, e.g. "100Mi")"""
    percentage: float = 0.0

    def amount(self, capacity: int) -> int | Fraction:
        """The threshold in the signal's unit for ``capacity`` (``GetThresholdQuantity``)."""
        if self.quantity is not None:
            return self.quantity
        return int(float(capacity) * self.percentage)

    def printed(self, capacity: int) -> str:
        """The amount as the eviction message prints it."""
        if self.quantity is not None:
            return self.text
        return format_quantity(self.amount(capacity), Format.BINARY_SI)


@attrs.frozen
class Threshold:
    """``signal`` below ``value`` (for ``grace_period`` seconds; 0 is a hard threshold)."""

    signal: Signal
    value: ThresholdValue
    grace_period: float = 0.0
    min_reclaim: ThresholdValue | None = None

    @property
    def hard(self) -> bool:
        return self.grace_period == 0

    def describe(self) -> str:
        """For logs: "hard memory.available<100Mi", "soft nodefs.available<10% (1m30s)"."""
        value = self.value
        text = value.text if value.quantity is not None else f"{value.percentage * 100:g}%"
        if self.hard:
            return f"hard {self.signal}<{text}"
        return f"soft {self.signal}<{text} ({self.grace_period:g}s)"


def _signal(name: str) -> Signal:
    try:
        return Signal(name)
    except ValueError:
        raise ThresholdError(f"unsupported eviction signal {name}") from None


def _percentage(signal: Signal, text: str) -> float:
    if not _PERCENT.match(text):
        raise ThresholdError(f"eviction threshold {signal}: invalid percentage {text!r}")
    value = _float32(float(text.rstrip("%")))
    if not math.isfinite(value):
        raise ThresholdError(f"eviction threshold {signal}: invalid percentage {text!r}")
    return _float32(value / 100)


def _quantity(signal: Signal, text: str) -> tuple[Fraction, str]:
    try:
        q = parse_quantity(text)
    except QuantityError as exc:
        raise ThresholdError(f"eviction threshold {signal}: {exc}") from None
    return q.amount, str(q)


def _statement(signal_name: str, text: str) -> Threshold | None:
    """One "signal: value" entry; None when it switches the signal off (0% or 100%)."""
    signal = _signal(signal_name)
    if text.endswith("%"):
        if text in ("0%", "100%"):
            return None
        pct = _percentage(signal, text)
        if pct < 0:
            raise ThresholdError(f"eviction percentage threshold {signal} must be >= 0%: {text}")
        if pct > 1:
            raise ThresholdError(f"eviction percentage threshold {signal} must be <= 100%: {text}")
        return Threshold(signal, ThresholdValue(percentage=pct))
    amount, printed = _quantity(signal, text)
    if amount <= 0:
        raise ThresholdError(f"eviction threshold {signal} must be positive: {printed}")
    return Threshold(signal, ThresholdValue(quantity=amount, text=printed))


def _grace_periods(statements: Mapping[str, str]) -> dict[Signal, float]:
    out: dict[Signal, float] = {}
    for name, text in statements.items():
        signal = _signal(name)
        try:
            ns = parse_duration_ns(text)
        except ValueError as exc:
            raise ThresholdError(f"evictionSoftGracePeriod[{signal}]: {exc}") from None
        if ns < 0:
            raise ThresholdError(
                f"invalid eviction grace period specified: {text}, must be a positive value"
            )
        out[signal] = ns / 1e9
    return out


def _min_reclaims(statements: Mapping[str, str]) -> dict[Signal, ThresholdValue]:
    out: dict[Signal, ThresholdValue] = {}
    for name, text in statements.items():
        signal = _signal(name)
        if text.endswith("%"):
            pct = _percentage(signal, text)
            if pct <= 0:
                raise ThresholdError(
                    f"eviction percentage minimum reclaim {signal} must be positive: {text}"
                )
            out[signal] = ThresholdValue(percentage=pct)
            continue
        amount, printed = _quantity(signal, text)
        if amount < 0:
            raise ThresholdError(f"negative eviction minimum reclaim specified for {signal}")
        out[signal] = ThresholdValue(quantity=amount, text=printed)
    return out


def parse_thresholds(
    hard: Mapping[str, str],
    soft: Mapping[str, str] = {},
    soft_grace_period: Mapping[str, str] = {},
    minimum_reclaim: Mapping[str, str] = {},
    enforce_node_allocatable: Iterable[str] = (),
) -> tuple[Threshold, ...]:
    """The thresholds of a configuration (``ParseThresholdConfig``); ThresholdError if bad.

    Order: hard ones, soft ones, then the allocatable copies (each in the maps' order).
    """
    hard_list = [t for t in (_statement(k, v) for k, v in hard.items()) if t is not None]
    soft_list = [t for t in (_statement(k, v) for k, v in soft.items()) if t is not None]
    periods = _grace_periods(soft_grace_period)
    reclaims = _min_reclaims(minimum_reclaim)
    results: list[Threshold] = list(hard_list)
    for t in soft_list:
        if t.signal not in periods:
            raise ThresholdError(
                f"grace period must be specified for the soft eviction threshold {t.signal}"
            )
        results.append(attrs.evolve(t, grace_period=periods[t.signal]))
    results = [attrs.evolve(t, min_reclaim=reclaims.get(t.signal)) for t in results]
    if ALLOCATABLE_ENFORCEMENT in enforce_node_allocatable:
        results += [
            attrs.evolve(t, signal=ALLOCATABLE_MEMORY_AVAILABLE)
            for t in results
            if t.signal is MEMORY_AVAILABLE and t.hard
        ]
    return tuple(results)


_DERIVED = {
    CONTAINERFS_AVAILABLE: (NODEFS_AVAILABLE, IMAGEFS_AVAILABLE),
    CONTAINERFS_INODES_FREE: (NODEFS_INODES_FREE, IMAGEFS_INODES_FREE),
}


def update_containerfs_thresholds(
    thresholds: Sequence[Threshold], dedicated_image_fs: bool, split_container_fs: bool
) -> tuple[tuple[Threshold, ...], tuple[str, ...]]:
    """Thresholds with containerfs derived from nodefs or imagefs, and what was ignored.

    containerfs follows nodefs when there is one filesystem or when writable layers live
    apart from images; it follows imagefs when a dedicated image filesystem holds both.
    A containerfs threshold the user set is replaced (a warning names it). A missing
    source threshold means no containerfs threshold (upstream's zero threshold never
    fires either).
    """
    follow_image = dedicated_image_fs and not split_container_fs
    warnings: list[str] = []
    out: list[Threshold] = []
    for t in thresholds:
        if t.signal in _DERIVED:
            kind = "hard" if t.hard else "soft"
            warnings.append(f"found {t.signal} for {kind} eviction. ignoring")
            continue
        out.append(t)
    derived: list[Threshold] = []
    for target, (on_node, on_image) in _DERIVED.items():
        source = on_image if follow_image else on_node
        for hard in (True, False):
            found = [t for t in out if t.signal is source and t.hard is hard]
            if found:
                derived.append(attrs.evolve(found[-1], signal=target))
    return tuple(out + derived), tuple(warnings)


def is_count_signal(signal: Signal) -> bool:
    """Inodes and PIDs count things; memory and disk signals are bytes."""
    return signal in _COUNT_SIGNALS
