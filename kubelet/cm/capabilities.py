"""What a resource manager can take part in: one small protocol per capability.

A resource manager (``ResourceManager``: it has a name) subclasses exactly the
capabilities it implements, and implements every method of each (they have no defaults,
so mypy refuses a manager that declares a capability and leaves a method out). The
``ContainerManager`` sorts its managers by capability once, when it is made, and asks
each question only of the managers that declared it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import attrs

from kubelet.api import Container, Pod, ResourceStatus
from kubelet.decisions import ContainerContribution
from kubelet.pluginmanager import PluginHandler

from .hints import TopologyHints
from .resources import (
    AssignedClaim,
    AssignedDevice,
    AssignedMemory,
    NodeResources,
    Refusal,
    ResizeRefusal,
)


class ResourceManager(Protocol):
    """One node resource manager under the container manager (the cgroups part; devices,
    CPU, memory, topology, DRA): a name, and the capabilities it subclasses."""

    name: str


# -- admission ---------------------------------------------------------------------------


@runtime_checkable
class Admits(Protocol):
    def admit(self, pod: Pod, others: Sequence[Pod]) -> Refusal | None:
        """Whether ``pod`` may run beside ``others`` (the pods admitted and active)."""
        ...


@runtime_checkable
class AdmitsResize(Protocol):
    def admit_resize(self, pod: Pod, allocated: Pod) -> ResizeRefusal | None:
        """Why ``pod``'s resources can never replace its allocation (``allocated``: the
        pod as it runs) on this node; None: this manager does not mind."""
        ...


@runtime_checkable
class HintProvider(Protocol):
    """Asked by the topology manager at admission, before ``admit``."""

    def topology_hints(self, pod: Pod, container: Container) -> TopologyHints:
        """Where this manager could place the container's resources, by resource
        (``hints.TopologyHint``); {}: no preference (the ``container`` scope)."""
        ...

    def pod_topology_hints(self, pod: Pod) -> TopologyHints:
        """The same for the whole pod (the ``pod`` scope)."""
        ...


# -- the node ----------------------------------------------------------------------------


@runtime_checkable
class ExtendsNode(Protocol):
    def extended_resources(self) -> NodeResources:
        """The resources this manager adds to the node's (device plugins' counts)."""
        ...


# -- a pod's lifecycle -------------------------------------------------------------------


@runtime_checkable
class PreparesPod(Protocol):
    async def prepare_pod(self, pod: Pod) -> None:
        """Before the pod's sandbox, every sync; ``ResourceError`` fails the sync."""
        ...


@runtime_checkable
class PreparesSandbox(Protocol):
    async def prepare_sandbox(self, pod: Pod) -> None:
        """Right before a sandbox is created for the pod, its volumes ready and what
        must go killed (upstream's place for DRA's prepare); ``ResourceError`` fails the
        sync before the sandbox."""
        ...


@runtime_checkable
class ReleasesPod(Protocol):
    async def release_pod(self, pod: Pod) -> None:
        """After the pod's teardown, once its volumes are gone; errors are the
        manager's to log (housekeeping's sweeps retry)."""
        ...


# -- a container -------------------------------------------------------------------------


@runtime_checkable
class ContributesConfig(Protocol):
    def contribute(self, pod: Pod, container: Container) -> ContainerContribution:
        """What this manager adds to the container's CRI config."""
        ...


@runtime_checkable
class PreStartHook(Protocol):
    async def pre_start(self, pod: Pod, container: Container, container_id: str) -> None:
        """Between CreateContainer and StartContainer; ``ResourceError`` keeps the
        container from starting (PreStartHookError)."""
        ...


@runtime_checkable
class PostStopHook(Protocol):
    async def post_stop(self, container_id: str) -> None:
        """Before a stopped container is removed; errors are the manager's to log."""
        ...


# -- what the pod-resources API and the pod's status report ------------------------------


@runtime_checkable
class ReportsDevices(Protocol):
    def container_devices(self, pod_uid: str, container: str) -> Sequence[AssignedDevice]:
        """The devices a container holds (the pod-resources API's List and Get)."""
        ...

    def allocatable_devices(self) -> Sequence[AssignedDevice]:
        """The devices that can be given (GetAllocatableResources)."""
        ...


@runtime_checkable
class ReportsClaims(Protocol):
    def dynamic_resources(self, pod: Pod, container: Container) -> Sequence[AssignedClaim]:
        """The ResourceClaims a container uses (pod-resources ``dynamic_resources``)."""
        ...


