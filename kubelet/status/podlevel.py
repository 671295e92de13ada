"""The pod-level ``status.resources`` and ``status.allocatedResources``
(``InPlacePodLevelResourcesVerticalScaling``). Pure.

Upstream reports, for a pod as it runs (its allocation): ``allocatedResources``, the
pod's requests (``PodRequests``: the pod-level ones where set, else the containers'
sum, with the overhead); ``resources``, the pod-level resources with their requests and
limits so aggregated. This kubelet reports them for a pod that sets pod-level resources,
from its allocation (upstream reads a running pod's CPU and memory limit back from its
cgroup; the pod cgroup is brought to the allocation at each sync here, so they agree
once a resize is done).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from kubelet.api import (
    Format,
    Pod,
    Quantity,
    ResourceRequirements,
    format_quantity,
    parse_quantity,
)
from kubelet.cgroups import is_pod_level_resources_set, pod_limits, pod_requests

__all__ = ["pod_level_status"]


def _quantities(amounts: Mapping[str, Fraction], written: Mapping[str, str]) -> dict[str, Quantity]:
    """Each amount as the pod wrote it where it is that amount, else canonical."""
    out: dict[str, Quantity] = {}
    for name, amount in sorted(amounts.items()):
        text = written.get(name)
        if text is None or _amount(text) != amount:
            fmt = Format.DECIMAL_SI if name == "cpu" else Format.BINARY_SI
            text = format_quantity(amount, fmt)
        out[name] = Quantity(text)
    return out


def _amount(text: str) -> Fraction | None:
    try:
        return parse_quantity(text).amount
    except ValueError:
        return None


def pod_level_status(
    allocated: Pod,
) -> tuple[ResourceRequirements | None, dict[str, Quantity] | None]:
    """(``status.resources``, ``status.allocatedResources``) of ``allocated`` (the pod
    as it runs); (None, None) for a pod without pod-level resources."""
    if not is_pod_level_resources_set(allocated):
        return None, None
    spec = allocated.spec.resources or ResourceRequirements()
    requests = _quantities(pod_requests(allocated), spec.requests)
    limits = _quantities(pod_limits(allocated), spec.limits)
    return ResourceRequirements(limits=limits, requests=requests, claims=spec.claims), requests
