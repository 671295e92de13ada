"""The container manager: what the rest of the kubelet asks of the node's resources.

``ContainerManager`` is what the pod driver, admission, housekeeping and the downward API
ask: it holds the node's resources and its resource managers, sorted once by capability
(``capabilities.Roster``), and asks each question only of the managers that declared
the capability it needs, in registration order (the cgroups part first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubelet.api import Container, Pod, ResourceStatus, to_bytes
from kubelet.cgroups import PodCgroups
from kubelet.decisions import (
    NO_CONTRIBUTION,
    ContainerContribution,
    ContainerLimits,
    container_swaps,
    merge_contributions,
    pod_cgroup_parent,
)
from kubelet.pluginmanager import PluginHandler

from .capabilities import (
    Admits,
    AdmitsResize,
    Binds,
    ContributesConfig,
    ExtendsNode,
    HandlesPlugins,
    HintProvider,
    PostStopHook,
    PreparesPod,
    PreparesSandbox,
    PreStartHook,
    ReleasesPod,
    ReportsClaims,
    ReportsCpus,
    ReportsDevices,
    ReportsHealth,
    ReportsMemory,
    ResourceManager,
    Roster,
)
from .hints import TopologyHints
from .resources import (
    NO_RESOURCES,
    AssignedClaim,
    AssignedDevice,
    AssignedMemory,
    HealthChanged,
    NodeResources,
    Refusal,
    ResizeRefusal,
    ResourcesChanged,
)

SWAP_RESIZE = ("swap_limitation", "In-place resize of containers with swap is not supported.")
RESTART_CONTAINER = "RestartContainer"


def _memory_request(container: Container) -> int:
    asked = container.resources.requests.get("memory") if container.resources else None
    return 0 if asked is None else to_bytes(asked)


def _restarts_for_memory(container: Container) -> bool:
    return any(
        p.resource_name == "memory" and p.restart_policy == RESTART_CONTAINER
        for p in container.resize_policy
    )


class ResourceManagerDefaults(
    ResourceManager,
    Admits,
    AdmitsResize,
    HintProvider,
    ExtendsNode,
    PreparesPod,
    PreparesSandbox,
    ReleasesPod,
    ContributesConfig,
    PreStartHook,
    PostStopHook,
    ReportsDevices,
    ReportsClaims,
    ReportsCpus,
    ReportsMemory,
    ReportsHealth,
    HandlesPlugins,
    Binds,
):
    """Every capability, each doing nothing: what a manager subclassed before it
    declared its capabilities."""

    name = ""

    def admit(self, pod: Pod, others: Sequence[Pod]) -> Refusal | None:
        """Whether ``pod`` may run beside ``others`` (the pods admitted and active)."""
        return None

    def extended_resources(self) -> NodeResources:
        """The resources this manager adds to the node's (device plugins' counts)."""
        return NO_RESOURCES

    def admit_resize(self, pod: Pod, allocated: Pod) -> ResizeRefusal | None:
        """Why ``pod``'s resources can never replace its allocation (``allocated``: the
        pod as it runs) on this node; None: this manager does not mind."""
        return None

    async def prepare_pod(self, pod: Pod) -> None:
        """Before the pod's sandbox, every sync; ``ResourceError`` fails the sync."""
        return None

    async def prepare_sandbox(self, pod: Pod) -> None:
        """Right before a sandbox is created for the pod, its volumes ready and what
        must go killed (upstream's place for DRA's prepare); ``ResourceError`` fails the
        sync before the sandbox."""
        return None

    def container_devices(self, pod_uid: str, container: str) -> Sequence[AssignedDevice]:
        """The devices a container holds (the pod-resources API's List and Get)."""
        return ()

    def allocatable_devices(self) -> Sequence[AssignedDevice]:
        """The devices that can be given (GetAllocatableResources)."""
        return ()

    def dynamic_resources(self, pod: Pod, container: Container) -> Sequence[AssignedClaim]:
        """The ResourceClaims a container uses (pod-resources ``dynamic_resources``)."""
        return ()

    async def release_pod(self, pod: Pod) -> None:
        """After the pod's teardown, once its volumes are gone; errors are the
        manager's to log (housekeeping's sweeps retry)."""
        return None

    def resource_health(self, pod: Pod, container: Container) -> Sequence[ResourceStatus]:
        """The health of the devices this manager gave the container (its status'
        ``allocatedResourcesStatus``, gate ResourceHealthStatus)."""
        return ()

    def contribute(self, pod: Pod, container: Container) -> ContainerContribution:
        """What this manager adds to the container's CRI config."""
        return NO_CONTRIBUTION

    async def pre_start(self, pod: Pod, container: Container, container_id: str) -> None:
        """Between CreateContainer and StartContainer; ``ResourceError`` keeps the
        container from starting (PreStartHookError)."""
        return None

    async def post_stop(self, container_id: str) -> None:
        """Before a stopped container is removed; errors are the manager's to log."""
        return None

    def plugin_handlers(self) -> Mapping[str, PluginHandler]:
        """Plugin type → the plugin watcher's handler for it (DRA: "DRAPlugin")."""
        return {}

    def bind(self, peers: Sequence[ResourceManager]) -> None:
        """Once every manager is started: the managers, in registration order (the
        topology manager collects its hint providers here, the CPU manager finds the
        topology manager whose affinities it allocates within)."""
        return None

    def topology_hints(self, pod: Pod, container: Container) -> TopologyHints:
        """Where this manager could place the container's resources, by resource
        (``hints.TopologyHint``); {}: no preference. Asked at admission, before
        ``admit``, by the topology manager with the ``container`` scope."""
        return {}

    def pod_topology_hints(self, pod: Pod) -> TopologyHints:
        """The same for the whole pod (the ``pod`` scope)."""
        return {}

    def exclusive_cpus(self, pod_uid: str, container: str) -> frozenset[int]:
        """The CPUs given to the container alone (pod-resources ``cpu_ids``)."""
        return frozenset()

    def allocatable_cpus(self) -> frozenset[int]:
        """The CPUs this manager may give exclusively (GetAllocatableResources)."""
        return frozenset()

    def container_memory(self, pod_uid: str, container: str) -> Sequence[AssignedMemory]:
        """The memory bound to NUMA nodes for the container (pod-resources ``memory``)."""
        return ()

    def allocatable_memory(self) -> Sequence[AssignedMemory]:
        """Each NUMA node's allocatable memory per type (GetAllocatableResources)."""
        return ()


