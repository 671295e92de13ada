"""Cgroup values as upstream's container manager computes them, and their file spellings.

``ResourceConfig`` is what one cgroup should be limited to (upstream's type of the same
name); ``None`` means "leave as it is". Computed here, without I/O:

- a pod cgroup (``ResourceConfigForPod``): cpu shares from the summed cpu requests
  (2 for BestEffort); CFS quota and period for Guaranteed pods, and for Burstable pods
  only when every container (and init container) has a cpu limit; the memory limit on
  the same rule; hugetlb limits from hugepage requests, every other page size 0;
  ``pids.max`` from ``podPidsLimit`` when positive;
- the QoS cgroups (``UpdateCgroups``): BestEffort 2 shares, Burstable the shares of the
  summed cpu requests of the Burstable pods, hugetlb unbounded (1<<62), and with the
  alpha ``QOSReserved`` gate memory limits that keep ``qosReserved`` percent of the
  higher classes' memory requests away from the lower classes;
- ``kubepods`` (``enforceNodeAllocatable`` has "pods"): capacity minus
  ``systemReserved`` and ``kubeReserved`` as cpu shares, memory, pids and hugetlb limits
  (without the eviction thresholds, unlike the reported allocatable); else capacity;
- the reserved cgroups (``system-reserved``/``kube-reserved``): the reservation itself,
  or only cpu shares for the ``-compressible`` enforcements.

File spellings (libcontainer's, which upstream writes through):

=====================  ===========================  ===============================
value                  cgroup v1                    cgroup v2
=====================  ===========================  ===============================
cpu shares             cpu/cpu.shares               cpu.weight = 1 + (s-2)*9999/262142
cpu quota / period     cpu.cfs_period_us, _quota_us cpu.max "<quota|max> <period>"
memory                 memory/memory.limit_in_bytes memory.max (-1 → max)
pids                   pids/pids.max (≤0 → max)     pids.max
hugetlb (per size)     hugetlb.2MB.limit_in_bytes   hugetlb.2MB.max
=====================  ===========================  ===============================

The cpu.weight formula is the one the kubelet writes for its own cgroups (containers'
cgroups are the runtime's, and newer runc maps shares differently).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

import attrs

from kubelet.api import Pod

from .names import BEST_EFFORT, BURSTABLE, GUARANTEED
from .requests import (
    ResourceList,
    hugepage_size,
    is_pod_level_resources_set,
    milli,
    pod_limits,
    pod_requests,
    whole,
)

__all__ = [
    "CPU_PERIOD",
    "HUGEPAGES_UNBOUNDED",
    "MAX_SHARES",
    "MIN_QUOTA",
    "MIN_SHARES",
    "PIDS",
    "ResourceConfig",
    "hugepage_limits",
    "hugepage_unit",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "node_allocatable",
    "node_allocatable_config",
    "pod_memory_limit",
    "qos_configs",
    "reserved_config",
    "resource_config_for_pod",
    "shares_to_weight",
    "v1_files",
    "v2_files",
]

MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
CPU_PERIOD = 100_000
MIN_QUOTA = 1000
HUGEPAGES_UNBOUNDED = 1 << 62
PIDS = "pid"
"""The internal resource name for process IDs (``systemReserved: {pid: "1000"}``)."""

_UNITS = ("B", "KB", "MB", "GB", "TB", "PB")


@attrs.frozen
class ResourceConfig:
    """What to set on one cgroup; None leaves the current value alone."""

    cpu_shares: int | None = None
    cpu_quota: int | None = None
    """µs per period; -1: unlimited"""
    cpu_period: int | None = None
    memory: int | None = None
    """bytes; -1: unlimited"""
    pids_limit: int | None = None
    hugepage_limits: Mapping[int, int] = attrs.field(factory=dict)
    """page size in bytes → limit in bytes"""


# -- conversions ------------------------------------------------------------------------------


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """1024 shares per cpu, within [2, 262144]; no request means 2, not the kernel's 1024."""
    if milli_cpu == 0:
        return MIN_SHARES
    shares = milli_cpu * SHARES_PER_CPU // 1000
    return max(MIN_SHARES, min(MAX_SHARES, shares))