@runtime_checkable
class ReportsCpus(Protocol):
    def exclusive_cpus(self, pod_uid: str, container: str) -> frozenset[int]:
        """The CPUs given to the container alone (pod-resources ``cpu_ids``)."""
        ...

    def allocatable_cpus(self) -> frozenset[int]:
        """The CPUs this manager may give exclusively (GetAllocatableResources)."""
        ...


@runtime_checkable
class ReportsMemory(Protocol):
    def container_memory(self, pod_uid: str, container: str) -> Sequence[AssignedMemory]:
        """The memory bound to NUMA nodes for the container (pod-resources ``memory``)."""
        ...

    def allocatable_memory(self) -> Sequence[AssignedMemory]:
        """Each NUMA node's allocatable memory per type (GetAllocatableResources)."""
        ...


@runtime_checkable
class ReportsHealth(Protocol):
    def resource_health(self, pod: Pod, container: Container) -> Sequence[ResourceStatus]:
        """The health of the devices this manager gave the container (its status'
        ``allocatedResourcesStatus``, gate ResourceHealthStatus)."""
        ...


# -- wiring ------------------------------------------------------------------------------


@runtime_checkable
class HandlesPlugins(Protocol):
    def plugin_handlers(self) -> Mapping[str, PluginHandler]:
        """Plugin type → the plugin watcher's handler for it (DRA: "DRAPlugin")."""
        ...


@runtime_checkable
class Binds(Protocol):
    def bind(self, peers: Sequence[ResourceManager]) -> None:
        """Once every manager is started: the managers, in registration order (the
        topology manager collects its hint providers here, the CPU manager finds the
        topology manager whose affinities it allocates within)."""
        ...


@attrs.frozen
class Roster:
    """The managers sorted by capability, once (each list in registration order): the
    container manager asks each question only of the managers that declared it."""

    admits: tuple[Admits, ...] = ()
    admits_resize: tuple[AdmitsResize, ...] = ()
    extends_node: tuple[ExtendsNode, ...] = ()
    prepares_pod: tuple[PreparesPod, ...] = ()
    prepares_sandbox: tuple[PreparesSandbox, ...] = ()
    releases_pod: tuple[ReleasesPod, ...] = ()
    contributes: tuple[ContributesConfig, ...] = ()
    pre_start: tuple[PreStartHook, ...] = ()
    post_stop: tuple[PostStopHook, ...] = ()
    devices: tuple[ReportsDevices, ...] = ()
    claims: tuple[ReportsClaims, ...] = ()
    cpus: tuple[ReportsCpus, ...] = ()
    memory: tuple[ReportsMemory, ...] = ()
    health: tuple[ReportsHealth, ...] = ()
    plugins: tuple[HandlesPlugins, ...] = ()

    @classmethod
    def of(cls, managers: Sequence[ResourceManager]) -> Roster:
        ms = tuple(managers)
        return cls(
            admits=tuple(m for m in ms if isinstance(m, Admits)),
            admits_resize=tuple(m for m in ms if isinstance(m, AdmitsResize)),
            extends_node=tuple(m for m in ms if isinstance(m, ExtendsNode)),
            prepares_pod=tuple(m for m in ms if isinstance(m, PreparesPod)),
            prepares_sandbox=tuple(m for m in ms if isinstance(m, PreparesSandbox)),
            releases_pod=tuple(m for m in ms if isinstance(m, ReleasesPod)),
            contributes=tuple(m for m in ms if isinstance(m, ContributesConfig)),
            pre_start=tuple(m for m in ms if isinstance(m, PreStartHook)),
            post_stop=tuple(m for m in ms if isinstance(m, PostStopHook)),
            devices=tuple(m for m in ms if isinstance(m, ReportsDevices)),
            claims=tuple(m for m in ms if isinstance(m, ReportsClaims)),
            cpus=tuple(m for m in ms if isinstance(m, ReportsCpus)),
            memory=tuple(m for m in ms if isinstance(m, ReportsMemory)),
            health=tuple(m for m in ms if isinstance(m, ReportsHealth)),
            plugins=tuple(m for m in ms if isinstance(m, HandlesPlugins)),
        )


def bind_all(managers: Sequence[ResourceManager]) -> None:
    """Each manager that ``Binds``, told the managers once all are started."""
    for manager in managers:
        if isinstance(manager, Binds):
            manager.bind(managers)
