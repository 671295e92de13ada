"""``--cloud-provider=external``: registration and addresses as upstream's kubelet."""

from __future__ import annotations

import attrs

from kubelet.api import NodeAddress, NodeStatus, Taint
from kubelet.node.registration import initial_node
from kubelet.node.status import node_status

from .test_status import FACTS

NOW = "2027-01-15T08:00:00Z"


def test_an_external_cloud_provider_registers_with_the_uninitialized_taint() -> None:
    node = initial_node(
        "node1",
        labels={},
        taints=(Taint(key="dedicated", value="db", effect="NoExecute"),),
        external_cloud_provider=True,
        node_ip="10.0.0.5",
    )
    assert node.spec.taints == (
        Taint(key="dedicated", value="db", effect="NoExecute"),
        Taint(key="node.cloudprovider.kubernetes.io/uninitialized", value="true",
              effect="NoSchedule"),
    )  # fmt: skip
    assert node.metadata.annotations["alpha.kubernetes.io/provided-node-ip"] == "10.0.0.5"
    plain = initial_node("node1", labels={}, node_ip="10.0.0.5")
    assert plain.spec.taints == ()
    assert "alpha.kubernetes.io/provided-node-ip" not in plain.metadata.annotations


def test_addresses_set_by_the_cloud_provider_are_kept() -> None:
    external = attrs.evolve(FACTS, external_cloud_provider=True)
    ours = node_status(None, external, NOW).addresses
    assert [a.address for a in ours] == ["10.0.0.5", "node1"]
    from_ccm = (NodeAddress(type="InternalIP", address="192.168.1.7"),)
    kept = node_status(NodeStatus(addresses=from_ccm), external, NOW).addresses
    assert kept == from_ccm
    # without --node-ip the provider sets them: none until it does
    waiting = attrs.evolve(external, node_ip_given=False)
    assert node_status(None, waiting, NOW).addresses == ()
    # no cloud provider: the kubelet's own, whatever was there
    assert node_status(NodeStatus(addresses=from_ccm), FACTS, NOW).addresses == ours
