"""The memory manager (upstream's ``memorymanager``): policies None and Static.

``reserved`` checks ``reservedMemory`` against the node's reservation; ``policy`` is
the static policy's pure state (which NUMA nodes each container's memory and hugepages
come from); ``state`` is ``<root-dir>/memory_manager_state`` in upstream's format;
``manager`` is the resource manager that ties them to admission, the topology manager's
hints, the CRI config (``cpuset.mems``) and the pod-resources API.
"""

from .manager import MemoryManager, start_memory_manager

__all__ = ["MemoryManager", "start_memory_manager"]
