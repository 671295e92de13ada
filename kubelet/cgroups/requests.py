"""What a pod asks for: its summed requests and limits, as upstream's resource helpers count.

Regular containers run together, so they add up. Init containers run one at a time, but
a sidecar (an init container with ``restartPolicy: Always``) keeps running: while the
i-th init container runs, the pod uses it plus every sidecar declared before it, and
sidecars run beside the regular containers to the end. The pod needs the larger of
(regular containers + all sidecars) and the largest of those init-time sums. Pod-level
``spec.resources`` (cpu, memory and hugepages) replace the container sums when set, and
the RuntimeClass ``overhead`` is added on top (to limits only where a limit is set).

Amounts are exact (``Fraction``); ``milli`` and ``whole`` round up as upstream's
``MilliValue`` and ``Value`` do. In-place resize and DRA claims are not modelled (the
pod spec is the truth here), which is what upstream computes for a pod without them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction

from kubelet.api import (
    Container,
    Pod,
    ResourceQuantity,
    is_qualified_name,
    is_restartable_init_container,
    parse_quantity,
)

__all__ = [
    "HUGEPAGES_PREFIX",
    "ResourceList",
    "hugepage_size",
    "is_extended_resource",
    "is_pod_level_limits_set",
    "is_pod_level_requests_set",
    "is_pod_level_resources_set",
    "is_scalar_resource",
    "milli",
    "pod_limits",
    "pod_requests",
    "resource_limit",
    "resource_request",
    "whole",
]

ResourceList = dict[str, Fraction]
ContainerFn = Callable[[Mapping[str, Fraction], bool], None]
"""Called with each container's contribution to the limits; the flag: an init container."""

HUGEPAGES_PREFIX = "hugepages-"
_POD_LEVEL = ("cpu", "memory")
_NATIVE_DOMAIN = "kubernetes.io/"
_ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"


