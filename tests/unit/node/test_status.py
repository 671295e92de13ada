"""Node status setters: conditions, capacity/allocatable, addresses, images, info."""

from __future__ import annotations

import attrs
import pytest

from kubelet.api import NodeCondition, NodeStatus
from kubelet.node import MachineInfo, NodeFacts
from kubelet.node.status import Image, differs_beyond_heartbeats, is_ready, node_images, node_status

MACHINE = MachineInfo(
    num_cores=2,
    memory_bytes=8 * 1024**3,
    hugepages={"2Mi": 2 * 1024**2 * 64},
    machine_id="m",
    system_uuid="u",
    boot_id="b",
    kernel_version="6.1.0",
    os_image="Debian GNU/Linux 12 (bookworm)",
    operating_system="linux",
    architecture="amd64",
    hostname="node1",
)
FACTS = NodeFacts(
    machine=MACHINE,
    node_ips=("10.0.0.5",),
    ephemeral_storage_bytes=100 * 1024**3,
    reserved={"cpu": "100m", "memory": "256Mi"},
    eviction_memory_bytes=100 * 1024**2,
    eviction_nodefs_bytes=10 * 1024**3,
    runtime_name="containerd",
    runtime_version="1.6.20",
    kubelet_version="v1.36.0",
)
T0, T1 = "2026-11-21T10:00:00Z", "2026-11-21T10:00:10Z"


def conditions(status: NodeStatus) -> dict[str, NodeCondition]:
    return {c.type: c for c in status.conditions}


def test_ready_node_conditions_in_upstream_order_and_texts() -> None:
    status = node_status(None, FACTS, T0)
    assert [c.type for c in status.conditions] == [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    ]
    c = conditions(status)
    assert (c["Ready"].status, c["Ready"].reason, c["Ready"].message) == (
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    )
    assert (
        c["MemoryPressure"].status,
        c["MemoryPressure"].reason,
        c["MemoryPressure"].message,
    ) == (
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    )
    assert c["DiskPressure"].reason == "KubeletHasNoDiskPressure"
    assert c["PIDPressure"].message == "kubelet has sufficient PID available"
    assert is_ready(status)


def test_transition_time_moves_only_on_change_heartbeat_always() -> None:
    first = node_status(None, FACTS, T0)
    second = node_status(first, FACTS, T1)
    r = conditions(second)["Ready"]
    assert (r.last_transition_time, r.last_heartbeat_time) == (T0, T1)
    assert not differs_beyond_heartbeats(first, second)
    broken = attrs.evolve(
        FACTS,
        network_errors=(
            "container runtime network not ready: NetworkReady=false "
            "reason:NetworkPluginNotReady message:cni plugin not initialized",
        ),
    )
    third = node_status(second, broken, "2026-11-21T10:00:20Z")
    r = conditions(third)["Ready"]
    assert (r.status, r.reason) == ("False", "KubeletNotReady")
    assert r.message.startswith("container runtime network not ready: NetworkReady=false")
    assert r.last_transition_time == "2026-11-21T10:00:20Z"
    assert differs_beyond_heartbeats(second, third)


def test_not_ready_messages_are_joined() -> None:
    facts = attrs.evolve(
        FACTS,
        runtime_errors=(
            "container runtime is down",
            "PLEG is not healthy: pleg has yet to be successful",
        ),
    )
    r = conditions(node_status(None, facts, T0))["Ready"]
    assert (
        r.message == "container runtime is down, PLEG is not healthy: pleg has yet to be successful"
    )


@pytest.mark.parametrize(
    ("field", "ctype", "reason", "message"),
    [
        (
            "memory_pressure",
            "MemoryPressure",
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available",
        ),
        ("disk_pressure", "DiskPressure", "KubeletHasDiskPressure", "kubelet has disk pressure"),
        (
            "pid_pressure",
            "PIDPressure",
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available",
        ),
    ],
)
def test_pressure_conditions(field: str, ctype: str, reason: str, message: str) -> None:
    c = conditions(node_status(None, attrs.evolve(FACTS, **{field: True}), T0))[ctype]
    assert (c.status, c.reason, c.message) == ("True", reason, message)


def test_foreign_conditions_are_kept_first() -> None:
    previous = NodeStatus(conditions=(NodeCondition(type="NetworkUnavailable", status="False"),))
    status = node_status(previous, FACTS, T0)
    assert status.conditions[0].type == "NetworkUnavailable"
    assert status.conditions[-1].type == "Ready"


def test_capacity_and_allocatable() -> None:
    status = node_status(None, FACTS, T0)
    assert status.capacity == {
        "cpu": "2",
        "memory": "8Gi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
        "hugepages-2Mi": "128Mi",
    }
    # memory: 8Gi − 256Mi reserved − 100Mi eviction − 128Mi hugepages
    assert status.allocatable["memory"] == "7708Mi"
    assert status.allocatable["cpu"] == "1900m"
    assert status.allocatable["ephemeral-storage"] == "90Gi"
    assert status.allocatable["pods"] == "110"


def test_allocatable_never_negative() -> None:
    facts = attrs.evolve(FACTS, reserved={"memory": "100Gi"})
    assert node_status(None, facts, T0).allocatable["memory"] == "0"


def test_missing_capacity_makes_the_node_not_ready() -> None:
    facts = attrs.evolve(FACTS, machine=attrs.evolve(MACHINE, memory_bytes=0))
    status = node_status(None, facts, T0)
    assert is_ready(status)  # zero is still a value; missing means absent
    from kubelet.node.status import ready_errors

    assert ready_errors(FACTS, {"cpu": "1"}) == [
        "Missing node capacity for resources: memory, pods"
    ]


def test_addresses_info_endpoints() -> None:
    status = node_status(None, FACTS, T0)
    assert [(a.type, a.address) for a in status.addresses] == [
        ("InternalIP", "10.0.0.5"),
        ("Hostname", "node1"),
    ]
    assert status.daemon_endpoints is not None
    assert status.daemon_endpoints.kubelet_endpoint.port == 10250  # type: ignore[union-attr]
    info = status.node_info
    assert info is not None
    assert info.container_runtime_version == "containerd://1.6.20"
    assert (info.kubelet_version, info.operating_system, info.architecture) == (
        "v1.36.0",
        "linux",
        "amd64",
    )


def test_images_largest_first_capped_with_five_names() -> None:
    images = [Image(names=tuple(f"n{i}-{j}" for j in range(7)), size_bytes=i) for i in range(60)]
    out = node_images(images, 50)
    assert len(out) == 50
    assert out[0].size_bytes == 59
    assert len(out[0].names) == 5
    assert len(node_images(images, -1)) == 60


def test_volumes_in_use_are_reported_sorted_and_a_change_is_due_at_once() -> None:
    before = node_status(None, FACTS, T0)
    assert before.volumes_in_use == ()
    facts = attrs.evolve(
        FACTS, volumes_in_use=("kubernetes.io/csi/b.example^v2", "kubernetes.io/csi/a.example^v1")
    )
    after = node_status(before, facts, T0)
    assert after.volumes_in_use == (
        "kubernetes.io/csi/a.example^v1",
        "kubernetes.io/csi/b.example^v2",
    )
    assert differs_beyond_heartbeats(before, after)
