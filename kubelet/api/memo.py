"""A function of an immutable API object, computed once per object.

Pods and their parts are frozen: what is derived from one (its QoS class, its summed
requests) cannot change while it lives. Admission and the QoS cgroup update walk every
active pod at each pod start, so without this a ramp of N pods derives O(N²) times.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
V = TypeVar("V")


class PerObject(Generic[T, V]):
    """``fn(obj)`` remembered for as long as ``obj`` lives (keyed by identity, so equal
    but distinct objects are computed apart; the entry goes when the object does).
    Safe from worker threads: each step is one dict operation under the GIL."""

    def __init__(self, fn: Callable[[T], V]) -> None:
        self._fn = fn
        self._cache: dict[int, tuple[weakref.ref[T], V]] = {}

    def __call__(self, obj: T) -> V:
        key = id(obj)
        hit = self._cache.get(key)
        if hit is not None and hit[0]() is obj:
            return hit[1]
        value = self._fn(obj)
        cache = self._cache
        ref = weakref.ref(obj, lambda _ref: cache.pop(key, None))
        cache[key] = (ref, value)
        return value

    def __len__(self) -> int:
        return len(self._cache)
