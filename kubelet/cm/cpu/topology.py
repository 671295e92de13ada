"""The machine's CPU and memory topology, read from /sys under an injectable root.

Each online CPU has a core (its unique id: the lowest CPU among its thread siblings, as
upstream's ``getUniqueCoreID``), a socket (``physical_package_id``), a NUMA node (the node
whose ``cpulist`` holds it; 0 on a machine without NUMA directories) and an uncore cache
(the id of its L3 cache; the socket when the kernel shows none). Each NUMA node has its
memory (``MemTotal`` of its meminfo) and its hugepages by size. Every file is read with a
bound (``boundedio``); the reading is blocking, so callers run ``read_topology`` through
their file runner.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import attrs

from kubelet.boundedio import InputRefused, read_regular_file

from .cpuset import CpuSetError, parse_cpuset

_ATTR_LIMIT = 4096
"""bytes of one sysfs attribute (a CPU list of thousands of CPUs fits)"""
_MEMINFO_LIMIT = 64 * 1024
_MAX_ENTRIES = 16384
"""entries of one /sys directory listed (CPUs, nodes, caches)"""


class TopologyError(Exception):
    """The machine's topology could not be read."""


@attrs.frozen
class CpuInfo:
    cpu: int
    core: int
    socket: int
    numa: int
    uncore: int


@attrs.frozen
class NumaNode:
    id: int
    cpus: frozenset[int]
    memory: int = 0
    """bytes (node meminfo ``MemTotal``)"""
    hugepages: Mapping[int, int] = attrs.field(factory=dict)
    """page size in bytes → pages"""


@attrs.frozen
class Topology:
    """The machine's online CPUs and NUMA nodes."""

    cpus: Mapping[int, CpuInfo]
    numa: Mapping[int, NumaNode]

    @property
    def all_cpus(self) -> frozenset[int]:
        return frozenset(self.cpus)

    def sockets(self) -> dict[int, frozenset[int]]:
        return _group(self, lambda c: c.socket)

    def cores(self) -> dict[int, frozenset[int]]:
        return _group(self, lambda c: c.core)

    def numa_cpus(self) -> dict[int, frozenset[int]]:
        return _group(self, lambda c: c.numa)

    def uncore_caches(self) -> dict[int, frozenset[int]]:
        return _group(self, lambda c: c.uncore)

    @property
    def cpus_per_core(self) -> int:
        """Threads per core (1 without SMT), as upstream counts: CPUs over cores."""
        cores = len(self.cores())
        return len(self.cpus) // cores if cores else 1


def _group(topo: Topology, key: object) -> dict[int, frozenset[int]]:
    out: dict[int, set[int]] = {}
    for info in topo.cpus.values():
        out.setdefault(key(info), set()).add(info.cpu)  # type: ignore[operator]
    return {k: frozenset(v) for k, v in out.items()}


