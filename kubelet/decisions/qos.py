"""QoS class and OOM score adjustment: who the kernel kills first when memory runs out.

Guaranteed and node-critical pods are killed last (-997), BestEffort first (1000), and
Burstable in between by how much of the node's memory they asked for. Only cpu and
memory count for the class. Pod-level resources (``spec.resources``, PodLevelResources),
when set, decide the class instead of the containers' (API pods carry the class the API
server computed; static pods need it here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from kubelet.api import (
    Container,
    PerObject,
    Pod,
    is_restartable_init_container,
    parse_quantity,
    to_bytes,
)

__all__ = [
    "BESTEFFORT_OOM_SCORE_ADJ",
    "BEST_EFFORT",
    "BURSTABLE",
    "GUARANTEED",
    "GUARANTEED_OOM_SCORE_ADJ",
    "KUBELET_OOM_SCORE_ADJ",
    "KUBE_PROXY_OOM_SCORE_ADJ",
    "POD_INFRA_OOM_SCORE_ADJ",
    "SYSTEM_CRITICAL_PRIORITY",
    "SYSTEM_NODE_CRITICAL",
    "compute_pod_qos",
    "container_oom_score_adj",
    "is_critical_pod",
    "is_node_critical_pod",
    "pod_qos",
]

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

KUBELET_OOM_SCORE_ADJ = -999
KUBE_PROXY_OOM_SCORE_ADJ = -999
POD_INFRA_OOM_SCORE_ADJ = -998
GUARANTEED_OOM_SCORE_ADJ = -997
BESTEFFORT_OOM_SCORE_ADJ = 1000

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
SYSTEM_NODE_CRITICAL = "system-node-critical"

_QOS_RESOURCES = ("cpu", "memory")


def _sum_positive(containers: Iterable[Container], kind: str) -> tuple[dict[str, Fraction], bool]:
    """Per-resource sums of positive quantities, and whether every container set both."""
    totals: dict[str, Fraction] = {}
    all_have_both = True
    for container in containers:
        resources = container.resources
        values = (
            (resources.requests if kind == "requests" else resources.limits) if resources else {}
        )
        found = set()
        for name in _QOS_RESOURCES:
            text = values.get(name)
            if text is None:
                continue
            amount = parse_quantity(text).amount
            if amount > 0:
                found.add(name)
                totals[name] = totals.get(name, Fraction(0)) + amount
        if found != set(_QOS_RESOURCES):
            all_have_both = False
    return totals, all_have_both


def _positive(values: Mapping[str, str]) -> dict[str, Fraction]:
    found = {name: parse_quantity(values[name]).amount for name in _QOS_RESOURCES if name in values}
    return {name: amount for name, amount in found.items() if amount > 0}


def compute_pod_qos(pod: Pod, *, pod_level_resources: bool = True) -> str:
    """Upstream ``ComputePodQOS``: over the pod-level resources when the pod sets them
    (and the gate is on), else over init and regular containers.

    No defaulting here: a container with limits but no requests counts as having no
    requests (the API server defaults requests to limits before the kubelet sees it).
    """
    pod_level = pod.spec.resources if pod_level_resources else None
    if pod_level is not None:
        requests = _positive(pod_level.requests)
        limits = _positive(pod_level.limits)
        if not requests and not limits:
            return BEST_EFFORT
        both = requests == limits and set(limits) == set(_QOS_RESOURCES)
        return GUARANTEED if both else BURSTABLE
    containers = (*pod.spec.containers, *pod.spec.init_containers)
    requests, _ = _sum_positive(containers, "requests")
    limits, all_limited = _sum_positive(containers, "limits")
    if not requests and not limits:
        return BEST_EFFORT
    guaranteed = (
        all_limited
        and len(requests) == len(limits)
        and all(limits.get(name) == amount for name, amount in requests.items())
    )
    return GUARANTEED if guaranteed else BURSTABLE


_computed_qos: PerObject[Pod, str] = PerObject(compute_pod_qos)
"""Admission and the QoS cgroups ask for every active pod's class at each pod start."""


def pod_qos(pod: Pod) -> str:
    """The class recorded in the pod status, else the computed one (``GetPodQOS``)."""
    return pod.status.qos_class or _computed_qos(pod)


def is_critical_pod(pod: Pod) -> bool:
    """Static, mirror, or priority at least system-cluster-critical's (2e9)."""
    if pod.is_static or pod.is_mirror:
        return True
    priority = pod.spec.priority
    return priority is not None and priority >= SYSTEM_CRITICAL_PRIORITY


def is_node_critical_pod(pod: Pod) -> bool:
    """Critical and of priority class ``system-node-critical``."""
    return is_critical_pod(pod) and pod.spec.priority_class_name == SYSTEM_NODE_CRITICAL


def _memory_request(container: Container) -> int:
    if container.resources is None:
        return 0
    return to_bytes(container.resources.requests.get("memory"))


def container_oom_score_adj(pod: Pod, container: Container, memory_capacity: int) -> int:
    """``oom_score_adj`` for a container of ``pod`` on a node with ``memory_capacity`` bytes.

    Burstable: 1000 - 1000*request/capacity, kept within [3, 999] so it stays between
    Guaranteed and BestEffort. A sidecar never scores above the smallest regular
    container, so it is not killed before the containers it serves.
    """
    if is_node_critical_pod(pod):
        return GUARANTEED_OOM_SCORE_ADJ
    qos = pod_qos(pod)
    if qos == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == BEST_EFFORT:
        return BESTEFFORT_OOM_SCORE_ADJ
    if memory_capacity <= 0:
        raise ValueError(f"memory capacity must be positive, got {memory_capacity}")

    def score(request: int) -> int:
        # Go integer division truncates toward zero; requests are never negative.
        return 1000 - (1000 * request) // memory_capacity

    adj = score(_memory_request(container))
    is_sidecar = any(
        c.name == container.name and is_restartable_init_container(c)
        for c in pod.spec.init_containers
    )
    if is_sidecar and pod.spec.containers:
        min_regular = min(_memory_request(c) for c in pod.spec.containers)
        adj = min(adj, score(min_regular))
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if adj == BESTEFFORT_OOM_SCORE_ADJ:
        return adj - 1
    return adj