def _away(numerator: int, denominator: int) -> int:
    """numerator/denominator rounded away from zero (integer arithmetic: this runs for
    every active pod at every pod start)."""
    if numerator >= 0:
        return -(-numerator // denominator)  # ceiling
    return numerator // denominator  # floor


def milli(amount: Fraction) -> int:
    """Thousandths, rounded away from zero (``MilliValue``)."""
    return _away(amount.numerator * 1000, amount.denominator)


def whole(amount: Fraction) -> int:
    """Units, rounded away from zero (``Value``)."""
    return _away(amount.numerator, amount.denominator)


def is_supported_pod_level(name: str) -> bool:
    return name in _POD_LEVEL or name.startswith(HUGEPAGES_PREFIX)


def _parse(values: Mapping[str, str]) -> ResourceList:
    return {name: parse_quantity(text).amount for name, text in values.items()}


def _add(into: ResourceList, more: Mapping[str, Fraction]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, Fraction(0)) + amount


def _max(into: ResourceList, more: Mapping[str, Fraction]) -> None:
    for name, amount in more.items():
        if name not in into or amount > into[name]:
            into[name] = amount


def _aggregate(
    pod: Pod,
    pick: Callable[[Container], ResourceList],
    on_container: ContainerFn | None = None,
) -> ResourceList:
    """Regular containers summed, then the sidecar-aware maximum over init containers."""
    result: ResourceList = {}
    for container in pod.spec.containers:
        own = pick(container)
        if on_container is not None:
            on_container(own, False)
        _add(result, own)
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in pod.spec.init_containers:
        own = pick(container)
        if is_restartable_init_container(container):
            _add(result, own)
            _add(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
        if on_container is not None:
            on_container(running, True)
        _max(init_peak, running)
    _max(result, init_peak)
    return result


def _requests_of(container: Container) -> ResourceList:
    return _parse(container.resources.requests) if container.resources else {}


def _limits_of(container: Container) -> ResourceList:
    return _parse(container.resources.limits) if container.resources else {}


def _pod_level(values: Mapping[str, str]) -> bool:
    return any(is_supported_pod_level(name) for name in values)


def is_pod_level_requests_set(pod: Pod) -> bool:
    res = pod.spec.resources
    return res is not None and _pod_level(res.requests)


def is_pod_level_limits_set(pod: Pod) -> bool:
    res = pod.spec.resources
    return res is not None and _pod_level(res.limits)


def is_pod_level_resources_set(pod: Pod) -> bool:
    return is_pod_level_requests_set(pod) or is_pod_level_limits_set(pod)


def _apply_pod_level(result: ResourceList, values: Mapping[str, str]) -> None:
    for name, text in values.items():
        if is_supported_pod_level(name):
            result[name] = parse_quantity(text).amount


def pod_requests(
    pod: Pod,
    *,
    pod_level_resources: bool = True,
    exclude_overhead: bool = False,
    non_missing: Mapping[str, Fraction] | None = None,
    skip_container_level: bool = False,
) -> ResourceList:
    """Upstream ``PodRequests``. ``non_missing``: amounts assumed for a container that does
    not name the resource at all (the scheduler's non-zero defaults).
    ``skip_container_level``: the containers are not read at all, only the pod level."""

    def pick(container: Container) -> ResourceList:
        own = _requests_of(container)
        if non_missing:
            for name, amount in non_missing.items():
                own.setdefault(name, amount)
        return own

    result = {} if skip_container_level else _aggregate(pod, pick)
    if pod_level_resources and is_pod_level_requests_set(pod):
        assert pod.spec.resources is not None
        _apply_pod_level(result, pod.spec.resources.requests)
    if not exclude_overhead and pod.spec.overhead:
        _add(result, _parse(pod.spec.overhead))
    return result


def pod_limits(
    pod: Pod,
    *,
    pod_level_resources: bool = True,
    exclude_overhead: bool = False,
    on_container: ContainerFn | None = None,
) -> ResourceList:
    """Upstream ``PodLimits``: overhead is added only to limits that are set and non-zero."""
    result = _aggregate(pod, _limits_of, on_container)
    if pod_level_resources and is_pod_level_resources_set(pod):
        assert pod.spec.resources is not None
        _apply_pod_level(result, pod.spec.resources.limits)
    if not exclude_overhead and pod.spec.overhead:
        for name, amount in _parse(pod.spec.overhead).items():
            if result.get(name):
                result[name] += amount
    return result


def resource_request(pod: Pod, name: str, *, pod_level_resources: bool = True) -> Fraction:
    """Upstream ``GetResourceRequestQuantity``, the figure eviction ranks by: with pod-level
    resources set the containers are not read at all, and the overhead is added only to
    a request that is not zero."""
    skip = pod_level_resources and is_pod_level_resources_set(pod)
    requests = pod_requests(
        pod,
        pod_level_resources=pod_level_resources,
        exclude_overhead=True,
        skip_container_level=skip,
    )
    amount = requests.get(name, Fraction(0))
    overhead = pod.spec.overhead.get(name)
    if overhead is not None and amount != 0:
        amount += parse_quantity(overhead).amount
    return amount


def resource_limit(pod: Pod, name: str) -> ResourceQuantity | None:
    """The pod's limit for ``name`` (upstream ``PodLimits``), None when no container sets
    one; printed in the suffix family of the first container limit (as Go's
    ``Quantity.Add`` keeps the receiver's format)."""
    amount = pod_limits(pod).get(name)
    if amount is None:
        return None
    for container in (*pod.spec.containers, *pod.spec.init_containers):
        text = container.resources.limits.get(name) if container.resources else None
        if text is not None:
            return ResourceQuantity(amount, parse_quantity(text).format)
    return ResourceQuantity(amount)


# -- resource names ---------------------------------------------------------------------------


def hugepage_size(name: str) -> int | None:
    """Page size in bytes of a ``hugepages-<size>`` resource, None for other resources."""
    if not name.startswith(HUGEPAGES_PREFIX):
        return None
    return parse_quantity(name[len(HUGEPAGES_PREFIX) :]).value()


def _is_native(name: str) -> bool:
    return "/" not in name or _NATIVE_DOMAIN in name


def is_extended_resource(name: str) -> bool:
    """A resource some device plugin or operator defines: ``<domain>/<name>`` outside
    ``kubernetes.io``, and not ``requests.*``."""
    if _is_native(name) or name.startswith("requests."):
        return False
    return is_qualified_name("requests." + name)


def is_scalar_resource(name: str) -> bool:
    """Counted one by one by the scheduler's bookkeeping: extended, hugepages, prefixed
    native (``*kubernetes.io/*``) and attachable-volume resources."""
    return (
        is_extended_resource(name)
        or name.startswith(HUGEPAGES_PREFIX)
        or ("/" in name and _NATIVE_DOMAIN in name)
        or name.startswith(_ATTACHABLE_VOLUMES_PREFIX)
    )
