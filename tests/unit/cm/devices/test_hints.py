"""The device manager's topology hints and its allocation order within an affinity."""

from __future__ import annotations

from kubelet.api import Container, ResourceRequirements
from kubelet.cm.devices.allocation import plan_pod
from kubelet.cm.devices.hints import by_affinity, device_hints, has_topology
from kubelet.cm.hints import TopologyHint
from kubelet.testing.builders import make_pod

NODES = (0, 1)
TWO_A_NODE = {"a0": (0,), "a1": (0,), "b0": (1,), "b1": (1,)}


def test_devices_without_numa_nodes_have_no_preference() -> None:
    assert not has_topology({"d0": (), "d1": ()})
    assert has_topology({"d0": (), "d1": (1,)})


def test_hints_prefer_the_fewest_numa_nodes_that_hold_the_request() -> None:
    everything = set(TWO_A_NODE)
    assert device_hints(NODES, TWO_A_NODE, everything, 2) == [
        TopologyHint(0b01, True),
        TopologyHint(0b10, True),
        TopologyHint(0b11, False),
    ]
    # node 0's devices are held: only node 1 (or both) can hold two
    assert device_hints(NODES, TWO_A_NODE, {"a1", "b0", "b1"}, 2) == [
        TopologyHint(0b10, True),
        TopologyHint(0b11, False),
    ]
    # three need both nodes, which is then the narrowest
    assert device_hints(NODES, TWO_A_NODE, everything, 3) == [TopologyHint(0b11, True)]
    # one free on each node: two fit only across both, not preferred (one node could)
    assert device_hints(NODES, TWO_A_NODE, {"a0", "b0"}, 2) == [TopologyHint(0b11, False)]


def test_hints_keep_devices_to_reuse_inside_the_mask() -> None:
    hints = device_hints(NODES, TWO_A_NODE, {"b0"}, 2, reusable={"a0"})
    assert hints == [TopologyHint(0b11, False)]


def test_devices_on_the_affinity_come_first_then_others_then_those_without_nodes() -> None:
    nodes = {**TWO_A_NODE, "x": ()}
    assert by_affinity(nodes, set(nodes), (1,)) == ["b0", "b1", "a0", "a1", "x"]
    assert by_affinity(nodes, set(nodes), None) == ["a0", "a1", "b0", "b1", "x"]


def test_admission_picks_devices_in_the_given_order() -> None:
    pod = make_pod(
        Container(name="app", image="i", resources=ResourceRequirements(limits={"r": "1"}))
    )
    by_id = plan_pod(pod, {}, {"r": set(TWO_A_NODE)}, ["r"])
    assert by_id["app"]["r"].device_ids == ("a0",)
    aligned = plan_pod(
        pod,
        {},
        {"r": set(TWO_A_NODE)},
        ["r"],
        lambda _c, _r, free: by_affinity(TWO_A_NODE, free, (1,)),
    )
    assert aligned["app"]["r"].device_ids == ("b0",)
