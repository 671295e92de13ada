"""The static policy's placement options on fake machines: distribute-cpus-across-numa
(even shares over the fewest NUMA nodes, in whole cores with full-pcpus-only),
align-by-socket (a NUMA affinity widened to its sockets; socket-aligned hints
preferred) and prefer-align-cpus-by-uncorecache (L3 cache groups first)."""

from __future__ import annotations

from pathlib import Path

import attrs

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, ResourceRequirements
from kubelet.cm.cpu.hints import numa_hints
from kubelet.cm.cpu.manager import reserved_cpus
from kubelet.cm.cpu.policy import PolicyOptions, StaticPolicy, machine_conflict, pick_cpus
from kubelet.cm.cpu.topology import Topology, read_topology, uniform
from kubelet.cm.topology import TopologyHint
from kubelet.testing.fakesysfs import write_sysfs

DISTRIBUTE = PolicyOptions(distribute_cpus_across_numa=True)
BY_SOCKET = PolicyOptions(align_by_socket=True)
UNCORE = PolicyOptions(prefer_align_cpus_by_uncorecache=True)


def _pod(uid: str, cpus: str) -> Pod:
    amounts = {"cpu": cpus, "memory": "64Mi"}
    res = ResourceRequirements(requests=amounts, limits=amounts)
    return Pod(
        metadata=ObjectMeta(name=uid, namespace="default", uid=uid),
        spec=PodSpec(containers=(Container(name="app", image="i", resources=res),)),
    )


