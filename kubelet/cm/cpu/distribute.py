"""``distribute-cpus-across-numa``: a request that needs more than one NUMA node is
spread evenly over the fewest NUMA nodes that can hold it, as upstream's
``takeByTopologyNUMADistributed``.

CPUs are handed out in groups of ``group`` (threads per core with
``full-pcpus-only``, else 1). For k NUMA nodes, from the fewest that could hold the
request to the most, every combination of k nodes (in the packing order of NUMA
nodes) that can give each node an equal share of whole groups is scored: the CPUs
left over beyond the equal shares go, a group at a time, to the subset of the
combination that leaves the free CPUs of all NUMA nodes most even (the lowest
standard deviation; larger subsets tried first). The best-balanced combination of
the smallest k wins; each of its nodes gives its share packed, then the leftover
groups. A request that is not a whole number of groups, or that no combination can
spread, is packed as usual. Pure.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

from .takeby import NotEnoughCpus, numa_order, take_by_topology
from .topology import Topology


def take_distributed(
    topo: Topology, available: frozenset[int], count: int, group: int
) -> frozenset[int]:
    """``count`` CPUs of ``available`` spread over NUMA nodes; ``NotEnoughCpus`` when
    there are fewer."""
    available = available & topo.all_cpus
    if count % group:
        return take_by_topology(topo, available, count)
    if count <= 0:
        return frozenset()
    if count > len(available):
        raise NotEnoughCpus(count, len(available))
    by_node = topo.numa_cpus()
    free = {n: cpus & available for n, cpus in by_node.items()}
    nodes = numa_order(topo, available)
    low, high = _numa_range(topo, len(nodes), count, group)
    for k in range(low, high + 1):
        best = _best_combination(free, nodes, k, count, group)
        if best is None:
            continue
        combo, extra = best
        share = count // k // group * group
        result: set[int] = set()
        for node in combo:
            result |= take_by_topology(topo, free[node] - result, share)
        left = count - share * k
        while left > 0:
            for node in extra:
                if left == 0:
                    break
                if len(free[node] - result) < group:
                    continue
                result |= take_by_topology(topo, free[node] - result, group)
                left -= group
        return frozenset(result)
    return take_by_topology(topo, available, count)


def _numa_range(topo: Topology, available_nodes: int, count: int, group: int) -> tuple[int, int]:
    """The fewest and the most NUMA nodes worth trying (upstream's
    ``rangeNUMANodesNeededToSatisfy``)."""
    groups = (len(topo.cpus) - 1) // group + 1
    per_node = (groups - 1) // len(topo.numa_cpus()) + 1
    needed = (count - 1) // group + 1
    return (needed - 1) // per_node + 1, min(needed, available_nodes)


def _best_combination(
    free: dict[int, frozenset[int]], nodes: Sequence[int], k: int, count: int, group: int
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The best-balanced combination of ``k`` nodes and the nodes its leftover groups
    come from; None when no combination of ``k`` can spread the request."""
    best: tuple[float, tuple[int, ...], tuple[int, ...]] | None = None
    for combo in itertools.combinations(nodes, k):
        if best is not None and best[0] == 0:
            break
        scored = _score(free, nodes, combo, count, group)
        if scored is not None and (best is None or scored[0] < best[0]):
            best = (scored[0], combo, scored[1])
    return None if best is None else (best[1], best[2])


def _score(
    free: dict[int, frozenset[int]],
    nodes: Sequence[int],
    combo: tuple[int, ...],
    count: int,
    group: int,
) -> tuple[float, tuple[int, ...]] | None:
    """The balance of ``combo`` (the spread of free CPUs left on every node) and the
    nodes its leftover groups come from; None when it cannot take the request."""
    if sum(len(free[n]) for n in combo) < count:
        return None
    if sum(len(free[n]) // group for n in combo) * group < count:
        return None
    share = count // len(combo) // group * group
    if any(len(free[n]) < share for n in combo):
        return None
    after = {n: len(free[n]) - (share if n in combo else 0) for n in nodes}
    left = count - share * len(combo)
    if left == 0:
        return _deviation(after.values()), ()
    candidates = [n for n in combo if after[n] >= group]
    best: tuple[float, tuple[int, ...]] | None = None
    for size in range(len(candidates), 0, -1):
        for subset in itertools.combinations(candidates, size):
            if sum(after[n] // group for n in subset) * group < left:
                continue
            spread = _give_leftover(after, subset, left, group)
            score = _deviation(spread.values())
            if best is None or score < best[0]:
                best = (score, subset)
    return best


def _give_leftover(
    after: dict[int, int], subset: tuple[int, ...], left: int, group: int
) -> dict[int, int]:
    """Free CPUs per node once ``left`` more are taken round-robin from ``subset``."""
    spread = dict(after)
    while left > 0:
        for n in subset:
            if left == 0:
                break
            if spread[n] < group:
                continue
            spread[n] -= group
            left -= group
    return spread


def _deviation(values: Iterable[int]) -> float:
    """The population standard deviation (upstream's ``standardDeviation``)."""
    xs = list(values)
    mean = sum(xs) / len(xs)
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
