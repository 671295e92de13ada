"""status.declaredFeatures: only what this kubelet does (KEP-5328, upstream's registry)."""

from __future__ import annotations

import attrs

from kubelet.api import NodeStatus, from_wire, to_wire
from kubelet.config import GATE_SUPPORT, FeatureGates
from kubelet.config.support import _is, ok, partial
from kubelet.node import declared_features
from kubelet.node.declared import (
    EXTEND_WEBSOCKETS,
    GUARANTEED_CPU_RESIZE,
    NOT_DECLARED,
    POD_LEVEL_RESIZE,
)
from kubelet.node.status import node_status

from .test_status import FACTS

DONE = {**GATE_SUPPORT, EXTEND_WEBSOCKETS: ok("both halves")}


BOTH = (EXTEND_WEBSOCKETS, GUARANTEED_CPU_RESIZE, POD_LEVEL_RESIZE)


def test_extend_websockets_is_declared_only_once_both_halves_are_done() -> None:
    assert declared_features(FeatureGates()) == BOTH  # both halves are here
    half = {**GATE_SUPPORT, EXTEND_WEBSOCKETS: partial("the tunnel only", _is(False))}
    assert declared_features(FeatureGates(), half) == (GUARANTEED_CPU_RESIZE, POD_LEVEL_RESIZE)
    assert declared_features(FeatureGates(), DONE) == BOTH
    off = FeatureGates({EXTEND_WEBSOCKETS: False})
    assert declared_features(off, DONE) == (GUARANTEED_CPU_RESIZE, POD_LEVEL_RESIZE)


def test_guaranteed_cpu_resize_is_declared_as_resize_is_applied() -> None:
    assert GUARANTEED_CPU_RESIZE in declared_features(FeatureGates())


def test_nothing_is_declared_with_the_gate_off() -> None:
    assert declared_features(FeatureGates({"NodeDeclaredFeatures": False}), DONE) == ()


def test_what_upstream_declares_and_this_kubelet_does_not() -> None:
    gates = FeatureGates(
        {
            "InPlacePodLevelResourcesVerticalScaling": True,
            "InPlacePodVerticalScalingExclusiveCPUs": True,
        }
    )
    assert not set(declared_features(gates, DONE)) & set(NOT_DECLARED)


def test_the_node_status_carries_them_as_declared_features() -> None:
    facts = attrs.evolve(FACTS, declared_features=(EXTEND_WEBSOCKETS,))
    status = node_status(None, facts, "2026-01-01T00:00:00Z")
    wire = to_wire(status)
    assert wire["declaredFeatures"] == [EXTEND_WEBSOCKETS]
    assert from_wire(NodeStatus, wire).declared_features == (EXTEND_WEBSOCKETS,)
    assert "declaredFeatures" not in to_wire(node_status(None, FACTS, "2026-01-01T00:00:00Z"))


def test_the_static_cpu_manager_does_not_declare_guaranteed_cpu_resize() -> None:
    static = declared_features(FeatureGates(), DONE, cpu_manager_policy="static")
    assert GUARANTEED_CPU_RESIZE not in static
    assert GUARANTEED_CPU_RESIZE in declared_features(FeatureGates(), DONE)


def test_pod_level_resize_is_declared_with_its_gate() -> None:
    assert POD_LEVEL_RESIZE in declared_features(FeatureGates(), DONE)
    off = FeatureGates({POD_LEVEL_RESIZE: False})
    assert POD_LEVEL_RESIZE not in declared_features(off, DONE)
