"""QoS class and OOM score adjustment, test vectors OOM-01..12 (policy_test.go)."""

from __future__ import annotations

import attrs
import pytest

from kubelet.api import (
    Container,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    Quantity,
    ResourceRequirements,
)
from kubelet.decisions import BEST_EFFORT, BURSTABLE, GUARANTEED, is_critical_pod, pod_qos
from kubelet.decisions.qos import compute_pod_qos, container_oom_score_adj, is_node_critical_pod


def vector(*ids: str) -> pytest.MarkDecorator:
    """Put the test-vector IDs into the test IDs."""
    return pytest.mark.parametrize("vid", ids)


def res(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> ResourceRequirements:
    return ResourceRequirements(
        requests={k: Quantity(v) for k, v in (requests or {}).items()},
        limits={k: Quantity(v) for k, v in (limits or {}).items()},
    )


def pod_of(
    *containers: Container,
    init: tuple[Container, ...] = (),
    priority: int | None = None,
    priority_class: str = "",
    annotations: dict[str, str] | None = None,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace="ns", uid="u", annotations=annotations or {}),
        spec=PodSpec(
            containers=containers,
            init_containers=init,
            priority=priority,
            priority_class_name=priority_class,
        ),
    )


def single(
    resources: ResourceRequirements | None,
    *,
    priority: int | None = None,
    priority_class: str = "",
    annotations: dict[str, str] | None = None,
) -> tuple[Pod, Container]:
    c = Container(name="c", resources=resources)
    pod = pod_of(c, priority=priority, priority_class=priority_class, annotations=annotations)
    return pod, c


@pytest.mark.parametrize(
    ("vid", "resources", "capacity", "low", "high"),
    [
        ("OOM-01 cpu-limit", res(limits={"cpu": "10"}), 4_000_000_000, 999, 999),
        (
            "OOM-02 memory-limit-cpu-request",
            res(requests={"cpu": "0"}, limits={"memory": "10G"}),
            8_000_000_000,
            999,
            999,
        ),
        ("OOM-03 zero-memory-limit", res(limits={"memory": "0"}), 7230457451, 1000, 1000),
        ("OOM-04 no-request-limit", None, 4_000_000_000, 1000, 1000),
        (
            "OOM-05 equal-request-limit",
            res(requests={"cpu": "5m", "memory": "10G"}, limits={"cpu": "5m", "memory": "10G"}),
            123456789,
            -997,
            -997,
        ),
        (
            "OOM-06 request-less-than-limit",
            res(requests={"memory": "4G"}, limits={"memory": "10G"}),
            8_000_000_000,
            495,
            505,
        ),
        (
            "OOM-07 near-capacity",
            res(requests={"memory": str(8_000_000_000 - 1)}),
            8_000_000_000,
            3,
            3,
        ),
        ("OOM-10 burstable", res(requests={"memory": "1G"}), 8_000_000_000, 875, 880),
    ],
)
def test_oom_score_adj(
    vid: str, resources: ResourceRequirements | None, capacity: int, low: int, high: int
) -> None:
    pod, c = single(resources)
    assert low <= container_oom_score_adj(pod, c, capacity) <= high, vid


@vector("OOM-08")
def test_oom08_cluster_critical_is_not_node_critical(vid: str) -> None:
    pod, c = single(None, priority=2_000_000_000, priority_class="system-cluster-critical")
    assert is_critical_pod(pod) and not is_node_critical_pod(pod)
    assert container_oom_score_adj(pod, c, 4_000_000_000) == 1000


@vector("OOM-09")
def test_oom09_node_critical(vid: str) -> None:
    pod, c = single(None, priority=2_000_001_000, priority_class="system-node-critical")
    assert is_node_critical_pod(pod)
    assert container_oom_score_adj(pod, c, 4_000_000_000) == -997


def sidecar_pod(sidecar_request: str) -> tuple[Pod, Container, Container]:
    sidecar = Container(
        name="sidecar", restart_policy="Always", resources=res(requests={"memory": sidecar_request})
    )
    main = Container(name="main", resources=res(requests={"memory": "1G"}))
    return pod_of(main, init=(sidecar,)), sidecar, main


