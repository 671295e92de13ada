"""The CPU manager (upstream's ``cpumanager``): policies none and static.

``topology`` reads the machine's CPUs and NUMA nodes from /sys; ``takeby`` chooses CPUs
for a request as upstream packs them; ``policy`` is the static policy's pure state;
``checkpoint`` is ``<root-dir>/cpu_manager_state`` in upstream's format; ``manager`` is
the resource manager that ties them to admission, the CRI config and the reconcile loop.
"""

from .manager import CpuManager, start_cpu_manager
from .topology import Topology, TopologyError, read_topology

__all__ = ["CpuManager", "Topology", "TopologyError", "read_topology", "start_cpu_manager"]