class ContainerManager:
    """The node's resources and its resource managers, as the rest of the kubelet asks
    them: one object the pod driver, admission and housekeeping hold."""

    def __init__(
        self,
        resources: NodeResources,
        managers: Sequence[ResourceManager] = (),
        *,
        cgroups: PodCgroups | None = None,
        limits: ContainerLimits | None = None,
        cgroup_root: str = "/",
        changed: ResourcesChanged | None = None,
        health_changed: HealthChanged | None = None,
    ) -> None:
        self.base = resources
        self.changed = changed or ResourcesChanged()
        """subscribe to hear when the managers' extended resources change"""
        self.health_changed = health_changed or HealthChanged()
        """subscribe to hear which pods' devices changed health"""
        self.managers = tuple(managers)
        """the cgroups part first, then ``registry.RESOURCE_MANAGERS``' in order"""
        self.roster = Roster.of(self.managers)
        """the managers by capability: who is asked what"""
        self.cgroups = cgroups
        """the pod cgroups (housekeeping's orphan sweep; None: none are made)"""
        self.limits = limits or ContainerLimits()
        """the node's settings for every container, with its swap and hugepage facts"""
        self.cgroup_root = cgroup_root

    @property
    def resources(self) -> NodeResources:
        """The node's resources with every manager's extended resources."""
        return self.base.with_extended(self.extended())

    def extended(self) -> NodeResources:
        """Only what the managers add (device plugins' resources): node status reports
        these beside the capacity and allocatable it computes itself."""
        out = NO_RESOURCES
        for manager in self.roster.extends_node:
            out = out.with_extended(manager.extended_resources())
        return out

    @property
    def allocatable(self) -> Mapping[str, str]:
        """The node's allocatable: what the downward API's unset limits and memory-backed
        emptyDirs default to (upstream reads the Node's status.allocatable there)."""
        return self.resources.allocatable

    @property
    def memory_capacity(self) -> int:
        return self.base.memory_capacity

    def admit(self, pod: Pod, others: Sequence[Pod]) -> Refusal | None:
        """Upstream's resource allocation admit handler: the first manager's refusal."""
        for manager in self.roster.admits:
            refusal = manager.admit(pod, others)
            if refusal is not None:
                return refusal
        return None

    def admit_resize(self, pod: Pod, allocated: Pod) -> ResizeRefusal | None:
        """Upstream's resize admission of the node's side: a container that swaps (or
        would) resized in memory in place, then each manager's refusal."""
        if self._resizes_swap(pod, allocated):
            return SWAP_RESIZE
        for manager in self.roster.admits_resize:
            refusal = manager.admit_resize(pod, allocated)
            if refusal is not None:
                return refusal
        return None

    def _resizes_swap(self, pod: Pod, allocated: Pod) -> bool:
        swap = self.limits.swap
        was = {c.name: c for c in (*allocated.spec.containers, *allocated.spec.init_containers)}
        for container in (*pod.spec.containers, *pod.spec.init_containers):
            old = was.get(container.name)
            if old is None or _restarts_for_memory(old):
                continue
            if _memory_request(container) != _memory_request(old) and (
                container_swaps(pod, container, swap) or container_swaps(allocated, old, swap)
            ):
                return True
        return False

    def pod_cgroup_parent(self, pod: Pod) -> str:
        """The sandbox's ``cgroup_parent``."""
        if self.cgroups is not None:
            return self.cgroups.parent(pod)
        return pod_cgroup_parent(pod, self.cgroup_root)

    async def resize_pod(self, pod: Pod, resource: str) -> None:
        """An admitted in-place resize: the pod cgroup's ``resource`` ("cpu" or
        "memory") set to ``pod``'s new allocation (``CgroupError`` when refused)."""
        if self.cgroups is not None:
            await self.cgroups.resize(pod, resource)

    async def pod_cgroup_drift(self, pod: Pod) -> dict[str, bool]:
        """The pod cgroup's resources not at ``pod``'s allocation, each with whether the
        resize grows it (pod-level resources resized with no container changing)."""
        if self.cgroups is None:
            return {}
        return await self.cgroups.drift(pod)

    async def pod_memory_headroom(self, pod: Pod) -> tuple[int, int] | None:
        """(the pod cgroup's memory limit from ``pod``'s allocation, its usage now), when
        both are known: a resize never sets a limit below the usage."""
        if self.cgroups is None:
            return None
        return await self.cgroups.memory_headroom(pod)

    async def prepare_pod(self, pod: Pod) -> None:
        for manager in self.roster.prepares_pod:
            await manager.prepare_pod(pod)

    async def prepare_sandbox(self, pod: Pod) -> None:
        for manager in self.roster.prepares_sandbox:
            await manager.prepare_sandbox(pod)

    async def release_pod(self, pod: Pod) -> None:
        for manager in self.roster.releases_pod:
            await manager.release_pod(pod)

    def container_devices(self, pod_uid: str, container: str) -> list[AssignedDevice]:
        return [d for m in self.roster.devices for d in m.container_devices(pod_uid, container)]

    def allocatable_devices(self) -> list[AssignedDevice]:
        return [d for m in self.roster.devices for d in m.allocatable_devices()]

    def dynamic_resources(self, pod: Pod, container: Container) -> list[AssignedClaim]:
        return [c for m in self.roster.claims for c in m.dynamic_resources(pod, container)]

    def resource_health(self, pod: Pod) -> dict[str, tuple[ResourceStatus, ...]]:
        """Container name → the health of its allocated devices, every manager's, for
        the containers that have any."""
        health: dict[str, tuple[ResourceStatus, ...]] = {}
        for container in (*pod.spec.init_containers, *pod.spec.containers):
            found = tuple(s for m in self.roster.health for s in m.resource_health(pod, container))
            if found:
                health[container.name] = found
        return health

    def contribution(self, pod: Pod, container: Container) -> ContainerContribution:
        """Every manager's part of the container's CRI config, merged."""
        return merge_contributions(m.contribute(pod, container) for m in self.roster.contributes)

    async def pre_start(self, pod: Pod, container: Container, container_id: str) -> None:
        for manager in self.roster.pre_start:
            await manager.pre_start(pod, container, container_id)

    async def post_stop(self, container_id: str) -> None:
        for manager in self.roster.post_stop:
            await manager.post_stop(container_id)

    def exclusive_cpus(self, pod_uid: str, container: str) -> frozenset[int]:
        """The container's exclusive CPUs, as the pod-resources API reports them."""
        out: frozenset[int] = frozenset()
        for manager in self.roster.cpus:
            out |= manager.exclusive_cpus(pod_uid, container)
        return out

    def allocatable_cpus(self) -> frozenset[int]:
        out: frozenset[int] = frozenset()
        for manager in self.roster.cpus:
            out |= manager.allocatable_cpus()
        return out

    def container_memory(self, pod_uid: str, container: str) -> list[AssignedMemory]:
        return [b for m in self.roster.memory for b in m.container_memory(pod_uid, container)]

    def allocatable_memory(self) -> list[AssignedMemory]:
        return [b for m in self.roster.memory for b in m.allocatable_memory()]

    def plugin_handlers(self) -> dict[str, PluginHandler]:
        """Every manager's plugin watcher handlers, by plugin type."""
        out: dict[str, PluginHandler] = {}
        for manager in self.roster.plugins:
            out.update(manager.plugin_handlers())
        return out
