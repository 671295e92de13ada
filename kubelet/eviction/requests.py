"""What a pod asked for, as eviction ranking reads it (upstream ``GetResourceRequestQuantity``).

Regular containers and sidecars (restartable init containers) add up; an ordinary init
container counts alone, with the sidecars started before it, and the pod asks for the
larger of the two. Pod-level resources (``spec.resources``, gate PodLevelResources)
replace the containers' figures for cpu and memory. Pod overhead is added when the total
is not zero. ``kubelet/cgroups/requests.py`` computes the same sum for the cgroup values;
the two must agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from kubelet.api.pod import Container, Pod
from kubelet.api.quantity import ResourceQuantity, parse_quantity

__all__ = ["POD_LEVEL_RESOURCES", "container_request", "pod_limit", "pod_request"]

POD_LEVEL_RESOURCES = ("cpu", "memory")
"""What ``spec.resources`` may set (hugepages too upstream; not modelled here)."""


def container_request(container: Container, resource: str) -> Fraction | None:
    """The container's request for ``resource``; None when it asks for none."""
    if container.resources is None:
        return None
    text = container.resources.requests.get(resource)
    return None if text is None else parse_quantity(text).amount


def _sum(containers: Iterable[Container], resource: str) -> Fraction:
    return sum((container_request(c, resource) or Fraction(0) for c in containers), Fraction(0))


def _containers_request(pod: Pod, resource: str) -> Fraction:
    total = _sum(pod.spec.containers, resource)
    sidecars = Fraction(0)
    init_peak = Fraction(0)
    for init in pod.spec.init_containers:
        own = container_request(init, resource) or Fraction(0)
        if init.restart_policy == "Always":
            sidecars += own
            total += own
        else:
            init_peak = max(init_peak, own + sidecars)
    return max(total, init_peak)


def pod_level_set(pod: Pod) -> bool:
    """Whether ``spec.resources`` sets a request or limit for cpu or memory."""
    r = pod.spec.resources
    if r is None:
        return False
    return any(name in r.requests or name in r.limits for name in POD_LEVEL_RESOURCES)


def pod_request(pod: Pod, resource: str, pod_level_resources: bool = True) -> Fraction:
    """The pod's request for ``resource`` (0 when nothing asks for it).

    With pod-level resources set, the containers' figures are not read at all (as
    upstream's ranking does): a resource the pod level cannot set counts as 0.
    """
    if pod_level_resources and pod_level_set(pod):
        assert pod.spec.resources is not None
        text = pod.spec.resources.requests.get(resource)
        use = text is not None and resource in POD_LEVEL_RESOURCES
        amount = parse_quantity(text).amount if use and text is not None else Fraction(0)
    else:
        amount = _containers_request(pod, resource)
    overhead = pod.spec.overhead.get(resource)
    if overhead is not None and amount != 0:
        amount += parse_quantity(overhead).amount
    return amount


def _limit(container: Container, resource: str) -> ResourceQuantity | None:
    if container.resources is None:
        return None
    text = container.resources.limits.get(resource)
    return None if text is None else parse_quantity(text)


def pod_limit(pod: Pod, resource: str) -> ResourceQuantity | None:
    """The pod's limit for ``resource`` as upstream's ``PodLimits`` sums it; None if unset.

    Regular containers and sidecars add up, an init container counts with the sidecars
    before it, the larger wins, overhead is added. The sum prints in the suffix family
    of the first limit found (as Go's ``Quantity.Add`` keeps the receiver's format).
    """
    found: list[ResourceQuantity] = []
    total = Fraction(0)
    for c in pod.spec.containers:
        q = _limit(c, resource)
        if q is not None:
            found.append(q)
            total += q.amount
    sidecars = Fraction(0)
    init_peak = Fraction(0)
    for init in pod.spec.init_containers:
        q = _limit(init, resource)
        own = q.amount if q is not None else Fraction(0)
        if q is not None:
            found.append(q)
        if init.restart_policy == "Always":
            sidecars += own
            total += own
        else:
            init_peak = max(init_peak, own + sidecars)
    if not found:
        return None
    amount = max(total, init_peak)
    overhead = pod.spec.overhead.get(resource)
    if overhead is not None:
        amount += parse_quantity(overhead).amount
    return ResourceQuantity(amount, found[0].format)
