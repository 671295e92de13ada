"""Node settings that shape every container's CRI resources, as upstream's runtime manager
holds them: whether CPU limits become CFS quota (``cpuCFSQuota``), over which period
(``cpuCFSQuotaPeriod``, µs in the CRI), the container's swap (``memorySwap``), and whether
its cgroup is OOM-killed as a whole (``singleProcessOOMKill``: unless true on cgroup v2,
``memory.oom.group=1`` through ``unified``, on containers and the sandbox's overhead, as
upstream's ``calculateLinuxResources``).

Swap, as upstream 1.36 (``configureContainerSwapResources``), only where the swap
controller is there:

- NoSwap (the default, and every case LimitedSwap does not cover): on v1
  ``memory_swap_limit_in_bytes`` = the memory limit (no swap beyond it); on v2
  ``memory.swap.max`` 0 through ``unified``;
- LimitedSwap (v2 only): a Burstable pod's container that asks for memory with a request
  below its limit, in a pod that is not critical, gets ``memory.swap.max`` =
  request / node memory × node swap (KEP 2400); a request above the node's memory falls
  back to NoSwap.
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from kubelet.api import Container, Pod, parse_quantity, to_bytes
from kubelet.cgroups import CPU_PERIOD, LIMITED_SWAP, NodeSwap, hugepage_size, hugepage_unit
from kubelet.cgroups import hugepage_limits as pod_hugepage_limits
from kubelet.config import KubeletConfiguration
from kubelet.cri import api

from .qos import BURSTABLE, is_critical_pod, pod_qos

__all__ = [
    "OOM_GROUP",
    "SWAP_MAX",
    "ContainerLimits",
    "configure_oom_group",
    "configure_swap",
    "container_limits",
    "container_swaps",
    "hugepage_limits",
]

SWAP_MAX = "memory.swap.max"
OOM_GROUP = "memory.oom.group"


@attrs.frozen
class ContainerLimits:
    """What the node configuration adds to each container's ``LinuxContainerResources``."""

    cpu_cfs_quota: bool = True
    """False: no quota and no period are sent (the runtime leaves the container unlimited)."""
    cpu_period: int = CPU_PERIOD
    """µs; only other than 100000 with the CustomCPUCFSQuotaPeriod gate."""
    swap: NodeSwap = attrs.field(factory=NodeSwap)
    hugepage_sizes: tuple[int, ...] = ()
    """page sizes (bytes) the node's hugetlb controller limits; every container gets a
    limit for each (0 unless it asks), so one container cannot use another's pages"""
    group_oom_kill: bool = False
    """cgroup v2 without ``singleProcessOOMKill``: the kernel kills the whole cgroup"""


def container_limits(
    config: KubeletConfiguration,
    swap: NodeSwap | None = None,
    hugepage_sizes: tuple[int, ...] = (),
    *,
    group_oom_kill: bool = False,
) -> ContainerLimits:
    """The limits of ``config`` (validated: a period other than 100ms has its gate), the
    node's swap facts (None: no swap controller, nothing is set), its hugepage sizes
    (empty without a hugetlb controller: none are sent, the runtime could not set them)
    and whether containers are OOM-killed as a group (from the cgroup version check)."""
    return ContainerLimits(
        cpu_cfs_quota=config.cpu_cfs_quota,
        cpu_period=round(config.cpu_cfs_quota_period * 1_000_000),
        swap=swap or NodeSwap(),
        hugepage_sizes=hugepage_sizes,
        group_oom_kill=group_oom_kill,
    )


def configure_oom_group(out: api.LinuxContainerResources, limits: ContainerLimits) -> None:
    """Ask the runtime to OOM-kill every process of the cgroup together (v2 only)."""
    if limits.group_oom_kill:
        out.unified[OOM_GROUP] = "1"


def hugepage_limits(container: Container, sizes: tuple[int, ...]) -> list[api.HugepageLimit]:
    """One limit per page size of the node: the container's ``hugepages-<size>`` limit,
    0 for the sizes it does not ask for (upstream's ``GetHugepageLimitsFromResources``)."""
    declared = container.resources.limits if container.resources else {}
    asked = pod_hugepage_limits(
        {
            name: parse_quantity(text).amount
            for name, text in declared.items()
            if hugepage_size(name)
        }
    )
    return [
        api.HugepageLimit(page_size=hugepage_unit(size), limit=asked.get(size, 0)) for size in sizes
    ]


def _limited_swap(pod: Pod, container: Container, swap: NodeSwap) -> int | None:
    """The container's swap bytes under LimitedSwap, or None where it gets NoSwap."""
    if swap.behavior != LIMITED_SWAP or not swap.cgroup_v2 or is_critical_pod(pod):
        return None
    resources = container.resources
    request = to_bytes(resources.requests.get("memory")) if resources else 0
    limit = to_bytes(resources.limits.get("memory")) if resources else 0
    if pod_qos(pod) != BURSTABLE or (request == 0 and limit == 0) or request == limit:
        return None
    if swap.memory_capacity <= 0 or request > swap.memory_capacity:
        return None
    return int(Fraction(request, swap.memory_capacity) * swap.swap_capacity)


def container_swaps(pod: Pod, container: Container, swap: NodeSwap) -> bool:
    """Whether the container may use swap (upstream's ``GetContainerSwapBehavior`` is
    not NoSwap): LimitedSwap on cgroup v2 with the swap controller, a Burstable pod's
    container whose memory request is set and below its limit."""
    return swap.controller and _limited_swap(pod, container, swap) is not None


def configure_swap(
    out: api.LinuxContainerResources, pod: Pod, container: Container, swap: NodeSwap
) -> None:
    """Set the container's swap on ``out`` (its memory limit already set)."""
    if not swap.controller:
        return
    if not swap.cgroup_v2:
        out.memory_swap_limit_in_bytes = out.memory_limit_in_bytes
        return
    limited = _limited_swap(pod, container, swap)
    out.unified[SWAP_MAX] = str(limited if limited is not None else 0)
