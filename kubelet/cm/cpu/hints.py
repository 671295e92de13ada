"""The CPU manager's topology hints: on which NUMA nodes a request for exclusive CPUs
could be met (upstream's ``generateCPUTopologyHints``). Pure."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from kubelet.api import Container, Pod

from ..topology import TopologyHint
from .topology import Topology


def numa_hints(
    topo: Topology, available: frozenset[int], count: int, align_by_socket: bool = False
) -> list[TopologyHint]:
    """A hint for every set of NUMA nodes whose ``available`` CPUs hold ``count``;
    preferred are those as narrow as the narrowest set whose CPUs (free or not)
    could hold it, and with ``align_by_socket`` also those whose nodes span as few
    sockets as that narrowest set needs (upstream's ``isHintSocketAligned``)."""
    by_node = topo.numa_cpus()
    nodes = sorted(by_node)
    narrowest = len(nodes)
    fits: list[tuple[tuple[int, ...], int]] = []  # (nodes, mask)
    for size in range(1, len(nodes) + 1):
        for combo in itertools.combinations(nodes, size):
            cpus = frozenset().union(*(by_node[n] for n in combo))
            if len(cpus) >= count:
                narrowest = min(narrowest, size)
            if len(cpus & available) >= count:
                fits.append((combo, sum(1 << n for n in combo)))
    per_socket = len(nodes) // len(topo.sockets())
    min_sockets = (narrowest + per_socket - 1) // per_socket if per_socket else 0

    def preferred(combo: tuple[int, ...]) -> bool:
        if align_by_socket and per_socket:
            spanned = {i.socket for i in topo.cpus.values() if i.numa in combo}
            if len(spanned) == min_sockets:
                return True
        return len(combo) == narrowest

    return [TopologyHint(mask, preferred(combo)) for combo, mask in fits]


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
