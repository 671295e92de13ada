"""What the container manager and its resource managers hand each other: the node's
resources, a refusal, a preparation's failure, the assignments the pod-resources API
reports, and the signals a manager raises when its resources or their health change."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from kubelet.api import QuantityError, to_bytes

Refusal = tuple[str, str]
"""(reason, message) of a pod a resource manager will not admit"""
ResizeRefusal = tuple[str, str]
"""(reason detail, message) of an in-place resize that can never be applied (Infeasible);
the detail is the ``reason_detail`` label of ``kubelet_pod_infeasible_resizes_total``"""


class ResourceError(Exception):
    """A resource manager could not prepare a pod or a container: the sync fails with
    ``reason`` (an event and, for a container, its waiting reason) and is retried."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@attrs.frozen
class NodeResources:
    """What the node offers: ``capacity`` (the machine's) and ``allocatable`` (capacity
    less the reservations, the hard eviction thresholds and hugepages, as node status
    reports it), resource name → quantity."""

    capacity: Mapping[str, str] = attrs.field(factory=dict)
    allocatable: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def memory_capacity(self) -> int:
        """The machine's memory in bytes (the containers' OOM scores are relative to it)."""
        try:
            return to_bytes(self.capacity.get("memory", "0"))
        except (QuantityError, ValueError):
            return 0

    def with_extended(self, extended: NodeResources) -> NodeResources:
        """These resources and a manager's own (its extended resources win a clash)."""
        return NodeResources(
            capacity={**self.capacity, **extended.capacity},
            allocatable={**self.allocatable, **extended.allocatable},
        )


NO_RESOURCES = NodeResources()


@attrs.frozen
class AssignedDevice:
    """One device as the pod-resources API reports it: its resource, its ID and the
    NUMA node it sits on (None: the plugin gave no topology)."""

    resource_name: str
    device_id: str
    numa_node: int | None = None


@attrs.frozen
class AssignedMemory:
    """Memory of one type as the pod-resources API reports it: its size in bytes and
    the NUMA nodes it comes from."""

    memory_type: str
    size: int
    numa_nodes: tuple[int, ...] = ()


@attrs.frozen
class ClaimDevice:
    """One device of a prepared ResourceClaim: who prepared it, where it is from, and
    its CDI device IDs (the pod-resources API's ``ClaimResource``)."""

    driver: str
    pool: str
    device: str
    cdi_ids: tuple[str, ...] = ()


@attrs.frozen
class AssignedClaim:
    """A ResourceClaim a container uses, with its devices (pod-resources'
    ``DynamicResource``)."""

    name: str
    namespace: str
    devices: tuple[ClaimDevice, ...] = ()


class ResourcesChanged:
    """Told when a manager's extended resources change (a device plugin came, went or
    changed its devices), so node status reports them soon rather than at its period."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[], None]] = []

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def __call__(self) -> None:
        for listener in self._listeners:
            listener()


class HealthChanged:
    """Told the UIDs of the pods whose devices changed health (a device plugin's
    ListAndWatch, a DRA driver's health stream), so their status is generated again."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[frozenset[str]], None]] = []

    def subscribe(self, listener: Callable[[frozenset[str]], None]) -> None:
        self._listeners.append(listener)

    def __call__(self, pod_uids: frozenset[str]) -> None:
        if not pod_uids:
            return
        for listener in self._listeners:
            listener(pod_uids)
