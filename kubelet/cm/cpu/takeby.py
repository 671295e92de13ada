"""Which CPUs to give a request, as upstream's ``takeByTopology`` packs them.

Whole sockets first (while the request is at least a socket), then whole free cores
(sockets with the fewest free CPUs first, so that allocations pack), then single threads
(from the cores, then the sockets, with the fewest free CPUs first). Pure: the topology
and the free set in, the chosen set out.
"""

from __future__ import annotations

from .topology import Topology


class NotEnoughCpus(Exception):
    def __init__(self, requested: int, available: int) -> None:
        super().__init__(
            "not enough cpus available to satisfy request: "
            f"requested={requested}, available={available}"
        )


def take_by_topology(topo: Topology, available: frozenset[int], count: int) -> frozenset[int]:
    """``count`` CPUs of ``available``; ``NotEnoughCpus`` when there are fewer."""
    if count > len(available):
        raise NotEnoughCpus(count, len(available))
    taken: set[int] = set()
    if count == 0:
        return frozenset()
    sockets, cores = topo.sockets(), topo.cores()

    def free(cpus: frozenset[int]) -> frozenset[int]:
        return cpus & available - taken

    for _, cpus in sorted(sockets.items()):
        if count - len(taken) >= len(cpus) and free(cpus) == cpus:
            taken |= cpus
    socket_of = {cpu: info.socket for cpu, info in topo.cpus.items()}

    def socket_free(cpus: frozenset[int]) -> int:
        return len(free(sockets[socket_of[min(cpus)]]))

    for _, cpus in sorted(cores.items(), key=lambda kv: (socket_free(kv[1]), kv[0])):
        if count - len(taken) >= len(cpus) and free(cpus) == cpus:
            taken |= cpus
    core_of = {cpu: info.core for cpu, info in topo.cpus.items()}

    def thread_order(cpu: int) -> tuple[int, int, int]:
        core = cores[core_of[cpu]]
        return (len(free(core)), socket_free(core), cpu)

    for cpu in sorted(available - taken, key=thread_order):
        if len(taken) == count:
            break
        taken.add(cpu)
    return frozenset(taken)
