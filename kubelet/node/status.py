"""Node status as upstream's setters compute it: pure functions of facts and the past.

``node_status(previous, facts, now)`` returns the new NodeStatus; it never does I/O.
Conditions the kubelet owns come in upstream's order (MemoryPressure, DiskPressure,
PIDPressure, Ready, Ready last) after any condition someone else set; a condition's
lastTransitionTime moves only when its status changes, lastHeartbeatTime every time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import attrs

from kubelet.api import (
    ContainerImage,
    DaemonEndpoint,
    Format,
    NodeAddress,
    NodeCondition,
    NodeDaemonEndpoints,
    NodeStatus,
    NodeSystemInfo,
    Quantity,
    format_quantity,
    parse_quantity,
)

from .machine import MachineInfo

MAX_NAMES_PER_IMAGE = 5

READY = "Ready"
MEMORY_PRESSURE = "MemoryPressure"
DISK_PRESSURE = "DiskPressure"
PID_PRESSURE = "PIDPressure"
OWNED_CONDITIONS = (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE, READY)

_PRESSURE_TEXT = {
    MEMORY_PRESSURE: (
        ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
        ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ),
    DISK_PRESSURE: (
        ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ),
    PID_PRESSURE: (
        ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
        ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ),
}


@attrs.frozen(kw_only=True)
class Image:
    names: tuple[str, ...]
    size_bytes: int


@attrs.frozen(kw_only=True)
class NodeFacts:
    """Everything a status computation needs, gathered by the caller."""

    machine: MachineInfo
    node_ips: tuple[str, ...] = ()
    hostname: str = ""
    max_pods: int = 110
    ephemeral_storage_bytes: int | None = None
    reserved: Mapping[str, str] = attrs.field(factory=dict)
    """systemReserved + kubeReserved, resource → quantity"""
    eviction_memory_bytes: int = 0
    eviction_nodefs_bytes: int = 0
    runtime_name: str = ""
    runtime_version: str = ""
    kubelet_version: str = ""
    kubelet_port: int = 10250
    declared_features: tuple[str, ...] = ()
    """``status.declaredFeatures`` (declared.py)"""
    images: tuple[Image, ...] = ()
    max_images: int = 50
    runtime_errors: tuple[str, ...] = ()
    """why the runtime is not usable, in upstream's wording (empty when it is)"""
    network_errors: tuple[str, ...] = ()
    memory_pressure: bool = False
    disk_pressure: bool = False
    pid_pressure: bool = False
    external_cloud_provider: bool = False
    """--cloud-provider=external: the cloud-controller-manager owns the addresses"""
    node_ip_given: bool = True
    """--node-ip was given (else the addresses come from the hostname)"""
    extended_capacity: Mapping[str, str] = attrs.field(factory=dict)
    """the container manager's extended resources (device plugins' devices, all)"""
    extended_allocatable: Mapping[str, str] = attrs.field(factory=dict)
    """... and those of them that can be given (the healthy devices)"""
    volumes_in_use: tuple[str, ...] = ()
    """attachable volumes mounted or to be mounted (``status.volumesInUse``)"""


def capacity(facts: NodeFacts) -> dict[str, Quantity]:
    m = facts.machine
    out: dict[str, Quantity] = {
        "cpu": Quantity(str(m.num_cores)),
        "memory": Quantity(format_quantity(m.memory_bytes, Format.BINARY_SI)),
        "pods": Quantity(str(facts.max_pods)),
    }
    if facts.ephemeral_storage_bytes is not None:
        out["ephemeral-storage"] = Quantity(
            format_quantity(facts.ephemeral_storage_bytes, Format.BINARY_SI)
        )
    for size, total in sorted(m.hugepages.items()):
        out[f"hugepages-{size}"] = Quantity(format_quantity(total, Format.BINARY_SI))
    for name, value in sorted(facts.extended_capacity.items()):
        out.setdefault(name, Quantity(value))
    return out


def allocatable(facts: NodeFacts, cap: Mapping[str, Quantity]) -> dict[str, Quantity]:
    """Capacity minus reservations and the hard eviction thresholds, never negative;
    an extended resource's is what its manager says (the healthy devices)."""
    out: dict[str, Quantity] = {}
    hugepages_total = sum(
        parse_quantity(v).amount for k, v in cap.items() if k.startswith("hugepages-")
    )
    for name, value in cap.items():
        if name in facts.extended_allocatable:
            out[name] = Quantity(facts.extended_allocatable[name])
            continue
        amount = parse_quantity(value).amount
        reserved = facts.reserved.get(name)
        if reserved is not None:
            amount -= parse_quantity(reserved).amount
        if name == "memory":
            amount -= facts.eviction_memory_bytes + hugepages_total
        elif name == "ephemeral-storage":
            amount -= facts.eviction_nodefs_bytes
        amount = max(amount, Fraction(0))
        fmt = Format.DECIMAL_SI if name in ("cpu", "pods") else Format.BINARY_SI
        if name == "cpu" and amount.denominator != 1:
            out[name] = Quantity(f"{int(amount * 1000)}m")
        else:
            out[name] = Quantity(format_quantity(amount, fmt))
    return out