def _per_node(topo: Topology, cpus: frozenset[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for cpu in cpus:
        out[topo.cpus[cpu].numa] = out.get(topo.cpus[cpu].numa, 0) + 1
    return out


def test_distribute_spreads_a_request_evenly_over_the_fewest_numa_nodes() -> None:
    # 2 sockets x 2 NUMA nodes x 4 cores x SMT2: 8 CPUs a node; core 0 reserved.
    topo = uniform(2, 8, 2, numa_per_socket=2)
    reserved = frozenset({0, 16})
    packed = StaticPolicy(topo, reserved, PolicyOptions())
    packed.allocate(_pod("p", "12"))
    assert sorted(_per_node(topo, packed.exclusive("p", "app")).values()) == [4, 8]
    spread = StaticPolicy(topo, reserved, DISTRIBUTE)
    spread.allocate(_pod("p", "12"))
    # Two nodes of six each; nodes 1 and 2 leave the free CPUs most even.
    assert _per_node(topo, spread.exclusive("p", "app")) == {1: 6, 2: 6}


def test_distribute_leaves_a_request_that_fits_one_node_packed() -> None:
    topo = uniform(2, 8, 2, numa_per_socket=2)
    spread = StaticPolicy(topo, frozenset({0, 16}), DISTRIBUTE)
    spread.allocate(_pod("p", "8"))
    assert len(_per_node(topo, spread.exclusive("p", "app"))) == 1


def test_distribute_hands_out_whole_cores_with_full_pcpus_only() -> None:
    # 1 socket x 2 NUMA nodes x 4 cores x SMT2; core 0 (node 0) reserved.
    topo = uniform(1, 8, 2, numa_per_socket=2)
    free = topo.all_cpus - {0, 8}
    threads = pick_cpus(topo, DISTRIBUTE, free, 10)
    assert _per_node(topo, threads) == {0: 5, 1: 5}  # groups of one CPU: 5 + 5
    whole = pick_cpus(topo, attrs.evolve(DISTRIBUTE, full_pcpus_only=True), free, 10)
    assert _per_node(topo, whole) == {0: 4, 1: 6}  # groups of a core: 4 + 4 + 2 more
    cores = topo.cores()
    assert all(cores[topo.cpus[c].core] <= whole for c in whole)
    packed = pick_cpus(topo, PolicyOptions(full_pcpus_only=True), free, 10)
    assert _per_node(topo, packed) == {0: 2, 1: 8}


def test_distribute_falls_back_to_packing_when_the_request_is_not_whole_groups() -> None:
    topo = uniform(1, 8, 2, numa_per_socket=2)
    free = topo.all_cpus - {0, 8}
    options = attrs.evolve(DISTRIBUTE, full_pcpus_only=True)
    assert pick_cpus(topo, options, free, 9) == pick_cpus(topo, PolicyOptions(), free, 9)


def test_align_by_socket_widens_the_affinity_to_its_sockets() -> None:
    # 2 sockets x 2 NUMA nodes x 2 cores x SMT2; node 0 has only CPUs 1 and 9 free.
    topo = uniform(2, 4, 2, numa_per_socket=2)
    node0 = TopologyHint(numa_affinity=0b0001, preferred=False)
    plain = StaticPolicy(topo, frozenset({0, 8}), PolicyOptions())
    plain.allocate(_pod("p", "4"), lambda _: node0)
    assert {1, 9} <= plain.exclusive("p", "app")
    by_socket = StaticPolicy(topo, frozenset({0, 8}), BY_SOCKET)
    by_socket.allocate(_pod("p", "4"), lambda _: node0)
    # The socket's free CPUs are packed: NUMA node 1, whole.
    assert by_socket.exclusive("p", "app") == topo.numa_cpus()[1]


def test_align_by_socket_prefers_hints_within_as_few_sockets_as_needed() -> None:
    topo = uniform(2, 4, 2, numa_per_socket=2)

    def preferred(align: bool, count: int) -> set[int]:
        hints = numa_hints(topo, topo.all_cpus, count, align)
        return {h.numa_affinity for h in hints if h.preferred and h.numa_affinity}

    assert preferred(False, 2) == {0b0001, 0b0010, 0b0100, 0b1000}
    assert preferred(True, 2) == {0b0001, 0b0010, 0b0100, 0b1000, 0b0011, 0b1100}
    assert 0b1111 not in preferred(False, 10)
    assert 0b1111 in preferred(True, 10)  # three nodes needed: two sockets


def test_align_by_socket_is_refused_with_single_numa_node_and_on_multi_socket_nodes() -> None:
    topo = uniform(2, 4, 2, numa_per_socket=2)
    assert machine_conflict(BY_SOCKET, topo, "best-effort") is None
    assert machine_conflict(PolicyOptions(), topo, "single-numa-node") is None
    assert machine_conflict(BY_SOCKET, topo, "single-numa-node") == (
        "Topolgy manager single-numa-node policy is incompatible with CPUManager "
        "align-by-socket policy option"
    )
    two = uniform(2, 2, 1)
    one_node = Topology(
        cpus={c: attrs.evolve(i, numa=0) for c, i in two.cpus.items()}, numa={0: two.numa[0]}
    )
    assert machine_conflict(BY_SOCKET, one_node, "none") == (
        "Align by socket is not compatible with hardware where number of sockets are more "
        "than number of NUMA"
    )


def test_uncore_cache_takes_a_whole_free_l3_group_first() -> None:
    # 2 sockets x 8 cores, two L3 groups of 4 cores a socket; CPU 0 reserved.
    topo = uniform(2, 8, 1, l3_per_socket=2)
    free = topo.all_cpus - {0}
    assert pick_cpus(topo, PolicyOptions(), free, 4) == {1, 2, 3, 4}  # two caches
    assert pick_cpus(topo, UNCORE, free, 4) == {4, 5, 6, 7}  # L3 group 1


def test_uncore_cache_keeps_a_request_inside_one_cache_when_it_fits() -> None:
    topo = uniform(2, 8, 1, l3_per_socket=2)
    plain = StaticPolicy(topo, frozenset({0}), PolicyOptions())
    uncore = StaticPolicy(topo, frozenset({0}), UNCORE)
    for policy in (plain, uncore):
        policy.allocate(_pod("a", "2"))
        assert policy.exclusive("a", "app") == {1, 2}
        policy.allocate(_pod("b", "3"))
    assert plain.exclusive("b", "app") == {3, 4, 5}  # across L3 groups 0 and 1
    assert uncore.exclusive("b", "app") == {4, 5, 6}  # within L3 group 1


def test_uncore_cache_takes_whole_groups_then_a_partial_one() -> None:
    # upstream's case: one socket of 16 CPUs in 4 caches, CPU 0 taken, 10 requested
    topo = uniform(1, 16, 1, l3_per_socket=4)
    got = pick_cpus(topo, UNCORE, topo.all_cpus - {0}, 10)
    assert got == {1, 2, 4, 5, 6, 7, 8, 9, 10, 11}


def test_reserved_cpus_are_taken_as_the_options_take_cpus() -> None:
    topo = uniform(1, 16, 1, l3_per_socket=4)
    assert reserved_cpus(topo, "", "4", None, UNCORE) == {0, 1, 2, 3}
    two_nodes = uniform(1, 8, 1, numa_per_socket=2)
    assert reserved_cpus(two_nodes, "", "6", None) == {0, 1, 2, 3, 4, 5}
    assert reserved_cpus(two_nodes, "", "6", None, DISTRIBUTE) == {0, 1, 2, 4, 5, 6}


def test_the_sysfs_reader_finds_each_l3_group(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path, sockets=2, cores=8, threads=2, l3_per_socket=2)
    topo = read_topology(root)
    caches = topo.uncore_caches()
    assert sorted(caches) == [0, 1, 2, 3]
    assert caches[1] == {4, 5, 6, 7, 20, 21, 22, 23}
