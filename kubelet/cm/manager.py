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
    ContainerContribution,
    ContainerLimits,
    container_swaps,
    merge_contributions,
    pod_cgroup_parent,
)
from kubelet.pluginmanager import PluginHandler

from .capabilities import ResourceManager, Roster
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
