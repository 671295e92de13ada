"""A fake /sys CPU and NUMA tree, as the CPU manager reads it (tests and the docs)."""

from __future__ import annotations

from pathlib import Path

from kubelet.cm.cpu.cpuset import format_cpuset


def write_sysfs(
    root: Path,
    *,
    sockets: int = 1,
    cores: int = 2,
    threads: int = 1,
    numa_per_socket: int = 1,
    l3_per_socket: int = 1,
    node_memory_kib: int = 1024 * 1024,
) -> Path:
    """A tree of ``sockets`` × ``cores`` × ``threads`` CPUs numbered as Linux does
    (siblings ``sockets*cores`` apart), ``numa_per_socket`` nodes per socket, ``l3_per_socket``
    L3 caches per socket (ids unique on the machine, as the kernel numbers them);
    returns ``root``."""
    total_cores = sockets * cores
    cpu_dir = root / "devices/system/cpu"
    cpu_dir.mkdir(parents=True, exist_ok=True)
    (cpu_dir / "online").write_text(f"0-{total_cores * threads - 1}\n")
    nodes: dict[int, list[int]] = {}
    per_node = max(cores // numa_per_socket, 1)
    per_l3 = max(cores // l3_per_socket, 1)
    for t in range(threads):
        for core in range(total_cores):
            cpu = t * total_cores + core
            socket = core // cores
            node = socket * numa_per_socket + (core % cores) // per_node
            nodes.setdefault(node, []).append(cpu)
            topo = cpu_dir / f"cpu{cpu}/topology"
            topo.mkdir(parents=True)
            siblings = [s * total_cores + core for s in range(threads)]
            (topo / "thread_siblings_list").write_text(format_cpuset(siblings) + "\n")
            (topo / "physical_package_id").write_text(f"{socket}\n")
            (topo / "core_id").write_text(f"{core % cores}\n")
            l3 = cpu_dir / f"cpu{cpu}/cache/index3"
            l3.mkdir(parents=True)
            (l3 / "level").write_text("3\n")
            (l3 / "id").write_text(f"{socket * l3_per_socket + (core % cores) // per_l3}\n")
    for node, cpus in nodes.items():
        d = root / f"devices/system/node/node{node}"
        (d / "hugepages/hugepages-2048kB").mkdir(parents=True)
        (d / "cpulist").write_text(format_cpuset(cpus) + "\n")
        (d / "meminfo").write_text(f"Node {node} MemTotal:       {node_memory_kib} kB\n")
        (d / "hugepages/hugepages-2048kB/nr_hugepages").write_text("0\n")
    return root
