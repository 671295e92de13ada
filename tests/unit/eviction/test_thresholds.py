"""Eviction thresholds: parsing, percentages, containerfs (upstream helpers_test.go cases)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubelet.config import DEFAULT_EVICTION_HARD
from kubelet.eviction import parse_thresholds
from kubelet.eviction.thresholds import (
    Signal,
    Threshold,
    ThresholdError,
    ThresholdValue,
    update_containerfs_thresholds,
)

Mi = 1024 * 1024
Gi = 1024 * Mi


def q(amount: int, text: str) -> ThresholdValue:
    return ThresholdValue(quantity=Fraction(amount), text=text)


def pct(value: float) -> ThresholdValue:
    import struct

    return ThresholdValue(percentage=struct.unpack("f", struct.pack("f", value))[0])


MEM = Signal.MEMORY_AVAILABLE
ALLOC = Signal.ALLOCATABLE_MEMORY_AVAILABLE
NODEFS = Signal.NODEFS_AVAILABLE
IMAGEFS = Signal.IMAGEFS_AVAILABLE

PARSE_CASES = {
    "no values": ({}, {}, {}, {}, (), ()),
    "all memory eviction values": (
        {"memory.available": "150Mi"},
        {"memory.available": "300Mi"},
        {"memory.available": "30s"},
        {"memory.available": "0"},
        ("pods",),
        (
            Threshold(MEM, q(150 * Mi, "150Mi"), min_reclaim=q(0, "0")),
            Threshold(MEM, q(300 * Mi, "300Mi"), 30.0, q(0, "0")),
            Threshold(ALLOC, q(150 * Mi, "150Mi"), min_reclaim=q(0, "0")),
        ),
    ),
    "all memory eviction values in percentages": (
        {"memory.available": "10%"},
        {"memory.available": "30%"},
        {"memory.available": "30s"},
        {"memory.available": "5%"},
        (),
        (
            Threshold(MEM, pct(0.1), min_reclaim=pct(0.05)),
            Threshold(MEM, pct(0.3), 30.0, pct(0.05)),
        ),
    ),
    "disk eviction values in percentages": (
        {"imagefs.available": "15%", "nodefs.available": "10.5%"},
        {"imagefs.available": "30%", "nodefs.available": "20.5%"},
        {"imagefs.available": "30s", "nodefs.available": "30s"},
        {"imagefs.available": "10%", "nodefs.available": "5%"},
        (),
        (
            Threshold(IMAGEFS, pct(0.15), min_reclaim=pct(0.1)),
            Threshold(NODEFS, pct(0.105), min_reclaim=pct(0.05)),
            Threshold(IMAGEFS, pct(0.3), 30.0, pct(0.1)),
            Threshold(NODEFS, pct(0.205), 30.0, pct(0.05)),
        ),
    ),
    "inode eviction values": (
        {"imagefs.inodesFree": "150Mi", "nodefs.inodesFree": "100Mi"},
        {},
        {},
        {"imagefs.inodesFree": "2Gi"},
        (),
        (
            Threshold(
                Signal.IMAGEFS_INODES_FREE, q(150 * Mi, "150Mi"), min_reclaim=q(2 * Gi, "2Gi")
            ),
            Threshold(Signal.NODEFS_INODES_FREE, q(100 * Mi, "100Mi")),
        ),
    ),
    "disable via 0%": ({"memory.available": "0%"}, {"memory.available": "0%"}, {}, {}, (), ()),
    "disable via 100%": (
        {"memory.available": "100%"},
        {"memory.available": "100%"},
        {},
        {},
        (),
        (),
    ),
    "soft memory with grace is not copied to allocatable": (
        {},
        {"memory.available": "300Mi"},
        {"memory.available": "1m30s"},
        {},
        ("pods",),
        (Threshold(MEM, q(300 * Mi, "300Mi"), 90.0),),
    ),
    "allocatable only when pods are enforced": (
        {"memory.available": "100Mi"},
        {},
        {},
        {},
        ("system-reserved",),
        (Threshold(MEM, q(100 * Mi, "100Mi")),),
    ),
}


@pytest.mark.parametrize("name", PARSE_CASES)
def test_parse_thresholds(name: str) -> None:
    hard, soft, grace, reclaim, enforce, expected = PARSE_CASES[name]
    assert parse_thresholds(hard, soft, grace, reclaim, enforce) == expected


REFUSED = {
    "invalid-signal": ({"mem.available": "150Mi"}, {}, {}, {}, "unsupported eviction signal"),
    "hard-signal-negative": ({"memory.available": "-150Mi"}, {}, {}, {}, "must be positive"),
    "hard-signal-zero": ({"memory.available": "0"}, {}, {}, {}, "must be positive"),
    "hard-signal-negative-percentage": ({"memory.available": "-15%"}, {}, {}, {}, ">= 0%"),
    "hard-signal-percentage-greater-than-100%": (
        {"memory.available": "150%"},
        {},
        {},
        {},
        "<= 100%",
    ),
    "soft-signal-negative": ({}, {"memory.available": "-150Mi"}, {}, {}, "must be positive"),
    "valid-and-invalid-signal": (
        {"memory.available": "150Mi", "invalid.foo": "150Mi"},
        {},
        {},
        {},
        "unsupported eviction signal invalid.foo",
    ),
    "soft-no-grace-period": (
        {},
        {"memory.available": "150Mi"},
        {},
        {},
        "grace period must be specified for the soft eviction threshold memory.available",
    ),
    "soft-negative-grace-period": (
        {},
        {"memory.available": "150Mi"},
        {"memory.available": "-30s"},
        {},
        "must be a positive value",
    ),
    "negative-reclaim": ({}, {}, {}, {"memory.available": "-300Mi"}, "negative eviction minimum"),
    "zero-percent-reclaim": ({}, {}, {}, {"memory.available": "0%"}, "must be positive"),
    "bad quantity": ({"memory.available": "lots"}, {}, {}, {}, "memory.available"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_parse_refuses(name: str) -> None:
    hard, soft, grace, reclaim, words = REFUSED[name]
    with pytest.raises(ThresholdError, match=words.replace("%", "%").replace("+", r"\+")):
        parse_thresholds(hard, soft, grace, reclaim)


def test_defaults_parse_and_percentages_are_float32_of_capacity() -> None:
    thresholds = parse_thresholds(DEFAULT_EVICTION_HARD, enforce_node_allocatable=("pods",))
    by_signal = {t.signal: t for t in thresholds}
    assert by_signal[MEM].value.printed(0) == "100Mi"
    assert by_signal[ALLOC].value.quantity == 100 * Mi
    nodefs = by_signal[NODEFS].value
    # float32(10)/100 is 0.100000001490116...: 10% of 1000000007 bytes is 100000002 as
    # upstream computes it (an exact tenth would give 100000000)
    assert nodefs.amount(1_000_000_007) == 100_000_002
    assert nodefs.amount(10 * Gi) == 1073741840
    assert nodefs.printed(10 * Gi) == "1073741840"
    assert by_signal[IMAGEFS].value.printed(2 * Gi) == "322122560"
    assert by_signal[Signal.IMAGEFS_INODES_FREE].value.amount(1000) == 50


CONTAINERFS_CASES = {
    # dedicated imagefs, split containerfs → expected source of containerfs thresholds
    "single filesystem follows nodefs": (False, False, NODEFS),
    "split image/container follows nodefs": (True, True, NODEFS),
    "dedicated imagefs follows imagefs": (True, False, IMAGEFS),
}


@pytest.mark.parametrize("name", CONTAINERFS_CASES)
def test_containerfs_follows_nodefs_or_imagefs(name: str) -> None:
    dedicated, split, source = CONTAINERFS_CASES[name]
    base = parse_thresholds(
        {"nodefs.available": "10%", "imagefs.available": "15%", "nodefs.inodesFree": "5%"},
        {"nodefs.available": "20%", "imagefs.available": "30%"},
        {"nodefs.available": "1m", "imagefs.available": "2m"},
        {"nodefs.available": "1Gi", "imagefs.available": "2Gi"},
    )
    user = Threshold(Signal.CONTAINERFS_AVAILABLE, pct(0.5))
    out, warnings = update_containerfs_thresholds((*base, user), dedicated, split)
    assert warnings == ("found containerfs.available for hard eviction. ignoring",)
    derived = [t for t in out if t.signal is Signal.CONTAINERFS_AVAILABLE]
    sources = [t for t in base if t.signal is source]
    assert derived == [
        Threshold(Signal.CONTAINERFS_AVAILABLE, s.value, s.grace_period, s.min_reclaim)
        for s in sources
    ]
    inodes = [t for t in out if t.signal is Signal.CONTAINERFS_INODES_FREE]
    # only nodefs has an inode threshold: imagefs-following containerfs gets none
    assert len(inodes) == (0 if source is IMAGEFS else 1)
    assert user not in out
