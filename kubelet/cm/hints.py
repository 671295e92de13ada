"""Topology hints: where (on which NUMA nodes) a resource manager could place a
container's resources, as upstream's ``topologymanager.TopologyHint``.

A hint's ``numa_affinity`` is a bitmask (bit ``n`` is NUMA node ``n``; ``None``: any
node, no preference) and ``preferred`` says whether the placement is one of the
narrowest that can hold the request. Resource managers offer hints through
``capabilities.HintProvider``; the topology manager merges them and hands the
result back as the container's affinity. Pure values and helpers, no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence

import attrs


@attrs.frozen
class TopologyHint:
    numa_affinity: int | None
    """bit n set: NUMA node n; None: no preference"""
    preferred: bool

    @property
    def nodes(self) -> tuple[int, ...]:
        return mask_bits(self.numa_affinity or 0)


TopologyHints = Mapping[str, Sequence[TopologyHint] | None]
"""resource name → its hints; None: no preference for it; []: no placement fits"""


def mask_of(nodes: Iterable[int]) -> int:
    out = 0
    for n in nodes:
        out |= 1 << n
    return out


def mask_bits(mask: int) -> tuple[int, ...]:
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)


def mask_count(mask: int) -> int:
    return bin(mask).count("1")


def is_narrower(a: int, b: int) -> bool:
    """Fewer nodes, or as many with more of the lower-numbered ones (upstream's
    ``IsNarrowerThan``: the smaller mask wins a tie)."""
    ca, cb = mask_count(a), mask_count(b)
    return a < b if ca == cb else ca < cb


def iterate_masks(nodes: Sequence[int]) -> Iterator[int]:
    """Every non-empty combination of ``nodes``: all single nodes, then pairs, ..."""
    for k in range(1, len(nodes) + 1):
        for combo in itertools.combinations(sorted(nodes), k):
            yield mask_of(combo)
