"""The device manager's topology hints and its allocation order within an affinity
(upstream's ``generateDeviceTopologyHints`` and ``filterByAffinity``). Pure.

A resource none of whose devices reports NUMA nodes has no preference. Otherwise every
combination of the machine's NUMA nodes whose devices (available, plus those the
container already holds) number at least the request is a hint, preferred when it has
as few nodes as the smallest combination whose devices, free or not, could hold it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kubelet.api import Container, Pod, is_restartable_init_container

from ..hints import TopologyHint, iterate_masks, mask_count, mask_of

DeviceNodes = Mapping[str, tuple[int, ...]]
"""device ID → the NUMA nodes the plugin reported for it (empty: none)"""


def has_topology(devices: DeviceNodes) -> bool:
    """Whether any device of the resource reports NUMA nodes (upstream's
    ``deviceHasTopologyAlignment``)."""
    return any(devices.values())


def device_hints(
    nodes: Sequence[int],
    devices: DeviceNodes,
    available: Iterable[str],
    request: int,
    reusable: Iterable[str] = (),
) -> list[TopologyHint]:
    """The hints of one resource for ``request`` devices out of ``available``
    (``reusable`` devices must all lie within a hint's nodes)."""
    available, reusable = set(available), set(reusable)
    narrowest = len(nodes)
    found: list[int] = []
    for mask in iterate_masks(nodes):
        within = {d for d, n in devices.items() if mask_of(n) & mask}
        if len(within) >= request:
            narrowest = min(narrowest, mask_count(mask))
        placed = [d for d in reusable if devices.get(d)]
        if any(d not in within for d in placed):
            continue
        if len(placed) + len(available & within) >= request:
            found.append(mask)
    return [TopologyHint(m, mask_count(m) == narrowest) for m in found]


def by_affinity(
    devices: DeviceNodes, candidates: Iterable[str], affinity: Sequence[int] | None
) -> list[str]:
    """``candidates`` in the order they should be taken: those on the affinity's NUMA
    nodes, then those on other nodes, then those without NUMA nodes; by ID within each."""
    if affinity is None:
        return sorted(candidates)
    wanted = mask_of(affinity)

    def rank(device: str) -> tuple[int, str]:
        mask = mask_of(devices.get(device, ()))
        return (2 if not mask else 0 if mask & wanted else 1, device)

    return sorted(candidates, key=rank)


def pod_device_requests(pod: Pod, per_container: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """The pod's devices at its peak, per resource: the larger of its biggest init
    container (with the sidecars started before it) and its app containers with all
    sidecars (upstream's pod limits)."""
    out: dict[str, int] = {}
    resources = {r for wanted in per_container.values() for r in wanted}
    for resource in resources:
        init_peak, sidecars = 0, 0
        for c in pod.spec.init_containers:
            count = per_container.get(c.name, {}).get(resource, 0)
            if is_restartable_init_container(c):
                sidecars += count
                init_peak = max(init_peak, sidecars)
            else:
                init_peak = max(init_peak, sidecars + count)
        app = sum(per_container.get(c.name, {}).get(resource, 0) for c in pod.spec.containers)
        out[resource] = max(init_peak, app + sidecars)
    return out


def containers(pod: Pod) -> tuple[Container, ...]:
    return (*pod.spec.init_containers, *pod.spec.containers)
