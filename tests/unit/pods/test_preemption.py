"""Critical pod admission preemption: what is missing, who may go, who goes (upstream's
pkg/kubelet/preemption cases, restated)."""

from __future__ import annotations

import pytest

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, Quantity, ResourceRequirements
from kubelet.pods.fit import InsufficientResource, PredicateFailure
from kubelet.pods.preemption import (
    NoVictims,
    Requirement,
    choose_victims,
    preemptable,
    requirements,
)

MI = 1024 * 1024
CRITICAL = 2_000_000_000


def pod(
    name: str,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    priority: int | None = None,
) -> Pod:
    resources = ResourceRequirements(
        requests={k: Quantity(v) for k, v in (requests or {}).items()},
        limits={k: Quantity(v) for k, v in (limits or {}).items()},
    )
    return Pod(
        metadata=ObjectMeta(name=name, namespace="ns", uid=name),
        spec=PodSpec(containers=(Container(name="c", resources=resources),), priority=priority),
    )


ADMIT = pod("critical", {"cpu": "1"}, priority=CRITICAL)
BEST_EFFORT = pod("be")
BURST_200 = pod("b200", {"memory": "200Mi", "cpu": "100m"})
BURST_400 = pod("b400", {"memory": "400Mi", "cpu": "100m"})
GUARANTEED = pod("g1g", {"memory": "1Gi", "cpu": "1"}, {"memory": "1Gi", "cpu": "1"})
OTHER_CRITICAL = pod("dns", {"memory": "2Gi"}, priority=CRITICAL)


def names(pods: list[Pod]) -> list[str]:
    return [p.metadata.name for p in pods]


def test_requirements_are_the_shortfall() -> None:
    failures = [
        InsufficientResource("cpu", 1000, 1500, 2000),
        InsufficientResource("pods", 1, 110, 110),
    ]
    assert requirements(failures) == [Requirement("cpu", 500), Requirement("pods", 1)]
    other = PredicateFailure("NodeAffinity", "node(s) didn't match Pod's node affinity/selector")
    assert requirements([*failures, other]) is None


def test_who_may_be_preempted() -> None:
    assert preemptable(ADMIT, BURST_200)
    assert not preemptable(ADMIT, OTHER_CRITICAL)  # never another critical pod
    assert preemptable(pod("hi", priority=10), pod("lo", priority=5))
    assert not preemptable(pod("hi", priority=10), pod("eq", priority=10))
    assert not preemptable(pod("hi", priority=10), pod("none"))


def test_the_nearest_burstable_pod_before_any_guaranteed_one() -> None:
    others = [BEST_EFFORT, BURST_200, BURST_400, GUARANTEED, OTHER_CRITICAL]
    assert names(choose_victims(ADMIT, others, [Requirement("memory", 300 * MI)])) == ["b400"]


def test_a_pod_count_is_freed_by_a_best_effort_pod_first() -> None:
    others = [GUARANTEED, BURST_200, BEST_EFFORT]
    assert names(choose_victims(ADMIT, others, [Requirement("pods", 1)])) == ["be"]


def test_guaranteed_pods_go_only_for_what_the_others_cannot_free() -> None:
    others = [BURST_200, GUARANTEED]
    victims = choose_victims(ADMIT, others, [Requirement("cpu", 1050)])
    assert names(victims) == ["b200", "g1g"]


def test_equal_distance_prefers_the_smaller_request() -> None:
    small = pod("small", {"memory": "100Mi"})
    large = pod("large", {"memory": "200Mi"})
    assert names(choose_victims(ADMIT, [large, small], [Requirement("memory", 50 * MI)])) == [
        "small"
    ]


def test_no_set_of_pods_is_an_error_naming_what_is_left() -> None:
    with pytest.raises(NoVictims) as caught:
        choose_victims(ADMIT, [BURST_200, OTHER_CRITICAL], [Requirement("memory", 1024 * MI)])
    assert str(caught.value) == (
        f"no set of running pods found to reclaim resources: [(res: memory, q: {824 * MI}), ]"
    )
