"""The node: machine facts, node status, registration and the lease heartbeat."""

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
