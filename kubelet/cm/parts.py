"""What the container manager is made from, as one value (``agent`` builds it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs

from kubelet.boundedio import RunSync, in_thread
from kubelet.cgroups import ActivePods, CgroupHost, Event, Observe
from kubelet.config import Options
from kubelet.cri import RuntimeClient
from kubelet.metrics import KubeletMetrics

from .resources import HealthChanged, NodeResources, ResourcesChanged

if TYPE_CHECKING:
    from kubelet.api import ApiClient


@attrs.frozen(kw_only=True)
class CmParts:
    """The container manager's dependencies."""

    options: Options
    resources: NodeResources
    """the machine's capacity and the node's allocatable"""
    runtime: RuntimeClient
    """asked for the cgroup driver it uses (CRI RuntimeConfig)"""
    active: ActivePods
    """the pods admitted and not yet terminated (the QoS cgroups are sized from them)"""
    record: Callable[[Event], None]
    """an event on the Node"""
    host: CgroupHost
    observe: Observe | None = None
    """the cgroup manager's operation durations (metrics)"""
    sys_root: str = "/sys"
    """where the machine's CPU and NUMA topology is read (tests: a fake tree)"""
    proc_sys: str = "/proc/sys"
    """where the kernel tunables are checked and set (tests: a temporary tree)"""
    count_cpu_pinning: Callable[[str], None] | None = None
    """the CPU manager's pinning counters ("requests", "errors")"""
    api: ApiClient | None = None
    """the API server (DRA reads ResourceClaims, deletes stale ResourceSlices); None:
    standalone"""
    node_name: str = ""
    node_labels: Mapping[str, str] = attrs.field(factory=dict)
    """the labels this kubelet gives its Node (DRA's allocation node check)"""
    metrics: KubeletMetrics | None = None
    """DRA's and the device plugins' metrics"""
    file_io: RunSync = in_thread
    """reads and writes of the managers' checkpoints (inline on a fake clock)"""
    changed: ResourcesChanged = attrs.field(factory=ResourcesChanged)
    """told when the managers' extended resources change"""
    health_changed: HealthChanged = attrs.field(factory=HealthChanged)
    """told which pods' devices changed health"""