def uniform(
    sockets: int,
    cores_per_socket: int,
    threads: int,
    numa_per_socket: int = 1,
    l3_per_socket: int = 1,
) -> Topology:
    """A regular machine numbered as Linux does (siblings ``n`` apart), its cores split
    evenly into NUMA nodes and L3 cache groups: for tests and docs."""
    cores = sockets * cores_per_socket
    cpus: dict[int, CpuInfo] = {}
    per_node = max(cores_per_socket // numa_per_socket, 1)
    per_l3 = max(cores_per_socket // l3_per_socket, 1)
    for t in range(threads):
        for core in range(cores):
            cpu = t * cores + core
            socket = core // cores_per_socket
            numa = socket * numa_per_socket + (core % cores_per_socket) // per_node
            uncore = socket * l3_per_socket + (core % cores_per_socket) // per_l3
            cpus[cpu] = CpuInfo(cpu=cpu, core=core, socket=socket, numa=numa, uncore=uncore)
    nodes = {
        n: NumaNode(id=n, cpus=frozenset(c.cpu for c in cpus.values() if c.numa == n))
        for n in sorted({c.numa for c in cpus.values()})
    }
    return Topology(cpus=cpus, numa=nodes)


def _read(path: Path, limit: int = _ATTR_LIMIT) -> str:
    return read_regular_file(path, limit).decode("ascii", "replace").strip()


def _names(directory: Path) -> list[str]:
    """The entries of ``directory`` (none when it does not exist), at most a bound."""
    out: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if len(out) >= _MAX_ENTRIES:
                    raise InputRefused(f"{directory}: more than {_MAX_ENTRIES} entries")
                out.append(entry.name)
    except FileNotFoundError:
        return []
    return sorted(out)


def _indexed(directory: Path, prefix: str) -> list[int]:
    """N of the ``<prefix>N`` entries of ``directory``, ascending."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    return sorted(int(m.group(1)) for n in _names(directory) if (m := pattern.fullmatch(n)))


def read_topology(sys_root: str | os.PathLike[str] = "/sys") -> Topology:
    """The topology under ``sys_root`` (blocking; ``TopologyError`` when unreadable)."""
    root = Path(sys_root)
    try:
        return _read_topology(root)
    except (OSError, InputRefused, CpuSetError, ValueError) as exc:
        raise TopologyError(f"could not read the CPU topology under {root}: {exc}") from exc


def _read_topology(root: Path) -> Topology:
    cpu_dir = root / "devices/system/cpu"
    node_dir = root / "devices/system/node"
    online_file = cpu_dir / "online"
    online = parse_cpuset(_read(online_file)) if online_file.exists() else None
    numa_of: dict[int, int] = {}
    nodes: dict[int, NumaNode] = {}
    for n in _indexed(node_dir, "node"):
        cpus = parse_cpuset(_read(node_dir / f"node{n}/cpulist"))
        numa_of.update({cpu: n for cpu in cpus})
        nodes[n] = NumaNode(
            id=n,
            cpus=cpus,
            memory=_node_memory(node_dir / f"node{n}/meminfo"),
            hugepages=_hugepages(node_dir / f"node{n}/hugepages"),
        )
    infos: dict[int, CpuInfo] = {}
    for cpu in _indexed(cpu_dir, "cpu"):
        topo = cpu_dir / f"cpu{cpu}/topology"
        if (online is not None and cpu not in online) or not topo.is_dir():
            continue
        siblings = parse_cpuset(_read(topo / "thread_siblings_list")) or {cpu}
        socket = int(_read(topo / "physical_package_id"))
        infos[cpu] = CpuInfo(
            cpu=cpu,
            core=min(siblings),
            socket=socket,
            numa=numa_of.get(cpu, 0),
            uncore=_l3_id(cpu_dir / f"cpu{cpu}/cache", socket),
        )
    if not infos:
        raise TopologyError(f"no online CPU found under {cpu_dir}")
    if not nodes:
        nodes[0] = NumaNode(id=0, cpus=frozenset(infos))
    return Topology(cpus=infos, numa=nodes)


def _l3_id(cache_dir: Path, default: int) -> int:
    for index in _indexed(cache_dir, "index"):
        entry = cache_dir / f"index{index}"
        try:
            if _read(entry / "level") == "3":
                return int(_read(entry / "id"))
        except FileNotFoundError:
            continue
    return default


def _node_memory(meminfo: Path) -> int:
    try:
        text = _read(meminfo, _MEMINFO_LIMIT)
    except FileNotFoundError:
        return 0
    match = re.search(r"MemTotal:\s+(\d+)\s*kB", text)
    return int(match.group(1)) * 1024 if match else 0


def _hugepages(directory: Path) -> dict[int, int]:
    out: dict[int, int] = {}
    pattern = re.compile(r"hugepages-(\d+)kB")
    for name in _names(directory):
        match = pattern.fullmatch(name)
        if match:
            out[int(match.group(1)) * 1024] = int(_read(directory / name / "nr_hugepages"))
    return out
