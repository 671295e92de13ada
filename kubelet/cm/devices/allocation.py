"""Which devices each container gets: upstream's device manager decisions, pure.

``PodDevices`` is what has been given (pod → container → resource → devices and the
plugin's Allocate answer); ``plan_pod`` picks the devices of a pod being admitted from
the healthy ones nobody holds, init containers first: what an init container held is
handed on to the app containers that follow it (it has finished by then), as upstream's
``devicesToReuse``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping

import attrs

from kubelet.api import Container, Pod, QuantityError, is_restartable_init_container, parse_quantity

NO_TOPOLOGY = -1
"""the NUMA node of a device the plugin gave no topology (upstream's checkpoint key)"""


class AllocationError(Exception):
    """A pod's devices cannot be given; the message is upstream's device manager's."""


@attrs.frozen
class Granted:
    """One container's devices of one resource, and the plugin's Allocate answer (the
    serialized ``ContainerAllocateResponse``; None until the plugin answered)."""

    device_ids: tuple[str, ...]
    response: bytes | None = None


PodDevices = dict[str, dict[str, dict[str, Granted]]]
"""pod UID → container name → resource name → what was granted"""

Order = Callable[[str, str, set[str]], list[str]]
"""(container, resource, free devices) → the order to take them in"""


def _by_id(_container: str, _resource: str, free: set[str]) -> list[str]:
    return sorted(free)


def device_requests(container: Container, resources: Iterable[str]) -> dict[str, int]:
    """How many devices of each plugin resource ``container`` asks (its limits, as
    upstream reads them; extended resources have request == limit)."""
    wanted: dict[str, int] = {}
    known = set(resources)
    limits = container.resources.limits if container.resources is not None else {}
    for name, value in limits.items():
        if name not in known:
            continue
        try:
            count = int(parse_quantity(value).value())
        except (QuantityError, ValueError):
            continue
        if count > 0:
            wanted[name] = count
    return wanted


def held(devices: PodDevices, resource: str, *, skip_pod: str = "") -> set[str]:
    """The devices of ``resource`` some container holds."""
    out: set[str] = set()
    for uid, containers in devices.items():
        if uid == skip_pod:
            continue
        for granted in containers.values():
            if resource in granted:
                out.update(granted[resource].device_ids)
    return out


def _pick(
    resource: str,
    needed: int,
    healthy: set[str],
    reusable: set[str],
    taken: set[str],
    registered: bool,
    order: Callable[[set[str]], list[str]] = sorted,
) -> tuple[str, ...]:
    """``needed`` devices: reusable ones first, then free healthy ones in ``order`` (by
    ID unless the topology affinity says otherwise, so the choice is stable); upstream's
    checks and messages in upstream's order."""
    if not registered:
        raise AllocationError(f"cannot allocate unregistered device {resource}")
    if not healthy:
        raise AllocationError(
            f"no healthy devices present; cannot allocate unhealthy devices {resource}"
        )
    chosen = sorted(reusable & healthy)[:needed]
    free = order(healthy - taken - set(chosen))
    if len(chosen) + len(free) < needed:
        raise AllocationError(
            f"requested number of devices unavailable for {resource}. "
            f"Requested: {needed}, Available: {len(free) + len(chosen)}"
        )
    return tuple(chosen + free[: needed - len(chosen)])


def plan_pod(
    pod: Pod,
    devices: PodDevices,
    healthy: Mapping[str, set[str]],
    registered: Iterable[str],
    order: Order = _by_id,
) -> dict[str, dict[str, Granted]]:
    """Every container's devices for ``pod`` (container → resource → granted), keeping
    what the pod already holds (a restarted kubelet's checkpoint); ``AllocationError``
    when a container's cannot be had. ``devices`` is not changed."""
    known = set(registered) | {r for c in devices.values() for g in c.values() for r in g}
    mine: dict[str, dict[str, Granted]] = {
        name: dict(g) for name, g in devices.get(pod.uid, {}).items()
    }
    reusable: dict[str, set[str]] = {}
    for container in (*pod.spec.init_containers, *pod.spec.containers):
        wanted = device_requests(container, known)
        for resource, count in sorted(wanted.items()):
            prior = mine.get(container.name, {}).get(resource)
            if prior is not None and len(prior.device_ids) == count:
                ids = prior.device_ids
            else:
                taken = held(devices, resource, skip_pod=pod.uid) | {
                    d for g in mine.values() if resource in g for d in g[resource].device_ids
                }
                pool = reusable.get(resource, set())
                ids = _pick(
                    resource,
                    count,
                    set(healthy.get(resource, set())),
                    pool,
                    taken - pool,
                    resource in set(registered),
                    functools.partial(order, container.name, resource),
                )
                mine.setdefault(container.name, {})[resource] = Granted(ids)
            _hand_on(reusable, resource, ids, init=_is_plain_init(pod, container))
    return {name: g for name, g in mine.items() if g}


def _is_plain_init(pod: Pod, container: Container) -> bool:
    return any(c is container for c in pod.spec.init_containers) and not (
        is_restartable_init_container(container)
    )


def _hand_on(
    reusable: dict[str, set[str]], resource: str, ids: Iterable[str], *, init: bool
) -> None:
    """An init container's devices may be reused by the containers after it; an app
    container's (or a sidecar's, which keeps running) may not."""
    pool = reusable.setdefault(resource, set())
    if init:
        pool.update(ids)
    else:
        pool.difference_update(ids)
