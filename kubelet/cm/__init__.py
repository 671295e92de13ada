"""The container manager: the node's resources and what they add to each pod.

Upstream's ``pkg/kubelet/cm`` idea in our terms: one component (``run.run_container_manager``)
that owns the pod cgroups and the node resource managers (``topology/``, ``cpu/``,
``memory/``, ``devices/`` for device plugins, ``dra/``) and shows the rest of the kubelet
one small interface, ``manager.ContainerManager``: the node's resources (capacity,
allocatable, extended resources), an admission handler, a pod's preparation before its
sandbox and release after its teardown, each container's contribution to its CRI config
(``decisions.contribution``), and the pre-start and post-stop hooks around a container.

Each resource manager is a ``capabilities.ResourceManager`` that subclasses the
capabilities it takes part in (``capabilities.Admits``, ``ContributesConfig``, ...) and
is asked only those. The cgroups part (``podcgroups.CgroupsPart``) is the first, the
others are listed in ``registry.RESOURCE_MANAGERS``. Adding one is a new folder under
``kubelet/cm/`` plus one line there (docs/architecture.md walks through the device
manager's).
"""

from .kerneltunables import TUNABLES as KERNEL_TUNABLES
from .manager import ContainerManager
from .parts import CmParts
from .resources import (
    AssignedClaim,
    AssignedDevice,
    AssignedMemory,
    ClaimDevice,
    NodeResources,
    ResourceError,
)
from .run import run_container_manager

__all__ = [
    "KERNEL_TUNABLES",
    "AssignedClaim",
    "AssignedDevice",
    "AssignedMemory",
    "ClaimDevice",
    "CmParts",
    "ContainerManager",
    "NodeResources",
    "ResourceError",
    "run_container_manager",
]
