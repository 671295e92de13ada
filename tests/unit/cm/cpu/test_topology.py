from pathlib import Path

import pytest

from kubelet.cm.cpu.cpuset import CpuSetError, format_cpuset, parse_cpuset
from kubelet.cm.cpu.takeby import NotEnoughCpus, take_by_topology
from kubelet.cm.cpu.topology import TopologyError, read_topology, uniform
from kubelet.testing.fakesysfs import write_sysfs


def test_cpu_lists_parse_and_format_as_the_kernel_writes_them() -> None:
    assert parse_cpuset("0-2,5, 7-8\n") == {0, 1, 2, 5, 7, 8}
    assert parse_cpuset("") == frozenset()
    assert format_cpuset({8, 0, 1, 2, 5, 7}) == "0-2,5,7-8"
    for bad in ("1.3", "3-1", "a", "1-"):
        with pytest.raises(CpuSetError):
            parse_cpuset(bad)


@pytest.mark.parametrize(
    ("sockets", "cores", "threads", "numa", "nodes", "per_core"),
    [(1, 2, 1, 1, 1, 1), (1, 4, 2, 1, 1, 2), (2, 4, 2, 1, 2, 2), (2, 4, 1, 2, 4, 1)],
)
def test_topology_is_read_from_a_fake_sys_tree(
    tmp_path: Path, sockets: int, cores: int, threads: int, numa: int, nodes: int, per_core: int
) -> None:
    write_sysfs(tmp_path, sockets=sockets, cores=cores, threads=threads, numa_per_socket=numa)
    topo = read_topology(tmp_path)
    assert len(topo.cpus) == sockets * cores * threads
    assert len(topo.numa) == nodes
    assert len(topo.sockets()) == sockets
    assert topo.cpus_per_core == per_core
    assert all(n.memory == 1024 * 1024 * 1024 for n in topo.numa.values())
    assert all(n.hugepages == {2 * 1024 * 1024: 0} for n in topo.numa.values())
    assert topo.cpus == uniform(sockets, cores, threads, numa).cpus


def test_smt_siblings_share_a_core_named_by_their_lowest_cpu(tmp_path: Path) -> None:
    topo = read_topology(write_sysfs(tmp_path, sockets=1, cores=2, threads=2))
    assert topo.cores() == {0: {0, 2}, 1: {1, 3}}
    assert {c.uncore for c in topo.cpus.values()} == {0}


def test_an_offline_cpu_is_left_out_and_a_tree_without_cpus_is_an_error(tmp_path: Path) -> None:
    write_sysfs(tmp_path, cores=4)
    (tmp_path / "devices/system/cpu/online").write_text("0-2\n")
    assert read_topology(tmp_path).all_cpus == {0, 1, 2}
    with pytest.raises(TopologyError):
        read_topology(tmp_path / "nothing")


def test_take_by_topology_takes_whole_sockets_then_cores_then_threads() -> None:
    topo = uniform(2, 4, 2)  # cpus 0-7 are first threads, 8-15 their siblings
    everything = topo.all_cpus
    socket0 = {0, 1, 2, 3, 8, 9, 10, 11}
    assert take_by_topology(topo, everything, 8) == socket0
    assert take_by_topology(topo, everything, 2) == {0, 8}  # one whole core
    assert take_by_topology(topo, everything, 1) == {0}
    # a partly used core is filled before a free core is broken
    assert take_by_topology(topo, everything - {0}, 1) == {8}
    # cores come from the socket with fewer free CPUs (packing)
    assert take_by_topology(topo, everything - {0, 8}, 2) == {1, 9}
    with pytest.raises(NotEnoughCpus, match="requested=3, available=2"):
        take_by_topology(topo, frozenset({1, 2}), 3)


def test_take_by_topology_packs_whole_numa_nodes_of_a_two_numa_socket(tmp_path: Path) -> None:
    # 1 socket x 2 NUMA nodes x 4 cores x 2 threads: node 0 {0,1,4,5}, node 1 {2,3,6,7}
    topo = read_topology(write_sysfs(tmp_path, sockets=1, cores=4, threads=2, numa_per_socket=2))
    assert topo.numa_cpus() == {0: {0, 1, 4, 5}, 1: {2, 3, 6, 7}}
    everything = topo.all_cpus
    # with CPU 0 taken, a request of a NUMA node's size gets the free NUMA node
    # (cores across both nodes without NUMA packing)
    assert take_by_topology(topo, everything - {0}, 4) == {2, 3, 6, 7}
    # smaller requests pack on the node with the fewest free CPUs
    assert take_by_topology(topo, everything - {0, 4}, 2) == {1, 5}
    assert take_by_topology(topo, everything - {0}, 1) == {4}
    assert take_by_topology(topo, everything - {0}, 6) == {1, 2, 3, 5, 6, 7}


def test_take_by_topology_sockets_then_numa_nodes_on_two_sockets(tmp_path: Path) -> None:
    # 2 sockets x 2 NUMA nodes each x 4 cores x 2 threads (siblings 8 apart)
    topo = read_topology(write_sysfs(tmp_path, sockets=2, cores=4, threads=2, numa_per_socket=2))
    assert topo.numa_cpus() == {
        0: {0, 1, 8, 9},
        1: {2, 3, 10, 11},
        2: {4, 5, 12, 13},
        3: {6, 7, 14, 15},
    }
    everything = topo.all_cpus
    # a whole NUMA node on the socket with the fewest free CPUs
    assert take_by_topology(topo, everything - {0}, 4) == {2, 3, 10, 11}
    # a whole socket, then a whole NUMA node, then cores of the fullest node
    assert take_by_topology(topo, everything - {0}, 12) == {2, 3, 10, 11} | set(range(4, 8)) | set(
        range(12, 16)
    )
    assert take_by_topology(topo, everything - {0}, 14) == everything - {0, 8}
    # the fuller socket first: its free NUMA node, or its fuller node's cores
    assert take_by_topology(topo, everything - {0, 4, 12}, 4) == {6, 7, 14, 15}
    assert take_by_topology(topo, everything - {0, 4, 12}, 2) == {5, 13}
