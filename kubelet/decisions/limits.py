"""Node settings that shape every container's CRI resources, as upstream's runtime manager
holds them: whether CPU limits become CFS quota (``cpuCFSQuota``) and over which period
(``cpuCFSQuotaPeriod``, µs in the CRI)."""

from __future__ import annotations

import attrs

from kubelet.config.kubeletconfig import KubeletConfiguration

CPU_PERIOD = 100_000
"""The kernel's default CFS period, 100 ms in microseconds."""


@attrs.frozen
class ContainerLimits:
    """What the node configuration adds to each container's ``LinuxContainerResources``."""

    cpu_cfs_quota: bool = True
    """False: no quota and no period are sent (the runtime leaves the container unlimited)."""
    cpu_period: int = CPU_PERIOD
    """µs; only other than 100000 with the CustomCPUCFSQuotaPeriod gate."""


def container_limits(config: KubeletConfiguration) -> ContainerLimits:
    """The limits of ``config`` (validated: a period other than 100ms has its gate)."""
    return ContainerLimits(
        cpu_cfs_quota=config.cpu_cfs_quota,
        cpu_period=round(config.cpu_cfs_quota_period * 1_000_000),
    )
