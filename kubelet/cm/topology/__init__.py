"""The topology manager (upstream's ``topologymanager``): NUMA alignment of the
resources the other managers give a container.

``merge`` holds the policies (none, best-effort, restricted, single-numa-node) and
their options; ``numa`` reads the NUMA nodes; ``manager`` is the resource manager that
asks the hint providers at admission and keeps each container's affinity.
"""

from ..hints import TopologyHint, TopologyHints
from .manager import TopologyManager, start_topology_manager

__all__ = ["TopologyHint", "TopologyHints", "TopologyManager", "start_topology_manager"]
