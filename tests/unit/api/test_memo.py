"""PerObject: a function of an immutable object computed once per live object."""

from __future__ import annotations

import gc

import attrs
import pytest

from kubelet.api import PerObject


@attrs.frozen
class Thing:
    value: int


def test_computed_once_per_object_and_apart_for_equal_objects() -> None:
    calls: list[Thing] = []

    def double(thing: Thing) -> int:
        calls.append(thing)
        return thing.value * 2

    memo = PerObject(double)
    a, b = Thing(1), Thing(1)
    assert [memo(a), memo(a), memo(b), memo(b)] == [2, 2, 2, 2]
    assert len(calls) == 2  # a and b are equal, but each is computed on its own
    assert calls[0] is a and calls[1] is b


def test_the_entry_goes_with_its_object() -> None:
    memo = PerObject(lambda thing: thing.value)
    things = [Thing(i) for i in range(100)]
    assert [memo(t) for t in things] == list(range(100))
    assert len(memo) == 100
    del things
    gc.collect()
    assert len(memo) == 0


def test_a_new_object_at_a_reused_address_is_computed_again() -> None:
    memo = PerObject(lambda thing: thing.value)
    for i in range(200):  # CPython reuses the freed address at once
        assert memo(Thing(i)) == i


def test_an_error_is_not_remembered() -> None:
    attempts = []

    def flaky(thing: Thing) -> int:
        attempts.append(thing)
        if len(attempts) == 1:
            raise ValueError("first time")
        return thing.value

    memo = PerObject(flaky)
    thing = Thing(7)
    with pytest.raises(ValueError, match="first time"):
        memo(thing)
    assert memo(thing) == 7
    assert len(attempts) == 2
