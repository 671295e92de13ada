"""The node: machine facts, node status, registration and the lease heartbeat.

What the package offers the agent and the other components: ``run_node`` (the node
nursery: registration, status reports, the lease, certificates and shutdown, given its
``NodeParts`` and answering with a ``NodeHandle``), ``NodeIdentity`` (name, hostname,
addresses), ``read_machine_info``/``MachineInfo``, ``NodeFacts``, and the node's
resource arithmetic: ``capacity``, ``allocatable``, ``summed_reservations``,
``eviction_bytes``, ``max_pods``, ``filesystem_stats``; ``declared`` holds the node's
declared features. ``certificates`` and ``shutdown`` are packages of their own.
"""

from . import declared
from .declared import declared_features
from .facts import eviction_bytes, summed_reservations
from .identity import NodeIdentity
from .machine import MachineInfo, filesystem_stats, read_machine_info
from .maxpods import max_pods
from .registration import default_labels
from .run import NodeHandle, NodeParts, run_node
from .status import NodeFacts, allocatable, capacity

__all__ = [
    "MachineInfo",
    "NodeFacts",
    "NodeHandle",
    "NodeIdentity",
    "NodeParts",
    "allocatable",
    "capacity",
    "declared",
    "declared_features",
    "default_labels",
    "eviction_bytes",
    "filesystem_stats",
    "max_pods",
    "read_machine_info",
    "run_node",
    "summed_reservations",
]
