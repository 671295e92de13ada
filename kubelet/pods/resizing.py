"""Whether a resize may become a pod's allocation (upstream's resize admission). Pure.

Upstream judges a resize (``handlePodResourcesResize``) with its admission handlers on
the resized pod against the other pods' allocations:

- ``Infeasible`` (never on this node, not retried): a static pod; a QoS class that
  would change (the API refuses it; a kubelet meets it only from an older API server);
  requests beyond the node's allocatable on their own ("Node didn't have enough
  capacity: memory, requested: N, capacity: M", memory checked first, CPU in
  millicores);
- ``Deferred`` (retried as pods leave, shrink, or every few minutes): the requests do
  not fit beside the other pods' now (the scheduler's message, "Node didn't have enough
  resource: cpu, requested: ..., used: ..., capacity: ...");
- else admitted.

Each Infeasible verdict carries upstream's ``reason_detail`` for
``kubelet_pod_infeasible_resizes_total``. The memory manager's ``static`` policy, which
upstream makes Infeasible for a Guaranteed pod's memory, is not offered by this kubelet.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kubelet.api import Pod, parse_quantity
from kubelet.cgroups import pod_requests
from kubelet.decisions import pod_qos, resize

from .admission import AdmissionFacts
from .fit import InsufficientResource, filter_failures

__all__ = ["STATIC_POD", "Verdict", "judge_resize"]

STATIC_POD = "In-place resize of static-pods is not supported"
QOS_CHANGE = "Pod QOS Class may not change as a result of resizing"


@attrs.frozen
class Verdict:
    """Why a resize waits: ``reason`` Deferred or Infeasible, and the message;
    ``detail``: an Infeasible one's metric label."""

    reason: str
    message: str
    detail: str = ""


def _capacity(pod: Pod, facts: AdmissionFacts) -> str | None:
    """The requests against the node's allocatable alone."""
    assert facts.node is not None
    allocatable = facts.node.allocatable
    requests = pod_requests(pod, pod_level_resources=facts.pod_level_resources)

    def amount(name: str) -> tuple[int, int] | None:
        if name not in allocatable:
            return None
        scale = 1000 if name == "cpu" else 1
        asked = int(requests.get(name, 0) * scale)
        have = int(parse_quantity(allocatable[name]).amount * scale)
        return asked, have

    for name in ("memory", "cpu"):
        got = amount(name)
        if got is not None and got[0] > got[1]:
            return (
                f"Node didn't have enough capacity: {name}, requested: {got[0]}, capacity: {got[1]}"
            )
    return None


def judge_resize(
    pod: Pod, allocated: Pod, others: Sequence[Pod], facts: AdmissionFacts
) -> Verdict | None:
    """None: ``pod``'s resources may become its allocation now; else why not.
    ``allocated``: the pod as it runs; ``others``: the other active pods, allocated."""
    if pod.is_static:
        return Verdict(resize.INFEASIBLE, STATIC_POD, "static_pod")
    if pod_qos(pod) != pod_qos(allocated):
        return Verdict(resize.INFEASIBLE, QOS_CHANGE, "qos_class_change")
    try:
        refused = facts.resize_admission(pod, allocated) if facts.resize_admission else None
        if refused is not None:
            return Verdict(resize.INFEASIBLE, refused[1], refused[0])
        if facts.node is None:
            return None
        beyond = _capacity(pod, facts)
        if beyond is not None:
            return Verdict(resize.INFEASIBLE, beyond, "insufficient_node_allocatable")
        failures = filter_failures(
            pod,
            [o for o in others if o.uid != pod.uid],
            facts.node,
            pod_level_resources=facts.pod_level_resources,
            dra_extended_resource=facts.dra_extended_resource,
            comparison_operators=facts.taint_comparison_operators,
        )
    except ValueError as exc:
        return Verdict(resize.INFEASIBLE, str(exc), "invalid_resources")
    short = [f for f in failures if isinstance(f, InsufficientResource)]
    if short:
        return Verdict(resize.DEFERRED, short[0].message)
    return None
