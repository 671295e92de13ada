"""CPU sets in the kernel's list format (``0-3,8``), as cpuset files and the CRI speak it."""

from __future__ import annotations

from collections.abc import Iterable


class CpuSetError(ValueError):
    """A CPU list that does not parse."""


def parse_cpuset(text: str, limit: int = 65536) -> frozenset[int]:
    """``"0-2,5"`` → {0, 1, 2, 5}; the empty string is the empty set. A list naming more
    than ``limit`` CPUs (counted before they are made) is refused: a short text must not
    expand to millions of numbers."""
    out: set[int] = set()
    named = 0
    text = text.strip()
    if not text:
        return frozenset()
    for part in text.split(","):
        first, sep, last = part.strip().partition("-")
        try:
            lo = int(first)
            hi = int(last) if sep else lo
        except ValueError:
            raise CpuSetError(f"invalid CPU list {text!r}") from None
        if lo < 0 or hi < lo or hi - lo > 65536:
            raise CpuSetError(f"invalid CPU range {part!r} in {text!r}")
        named += hi - lo + 1
        if named > limit:
            raise CpuSetError(f"more than {limit} CPUs in {text[:64]!r}")
        out.update(range(lo, hi + 1))
    return frozenset(out)


def format_cpuset(cpus: Iterable[int]) -> str:
    """{0, 1, 2, 5} → ``"0-2,5"`` (ranges ascending, as upstream's ``CPUSet.String``)."""
    ordered = sorted(set(cpus))
    ranges: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        ranges.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(ranges)