def addresses(facts: NodeFacts) -> tuple[NodeAddress, ...]:
    """InternalIP(s) first, then Hostname, as upstream's NodeAddress setter orders them."""
    out = [NodeAddress(type="InternalIP", address=ip) for ip in facts.node_ips]
    out.append(NodeAddress(type="Hostname", address=facts.hostname or facts.machine.hostname))
    return tuple(out)


def reported_addresses(
    previous: Sequence[NodeAddress], facts: NodeFacts
) -> tuple[NodeAddress, ...]:
    """Ours; with an external cloud provider, those already set (by the provider) stay, and
    without ``--node-ip`` none are set: the provider will (upstream's NodeAddress setter)."""
    if facts.external_cloud_provider:
        if previous:
            return tuple(previous)
        if not facts.node_ip_given:
            return ()
    return addresses(facts)


def node_info(facts: NodeFacts) -> NodeSystemInfo:
    m = facts.machine
    runtime = f"{facts.runtime_name}://{facts.runtime_version}" if facts.runtime_name else ""
    return NodeSystemInfo(
        machine_id=m.machine_id,
        system_uuid=m.system_uuid,
        boot_id=m.boot_id,
        kernel_version=m.kernel_version,
        os_image=m.os_image,
        container_runtime_version=runtime,
        kubelet_version=facts.kubelet_version,
        operating_system=m.operating_system,
        architecture=m.architecture,
    )


def node_images(images: Sequence[Image], max_images: int) -> tuple[ContainerImage, ...]:
    """Largest first, at most ``max_images`` (-1: all), at most 5 names each."""
    ordered = sorted(images, key=lambda i: i.size_bytes, reverse=True)
    if max_images >= 0:
        ordered = ordered[:max_images]
    return tuple(
        ContainerImage(names=i.names[:MAX_NAMES_PER_IMAGE], size_bytes=i.size_bytes)
        for i in ordered
    )


def missing_capacity(cap: Mapping[str, Quantity]) -> list[str]:
    return [r for r in ("cpu", "memory", "pods") if r not in cap]


def ready_errors(facts: NodeFacts, cap: Mapping[str, Quantity]) -> list[str]:
    errors = [*facts.runtime_errors, *facts.network_errors]
    missing = missing_capacity(cap)
    if missing:
        errors.append("Missing node capacity for resources: " + ", ".join(missing))
    return errors


def _transition(
    old: NodeCondition | None, ctype: str, status: str, reason: str, message: str, now: str
) -> NodeCondition:
    unchanged = old is not None and old.status == status
    transition = old.last_transition_time if old is not None and unchanged else now
    return NodeCondition(
        type=ctype,
        status=status,
        reason=reason,
        message=message,
        last_heartbeat_time=now,
        last_transition_time=transition,
    )


def conditions(
    previous: Sequence[NodeCondition], facts: NodeFacts, cap: Mapping[str, Quantity], now: str
) -> tuple[NodeCondition, ...]:
    by_type = {c.type: c for c in previous}
    foreign = [c for c in previous if c.type not in OWNED_CONDITIONS]
    owned: list[NodeCondition] = []
    pressures = {
        MEMORY_PRESSURE: facts.memory_pressure,
        DISK_PRESSURE: facts.disk_pressure,
        PID_PRESSURE: facts.pid_pressure,
    }
    for ctype, pressure in pressures.items():
        (true_reason, true_msg), (false_reason, false_msg) = _PRESSURE_TEXT[ctype]
        if pressure:
            cond = _transition(by_type.get(ctype), ctype, "True", true_reason, true_msg, now)
        else:
            cond = _transition(by_type.get(ctype), ctype, "False", false_reason, false_msg, now)
        owned.append(cond)
    errors = ready_errors(facts, cap)
    if errors:
        ready = _transition(
            by_type.get(READY), READY, "False", "KubeletNotReady", ", ".join(errors), now
        )
    else:
        ready = _transition(
            by_type.get(READY),
            READY,
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
            now,
        )
    owned.append(ready)
    return (*foreign, *owned)


def node_status(previous: NodeStatus | None, facts: NodeFacts, now: str) -> NodeStatus:
    """The status the kubelet reports now (``now``: RFC 3339, whole seconds)."""
    prev = previous or NodeStatus()
    cap = capacity(facts)
    return attrs.evolve(
        prev,
        capacity=cap,
        allocatable=allocatable(facts, cap),
        conditions=conditions(prev.conditions, facts, cap, now),
        addresses=reported_addresses(prev.addresses, facts),
        daemon_endpoints=NodeDaemonEndpoints(
            kubelet_endpoint=DaemonEndpoint(port=facts.kubelet_port)
        ),
        node_info=node_info(facts),
        images=node_images(facts.images, facts.max_images),
        declared_features=facts.declared_features,
        volumes_in_use=tuple(sorted(facts.volumes_in_use)),
    )


def is_ready(status: NodeStatus) -> bool:
    return any(c.type == READY and c.status == "True" for c in status.conditions)


def differs_beyond_heartbeats(old: NodeStatus | None, new: NodeStatus) -> bool:
    """Whether a PATCH is due for a reason other than the report frequency."""
    if old is None:
        return True

    def strip(status: NodeStatus) -> NodeStatus:
        return attrs.evolve(
            status,
            conditions=tuple(attrs.evolve(c, last_heartbeat_time=None) for c in status.conditions),
        )

    return strip(old) != strip(new)
