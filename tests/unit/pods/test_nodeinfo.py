"""The Node as admission reads it: our own before (or without) the API, the API's after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubelet.api import Taint
from kubelet.config import resolve
from kubelet.node import MachineInfo, NodeIdentity
from kubelet.pods import local_node, node_info_source

MACHINE = MachineInfo(
    num_cores=4,
    memory_bytes=8 * 1024**3,
    hugepages={},
    machine_id="m",
    system_uuid="u",
    boot_id="b",
    kernel_version="6.1.0",
    os_image="Debian",
    operating_system="linux",
    architecture="amd64",
    hostname="node1",
)
IDENTITY = NodeIdentity(name="node1", hostname="node1", ips=("10.0.0.5",))


def test_local_node_labels_taints_and_allocatable(tmp_path: Path) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "systemReserved: {cpu: 500m, memory: 1Gi}\nkubeReserved: {cpu: 250m, memory: 512Mi}\n"
        "registerWithTaints: [{key: dedicated, value: db, effect: NoExecute}]\nmaxPods: 30\n"
    )
    options = resolve(
        [f"--config={config}", f"--root-dir={tmp_path}", "--node-labels=zone=a"],
        hostname=lambda: "node1",
    )
    node = local_node(options, IDENTITY, MACHINE)
    assert node.name == "node1"
    assert node.labels["kubernetes.io/os"] == "linux"
    assert node.labels["zone"] == "a"
    assert node.taints == (Taint(key="dedicated", value="db", effect="NoExecute"),)
    # both reservations are subtracted (summed), and the 100Mi hard eviction threshold
    assert node.allocatable["cpu"] == "3250m"
    assert node.allocatable["memory"] == "6556Mi"  # 8Gi - 1.5Gi - 100Mi
    assert node.allocatable["pods"] == "30"
    assert "ephemeral-storage" in node.allocatable


def test_the_api_node_wins_once_there_is_one() -> None:
    options = resolve(["--root-dir=/nonexistent-root"], hostname=lambda: "node1")
    local = local_node(options, IDENTITY, MACHINE)
    current: list[dict[str, Any] | None] = [None]
    source = node_info_source(local, lambda: current[0])
    assert source() is local
    current[0] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node1", "labels": {"kubernetes.io/os": "linux", "gpu": "yes"}},
        "spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}},
    }
    seen = source()
    assert seen.labels["gpu"] == "yes"
    assert seen.taints == (Taint(key="maintenance", effect="NoExecute"),)
    assert seen.allocatable == {"cpu": "2", "memory": "4Gi", "pods": "10"}
    assert source() is seen  # one conversion per API object
