"""Which CPUs to give a request, as upstream's ``takeByTopology`` packs them.

Two levels of whole groups first: NUMA nodes then sockets when a NUMA node holds one or
more sockets (sockets >= NUMA nodes), else sockets then NUMA nodes (several NUMA nodes
per socket); each taken only while the request still needs at least that many CPUs and
the group is wholly free. With ``prefer-align-cpus-by-uncorecache``, uncore (L3) cache
groups next: wholly free caches no bigger than the need, then the first cache (NUMA
nodes in their order, the fewest free first within each) whose lowest free cores hold
all that is still needed. Then whole free cores, then single threads. Every list is
ordered the way upstream orders it: groups with the fewest free CPUs first (then by
id), cores within their socket (or NUMA node) in that group's order, so allocations
pack. Pure: the topology and the free set in, the chosen set out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .topology import Topology


class NotEnoughCpus(Exception):
    def __init__(self, requested: int, available: int) -> None:
        super().__init__(
            "not enough cpus available to satisfy request: "
            f"requested={requested}, available={available}"
        )


class _Accumulator:
    """The CPUs taken so far and what is still free (upstream's ``cpuAccumulator``)."""

    def __init__(self, topo: Topology, available: frozenset[int], count: int) -> None:
        self.topo = topo
        self.free = set(available & topo.all_cpus)
        self.needed = count
        self.result: set[int] = set()
        self.sockets, self.numas, self.cores = topo.sockets(), topo.numa_cpus(), topo.cores()
        self.uncores = topo.uncore_caches()
        self.numa_first = len(self.sockets) >= len(self.numas)

    def take(self, cpus: Iterable[int]) -> None:
        cpus = set(cpus) & self.free
        self.result |= cpus
        self.free -= cpus
        self.needed -= len(cpus)

    def _order(self, groups: dict[int, frozenset[int]], ids: Iterable[int]) -> list[int]:
        """``ids`` that still have free CPUs, the fewest free first, then by id."""
        have = [(len(groups[i] & self.free), i) for i in set(ids)]
        return [i for n, i in sorted(have) if n]

    def _within(
        self, outer: list[int], outer_of: Callable[[int], int], inner: dict[int, frozenset[int]]
    ) -> list[int]:
        """Inner groups (cores, sockets, NUMA nodes) in the order of the outer ones."""
        members: dict[int, list[int]] = {}
        for i, cpus in inner.items():
            for o in {outer_of(c) for c in cpus}:
                members.setdefault(o, []).append(i)
        out: list[int] = []
        for o in outer:
            out.extend(i for i in self._order(inner, members.get(o, [])) if i not in out)
        return out

    def numa_nodes(self) -> list[int]:
        if self.numa_first:
            return self._order(self.numas, self.numas)
        return self._within(self.socket_list(), self._socket_of, self.numas)

    def socket_list(self) -> list[int]:
        if self.numa_first:
            return self._within(self.numa_nodes(), self._numa_of, self.sockets)
        return self._order(self.sockets, self.sockets)

    def core_list(self) -> list[int]:
        if self.numa_first:
            return self._within(self.socket_list(), self._socket_of, self.cores)
        return self._within(self.numa_nodes(), self._numa_of, self.cores)

    def _socket_of(self, cpu: int) -> int:
        return self.topo.cpus[cpu].socket

    def _numa_of(self, cpu: int) -> int:
        return self.topo.cpus[cpu].numa

    def take_whole(self, groups: dict[int, frozenset[int]], order: list[int]) -> None:
        """Every group of ``order`` that is wholly free and no bigger than the need."""
        for gid in [g for g in order if groups[g] <= self.free]:
            if self.needed >= len(groups[gid]) and groups[gid] <= self.free:
                self.take(groups[gid])

    def take_levels(self) -> None:
        """Whole NUMA nodes and sockets, the higher level of the hierarchy first."""
        numa = (self.numas, self.numa_nodes)
        socket = (self.sockets, self.socket_list)
        for groups, order in (numa, socket) if self.numa_first else (socket, numa):
            if self.needed > 0:
                self.take_whole(groups, order())

    def uncore_list(self) -> list[int]:
        """Uncore caches with free CPUs: NUMA nodes in their order, the fewest free
        first within each (upstream's ``sortAvailableUncoreCaches``)."""
        return self._within(self.numa_nodes(), self._numa_of, self.uncores)

    def take_uncore_caches(self) -> None:
        """Whole free caches while the need is at least one, then the first cache
        whose lowest free cores hold the rest (upstream's ``takeUncoreCache``)."""
        self.take_whole(self.uncores, self.uncore_list())
        for cache in self.uncore_list():
            if self.needed <= 0:
                return
            self._take_partial_uncore(cache)

    def _take_partial_uncore(self, cache: int) -> None:
        free = self.uncores[cache] & self.free
        cores = sorted({self.topo.cpus[c].core for c in free})
        chosen: list[int] = []
        for core in cores:
            if len(chosen) >= self.needed:
                break
            chosen.extend(self.cores[core] & free)
        if len(chosen) >= self.needed:
            self.take(sorted(chosen)[: self.needed])

    def take_threads(self) -> None:
        for core in self.core_list():
            for cpu in sorted(self.cores[core] & self.free):
                if self.needed <= 0:
                    return
                self.take([cpu])


def take_by_topology(
    topo: Topology, available: frozenset[int], count: int, uncore: bool = False
) -> frozenset[int]:
    """``count`` CPUs of ``available`` (by uncore cache groups too when ``uncore``);
    ``NotEnoughCpus`` when there are fewer."""
    if count > len(available):
        raise NotEnoughCpus(count, len(available))
    if count <= 0:
        return frozenset()
    acc = _Accumulator(topo, available, count)
    acc.take_levels()
    if uncore and acc.needed > 0:
        acc.take_uncore_caches()
    if acc.needed > 0:
        acc.take_whole(acc.cores, acc.core_list())
    if acc.needed > 0:
        acc.take_threads()
    return frozenset(acc.result)


def numa_order(topo: Topology, available: frozenset[int]) -> list[int]:
    """The NUMA nodes with CPUs in ``available``, in the order packing visits them."""
    return _Accumulator(topo, available, 0).numa_nodes()
