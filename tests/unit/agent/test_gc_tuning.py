"""The kubelet's process tunes the cyclic garbage collector and the allocator once, at start-up."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kubelet import process


@pytest.fixture
def restored_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_thresholds_raised_and_startup_objects_frozen(
    restored_gc: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBELET_GC_THRESHOLDS", raising=False)
    gc.unfreeze()
    process.tune_garbage_collector()
    assert gc.get_threshold() == process.GC_THRESHOLDS
    assert gc.get_threshold()[0] > 700  # above CPython's default
    assert gc.get_freeze_count() > 0


def test_thresholds_from_the_environment(
    restored_gc: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELET_GC_THRESHOLDS", "1234,5,6")
    process.tune_garbage_collector()
    assert gc.get_threshold() == (1234, 5, 6)


def test_generated_methods_source_lines_are_dropped(restored_gc: None) -> None:
    import linecache

    import attrs

    @attrs.frozen
    class Generated:
        value: int

    generated = [name for name in linecache.cache if name.startswith("<attrs generated")]
    assert generated
    process.freeze_long_lived()
    assert not [name for name in linecache.cache if name.startswith("<attrs generated")]
    assert Generated(1).value == 1
