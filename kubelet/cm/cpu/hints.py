"""The CPU manager's topology hints: on which NUMA nodes a request for exclusive CPUs
could be met (upstream's ``generateCPUTopologyHints``). Pure."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from kubelet.api import Container, Pod

from ..topology import TopologyHint
from .topology import Topology


def numa_hints(topo: Topology, available: frozenset[int], count: int) -> list[TopologyHint]:
    """A hint for every set of NUMA nodes whose ``available`` CPUs hold ``count``;
    preferred are those as narrow as the narrowest set whose CPUs (free or not)
    could hold it."""
    by_node = topo.numa_cpus()
    nodes = sorted(by_node)
    narrowest = len(nodes)
    fits: list[tuple[int, int]] = []  # (mask, node count)
    for size in range(1, len(nodes) + 1):
        for combo in itertools.combinations(nodes, size):
            cpus = frozenset().union(*(by_node[n] for n in combo))
            if len(cpus) >= count:
                narrowest = min(narrowest, size)
            if len(cpus & available) >= count:
                fits.append((sum(1 << n for n in combo), size))
    return [TopologyHint(mask, size == narrowest) for mask, size in fits]


def pod_guaranteed_cpus(pod: Pod, per_container: Callable[[Pod, Container], int]) -> int:
    """The pod's exclusive CPUs at its peak: the larger of its biggest init container
    and its app containers with their sidecars (upstream's ``podGuaranteedCPUs``)."""
    init_peak, sidecars = 0, 0
    for c in pod.spec.init_containers:
        count = per_container(pod, c)
        if c.restart_policy == "Always":
            sidecars += count
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + count)
    app = sum(per_container(pod, c) for c in pod.spec.containers)
    return max(init_peak, app + sidecars)
