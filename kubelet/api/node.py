"""Node, Lease and Event: the objects a kubelet writes about itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .meta import ObjectMeta
from .pod import Quantity


@attrs.frozen(kw_only=True)
class Taint:
    key: str
    effect: str
    value: str = ""
    time_added: str | None = None


@attrs.frozen(kw_only=True)
class NodeSpec:
    pod_cidr: str = ""
    pod_cidrs: tuple[str, ...] = ()
    provider_id: str = attrs.field(default="", metadata={"wire": "providerID"})
    unschedulable: bool | None = None
    taints: tuple[Taint, ...] = ()


@attrs.frozen(kw_only=True)
class NodeAddress:
    type: str
    address: str


@attrs.frozen(kw_only=True)
class NodeCondition:
    type: str
    status: str
    last_heartbeat_time: str | None = None
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


@attrs.frozen(kw_only=True)
class DaemonEndpoint:
    port: int = attrs.field(default=0, metadata={"wire": "Port"})


@attrs.frozen(kw_only=True)
class NodeDaemonEndpoints:
    kubelet_endpoint: DaemonEndpoint | None = None


@attrs.frozen(kw_only=True)
class NodeSystemInfo:
    machine_id: str = ""
    system_uuid: str = ""
    boot_id: str = ""
    kernel_version: str = ""
    os_image: str = ""
    container_runtime_version: str = ""
    kubelet_version: str = ""
    kube_proxy_version: str = ""
    operating_system: str = ""
    architecture: str = ""


@attrs.frozen(kw_only=True)
class ContainerImage:
    names: tuple[str, ...] = ()
    size_bytes: int | None = None


@attrs.frozen(kw_only=True)
class NodeStatus:
    capacity: Mapping[str, Quantity] = attrs.field(factory=dict)
    allocatable: Mapping[str, Quantity] = attrs.field(factory=dict)
    phase: str = ""
    conditions: tuple[NodeCondition, ...] = ()
    addresses: tuple[NodeAddress, ...] = ()
    daemon_endpoints: NodeDaemonEndpoints | None = None
    node_info: NodeSystemInfo | None = None
    images: tuple[ContainerImage, ...] = ()
    volumes_in_use: tuple[str, ...] = ()
    volumes_attached: tuple[Any, ...] = ()
    config: Mapping[str, Any] | None = None
    runtime_handlers: tuple[Any, ...] = ()
    features: Mapping[str, Any] | None = None
    declared_features: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Node:
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: NodeSpec = attrs.field(factory=NodeSpec)
    status: NodeStatus = attrs.field(factory=NodeStatus)


@attrs.frozen(kw_only=True)
class LeaseSpec:
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int | None = None


@attrs.frozen(kw_only=True)
class Lease:
    api_version: str = "coordination.k8s.io/v1"
    kind: str = "Lease"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: LeaseSpec = attrs.field(factory=LeaseSpec)


@attrs.frozen(kw_only=True)
class ObjectReference:
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""
    field_path: str = ""


@attrs.frozen(kw_only=True)
class EventSource:
    component: str = ""
    host: str = ""


@attrs.frozen(kw_only=True)
class Event:
    """core/v1 Event, as the kubelet's recorder writes it."""

    api_version: str = "v1"
    kind: str = "Event"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    involved_object: ObjectReference = attrs.field(factory=ObjectReference)
    reason: str = ""
    message: str = ""
    source: EventSource | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    count: int | None = None
    type: str = ""
    event_time: str | None = None
    reporting_component: str = ""
    reporting_instance: str = ""
