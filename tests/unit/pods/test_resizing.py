"""Resize admission: fits, Deferred beside the others, Infeasible on its own."""

from __future__ import annotations

import attrs

from kubelet.api import Pod, Quantity, ResourceRequirements
from kubelet.pods.admission import AdmissionFacts
from kubelet.pods.fit import NodeInfo
from kubelet.pods.resizing import QOS_CHANGE, STATIC_POD, Verdict, judge_resize
from kubelet.testing.builders import make_container, make_pod

NODE = NodeInfo(name="n", allocatable={"cpu": "2", "memory": "1Gi", "pods": "110"})
FACTS = AdmissionFacts(node=NODE)


def pod(cpu: str, memory: str = "64Mi", uid: str = "u1", limits: bool = True) -> Pod:
    amounts = {"cpu": Quantity(cpu), "memory": Quantity(memory)}
    resources = ResourceRequirements(requests=amounts, limits=amounts if limits else {})
    return make_pod(make_container("app", resources=resources), uid=uid)


def test_a_resize_that_fits_is_admitted() -> None:
    assert judge_resize(pod("1500m"), pod("1"), [pod("500m", uid="u2")], FACTS) is None


def test_a_resize_that_does_not_fit_beside_the_others_is_deferred() -> None:
    verdict = judge_resize(pod("1500m"), pod("1"), [pod("800m", uid="u2")], FACTS)
    assert verdict == Verdict(
        "Deferred",
        "Node didn't have enough resource: cpu, requested: 1500, used: 800, capacity: 2000",
    )


def test_a_resize_beyond_the_node_is_infeasible_memory_first() -> None:
    assert judge_resize(pod("3"), pod("1"), [], FACTS) == Verdict(
        "Infeasible",
        "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000",
        "insufficient_node_allocatable",
    )
    assert judge_resize(pod("3", "2Gi"), pod("1"), [], FACTS) == Verdict(
        "Infeasible",
        "Node didn't have enough capacity: memory, requested: 2147483648, capacity: 1073741824",
        "insufficient_node_allocatable",
    )


def test_a_qos_class_change_or_a_static_pod_is_infeasible() -> None:
    burstable = pod("1", limits=False)
    assert judge_resize(burstable, pod("1"), [], FACTS) == Verdict(
        "Infeasible", QOS_CHANGE, "qos_class_change"
    )
    static = pod("1500m")
    static = attrs.evolve(
        static,
        metadata=attrs.evolve(static.metadata, annotations={"kubernetes.io/config.source": "file"}),
    )
    assert judge_resize(static, pod("1"), [], FACTS) == Verdict(
        "Infeasible", STATIC_POD, "static_pod"
    )


def test_the_container_managers_refusal_is_infeasible_before_the_capacity() -> None:
    swap = ("swap_limitation", "In-place resize of containers with swap is not supported.")
    facts = attrs.evolve(FACTS, resize_admission=lambda p, a: swap)
    assert judge_resize(pod("3"), pod("1"), [], facts) == Verdict(
        "Infeasible", swap[1], "swap_limitation"
    )
    assert judge_resize(pod("1500m"), pod("1"), [], attrs.evolve(facts, node=None)) is not None