@vector("OOM-11")
def test_oom11_sidecar_keeps_own_lower_score(vid: str) -> None:
    pod, sidecar, main = sidecar_pod("4G")
    assert container_oom_score_adj(pod, sidecar, 8_000_000_000) == 500
    assert container_oom_score_adj(pod, main, 8_000_000_000) == 875


@vector("OOM-12")
def test_oom12_sidecar_capped_to_main(vid: str) -> None:
    pod, sidecar, main = sidecar_pod("400M")
    assert container_oom_score_adj(pod, sidecar, 8_000_000_000) == 875
    assert container_oom_score_adj(pod, main, 8_000_000_000) == 875


def test_plain_init_container_not_treated_as_sidecar() -> None:
    init = Container(name="init", resources=res(requests={"memory": "400M"}))
    main = Container(name="main", resources=res(requests={"memory": "1G"}))
    pod = pod_of(main, init=(init,))
    assert container_oom_score_adj(pod, init, 8_000_000_000) == 950


def test_static_pod_with_node_critical_class() -> None:
    pod, c = single(
        None,
        priority_class="system-node-critical",
        annotations={"kubernetes.io/config.source": "file"},
    )
    assert pod.is_static and is_node_critical_pod(pod)
    assert container_oom_score_adj(pod, c, 1) == -997
    api_pod, _ = single(None, annotations={"kubernetes.io/config.source": "api"})
    assert not api_pod.is_static and not is_critical_pod(api_pod)


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        ((Container(name="a"),), BEST_EFFORT),
        ((Container(name="a", resources=res(limits={"memory": "0"})),), BEST_EFFORT),
        ((Container(name="a", resources=res(requests={"nvidia.com/gpu": "1"})),), BEST_EFFORT),
        (
            (
                Container(
                    name="a",
                    resources=res({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),
                ),
            ),
            GUARANTEED,
        ),
        (
            (
                Container(
                    name="a",
                    resources=res(
                        {"cpu": "1000m", "memory": "1024Mi"}, {"cpu": "1", "memory": "1Gi"}
                    ),
                ),
            ),
            GUARANTEED,
        ),
        # limits only: upstream does not default requests here, so Burstable
        ((Container(name="a", resources=res(limits={"cpu": "1", "memory": "1Gi"})),), BURSTABLE),
        (
            (
                Container(
                    name="a",
                    resources=res({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),
                ),
                Container(name="b"),
            ),
            BURSTABLE,
        ),
        ((Container(name="a", resources=res({"cpu": "1"}, {"cpu": "2"})),), BURSTABLE),
    ],
)
def test_compute_pod_qos(containers: tuple[Container, ...], expected: str) -> None:
    assert compute_pod_qos(pod_of(*containers)) == expected


def test_init_containers_count_for_qos() -> None:
    guaranteed = res({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})
    pod = pod_of(Container(name="a", resources=guaranteed), init=(Container(name="i"),))
    assert compute_pod_qos(pod) == BURSTABLE


def test_status_class_wins() -> None:
    pod = pod_of(Container(name="a"))
    recorded = Pod(metadata=pod.metadata, spec=pod.spec, status=PodStatus(qos_class=GUARANTEED))
    assert pod_qos(pod) == BEST_EFFORT
    assert pod_qos(recorded) == GUARANTEED


BOTH = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("pod_level", "expected"),
    [
        (res(BOTH, BOTH), GUARANTEED),  # the containers ask nothing; the pod level decides
        (res({"cpu": "1"}, {"cpu": "1"}), BURSTABLE),  # memory left out
        (res(BOTH), BURSTABLE),  # requests without limits
        (res({"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"}), BURSTABLE),
        (res(), BEST_EFFORT),  # set, but empty: still the pod level that decides
        (res({"hugepages-2Mi": "2Mi"}, {"hugepages-2Mi": "2Mi"}), BEST_EFFORT),
    ],
)
def test_pod_level_resources_decide_the_class(
    pod_level: ResourceRequirements, expected: str
) -> None:
    containers = (Container(name="a", resources=res({"cpu": "100m"})),)
    pod = pod_of(*containers)
    pod = Pod(metadata=pod.metadata, spec=attrs.evolve(pod.spec, resources=pod_level))
    assert compute_pod_qos(pod) == expected
    # with the PodLevelResources gate off the containers decide
    assert compute_pod_qos(pod, pod_level_resources=False) == BURSTABLE