def milli_cpu_to_quota(milli_cpu: int, period: int = CPU_PERIOD) -> int:
    """CFS quota over ``period`` µs, at least 1 ms; 0 when there is no limit."""
    if milli_cpu == 0:
        return 0
    return max(milli_cpu * period // 1000, MIN_QUOTA)


def shares_to_weight(shares: int) -> int:
    """cgroup v2 ``cpu.weight`` for v1 shares: [2, 262144] → [1, 10000] (KEP 2254)."""
    if shares >= MAX_SHARES:
        return 10000
    return 1 + ((shares - 2) * 9999) // 262142


def hugepage_unit(page_size: int) -> str:
    """2097152 → "2MB", as cgroup file names spell a page size."""
    size, index = page_size, 0
    while size % 1024 == 0 and index < len(_UNITS) - 1:
        size //= 1024
        index += 1
    if size > 1024 and index < len(_UNITS) - 1:
        raise ValueError(
            f"size: {size}{_UNITS[index]} must be guaranteed to divisible into the largest units"
        )
    return f"{size}{_UNITS[index]}"


def hugepage_limits(resources: Mapping[str, Fraction]) -> dict[int, int]:
    """``hugepages-<size>`` amounts → page size in bytes → bytes (upstream ``HugePageLimits``)."""
    out: dict[int, int] = {}
    for name, amount in resources.items():
        size = hugepage_size(name)
        if size is not None:
            out[size] = out.get(size, 0) + whole(amount)
    return out


# -- pod cgroups ------------------------------------------------------------------------------


def _declared_limits(pod: Pod, pod_level_resources: bool) -> tuple[ResourceList, dict[str, bool]]:
    """The pod's limits, and whether cpu and memory limits hold for every container (or
    are set at the pod level): only then does a Burstable pod's cgroup get them."""
    declared = {"cpu": True, "memory": True}

    def check(limits: Mapping[str, Fraction], _init: bool) -> None:
        for name in declared:
            if not limits.get(name):
                declared[name] = False

    limits = pod_limits(pod, pod_level_resources=pod_level_resources, on_container=check)
    if pod_level_resources and is_pod_level_resources_set(pod):
        assert pod.spec.resources is not None
        pod_level = pod.spec.resources.limits
        for name in declared:
            if name in pod_level and limits.get(name):
                declared[name] = True
    return limits, declared


def pod_memory_limit(pod: Pod, *, pod_level_resources: bool = True) -> int | None:
    """The memory limit the pod's cgroup gets (bytes), None when it gets none: what a
    memory-backed volume of the pod may hold at most."""
    limits, declared = _declared_limits(pod, pod_level_resources)
    memory = whole(limits.get("memory", Fraction(0)))
    return memory if declared["memory"] and memory > 0 else None


def resource_config_for_pod(
    pod: Pod,
    qos_class: str,
    *,
    enforce_cpu_limits: bool = True,
    cpu_period: int = CPU_PERIOD,
    pod_level_resources: bool = True,
    pids_limit: int = -1,
) -> ResourceConfig:
    """The pod cgroup's values (upstream ``ResourceConfigForPod`` plus ``podPidsLimit``).

    ``qos_class``: the pod's class (``GetPodQOS``). ``enforce_cpu_limits``: ``cpuCFSQuota``;
    when off, the quota is -1 (unlimited) wherever it would be set. ``cpu_period``: µs.
    """
    requests = pod_requests(pod, pod_level_resources=pod_level_resources)
    limits, declared = _declared_limits(pod, pod_level_resources)

    shares = milli_cpu_to_shares(milli(requests.get("cpu", Fraction(0))))
    quota = milli_cpu_to_quota(milli(limits.get("cpu", Fraction(0))), cpu_period)
    if not enforce_cpu_limits:
        quota = -1
    memory = whole(limits.get("memory", Fraction(0)))
    pids = pids_limit if pids_limit > 0 else None
    huge = hugepage_limits(requests)

    if qos_class == GUARANTEED:
        return ResourceConfig(
            cpu_shares=shares,
            cpu_quota=quota,
            cpu_period=cpu_period,
            memory=memory,
            pids_limit=pids,
            hugepage_limits=huge,
        )
    if qos_class == BURSTABLE:
        return ResourceConfig(
            cpu_shares=shares,
            cpu_quota=quota if declared["cpu"] else None,
            cpu_period=cpu_period if declared["cpu"] else None,
            memory=memory if declared["memory"] else None,
            pids_limit=pids,
            hugepage_limits=huge,
        )
    return ResourceConfig(cpu_shares=MIN_SHARES, pids_limit=pids, hugepage_limits=huge)


# -- QoS cgroups ------------------------------------------------------------------------------


def qos_configs(
    pods: Iterable[tuple[Pod, str]],
    *,
    hugepage_sizes: Sequence[int] = (),
    qos_reserved_memory: int | None = None,
    allocatable_memory: int | None = None,
    pod_level_resources: bool = True,
    requests_of: Callable[[Pod], Mapping[str, Fraction]] | None = None,
) -> dict[str, ResourceConfig]:
    """QoS class → its cgroup's values, from the active pods and their classes
    (upstream ``UpdateCgroups``). Guaranteed is ``kubepods`` itself: only its hugetlb
    limits are set here (unbounded), as upstream does every minute.

    ``qos_reserved_memory``: the ``qosReserved`` memory percentage, applied only with the
    ``QOSReserved`` gate (the caller passes None otherwise) and a known allocatable.
    ``requests_of``: the pods' summed requests, when the caller keeps them computed.
    """
    burstable_cpu = 0
    memory_requests = {GUARANTEED: 0, BURSTABLE: 0}
    for pod, qos_class in pods:
        if qos_class == BEST_EFFORT:
            continue
        if requests_of is not None:
            requests = requests_of(pod)
        else:
            requests = pod_requests(pod, pod_level_resources=pod_level_resources)
        if qos_class == BURSTABLE:
            burstable_cpu += milli(requests.get("cpu", Fraction(0)))
        memory_requests[qos_class] += whole(requests.get("memory", Fraction(0)))
    unbounded = {size: HUGEPAGES_UNBOUNDED for size in hugepage_sizes}
    burstable_memory = besteffort_memory = None
    if qos_reserved_memory is not None and allocatable_memory:
        percent = qos_reserved_memory
        burstable_memory = allocatable_memory - memory_requests[GUARANTEED] * percent // 100
        besteffort_memory = burstable_memory - memory_requests[BURSTABLE] * percent // 100
    return {
        GUARANTEED: ResourceConfig(hugepage_limits=unbounded),
        BURSTABLE: ResourceConfig(
            cpu_shares=milli_cpu_to_shares(burstable_cpu),
            memory=burstable_memory,
            hugepage_limits=unbounded,
        ),
        BEST_EFFORT: ResourceConfig(
            cpu_shares=MIN_SHARES, memory=besteffort_memory, hugepage_limits=unbounded
        ),
    }


# -- node allocatable -------------------------------------------------------------------------


def node_allocatable(
    capacity: Mapping[str, Fraction],
    system_reserved: Mapping[str, Fraction],
    kube_reserved: Mapping[str, Fraction],
) -> ResourceList:
    """Capacity minus both reservations, never negative (``getNodeAllocatableAbsolute``)."""
    out: ResourceList = {}
    for name, amount in capacity.items():
        value = (
            amount - system_reserved.get(name, Fraction(0)) - kube_reserved.get(name, Fraction(0))
        )
        out[name] = max(value, Fraction(0))
    return out


def reserved_config(
    resources: Mapping[str, Fraction], *, compressible_only: bool = False
) -> ResourceConfig:
    """The values for a cgroup limited to ``resources`` (``getCgroupConfigInternal``):
    cpu as shares, memory, pids, hugetlb; only cpu shares when ``compressible_only``."""
    shares = milli_cpu_to_shares(milli(resources["cpu"])) if "cpu" in resources else None
    if compressible_only:
        return ResourceConfig(cpu_shares=shares)
    return ResourceConfig(
        cpu_shares=shares,
        memory=whole(resources["memory"]) if "memory" in resources else None,
        pids_limit=whole(resources[PIDS]) if PIDS in resources else None,
        hugepage_limits=hugepage_limits(resources),
    )


def node_allocatable_config(
    internal_capacity: Mapping[str, Fraction],
    system_reserved: Mapping[str, Fraction],
    kube_reserved: Mapping[str, Fraction],
    *,
    enforce_pods: bool,
) -> ResourceConfig:
    """``kubepods``' values: capacity (with ``pid``: the host's pid limit), minus the
    reservations when ``enforceNodeAllocatable`` has "pods". Eviction thresholds are not
    subtracted: the pods may use that memory until eviction reclaims it."""
    resources = dict(internal_capacity)
    if enforce_pods:
        resources = node_allocatable(internal_capacity, system_reserved, kube_reserved)
    return reserved_config(resources)


# -- file spellings ---------------------------------------------------------------------------


def _hugetlb_entries(
    config: ResourceConfig, hugepage_sizes: Sequence[int]
) -> list[tuple[str, int]]:
    """(unit, limit) for every requested size, and 0 for each host size not requested."""
    out = [(hugepage_unit(size), limit) for size, limit in sorted(config.hugepage_limits.items())]
    named = {unit for unit, _ in out}
    for size in hugepage_sizes:
        unit = hugepage_unit(size)
        if unit not in named:
            out.append((unit, 0))
    return out


def v1_files(
    config: ResourceConfig, hugepage_sizes: Sequence[int] = ()
) -> dict[str, list[tuple[str, str]]]:
    """Controller → [(file, value)] in write order, for a cgroup v1 hierarchy. Hugetlb
    entries are meant for hosts where the hugetlb controller is mounted."""
    out: dict[str, list[tuple[str, str]]] = {}
    cpu: list[tuple[str, str]] = []
    if config.cpu_shares:
        cpu.append(("cpu.shares", str(config.cpu_shares)))
    if config.cpu_period:
        cpu.append(("cpu.cfs_period_us", str(config.cpu_period)))
    if config.cpu_quota:
        cpu.append(("cpu.cfs_quota_us", str(config.cpu_quota)))
    if cpu:
        out["cpu"] = cpu
    if config.memory:
        out["memory"] = [("memory.limit_in_bytes", str(config.memory))]
    if config.pids_limit:
        value = str(config.pids_limit) if config.pids_limit > 0 else "max"
        out["pids"] = [("pids.max", value)]
    if config.hugepage_limits or hugepage_sizes:
        out["hugetlb"] = [
            (f"hugetlb.{unit}.limit_in_bytes", str(limit))
            for unit, limit in _hugetlb_entries(config, hugepage_sizes)
        ]
    return out


def v2_files(config: ResourceConfig, hugepage_sizes: Sequence[int] = ()) -> list[tuple[str, str]]:
    """[(file, value)] in write order, for a cgroup v2 directory."""
    out: list[tuple[str, str]] = []
    if config.cpu_shares:
        out.append(("cpu.weight", str(shares_to_weight(config.cpu_shares))))
    if config.cpu_quota or config.cpu_period:
        quota = str(config.cpu_quota) if config.cpu_quota and config.cpu_quota > 0 else "max"
        out.append(("cpu.max", f"{quota} {config.cpu_period}" if config.cpu_period else quota))
    if config.memory:
        out.append(("memory.max", str(config.memory) if config.memory > 0 else "max"))
    if config.pids_limit:
        out.append(("pids.max", str(config.pids_limit) if config.pids_limit > 0 else "max"))
    if config.hugepage_limits or hugepage_sizes:
        out.extend(
            (f"hugetlb.{unit}.max", str(limit))
            for unit, limit in _hugetlb_entries(config, hugepage_sizes)
        )
    return out
