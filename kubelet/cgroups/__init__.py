"""Resource management with cgroups: names, values, the filesystem layer, the manager.

Upstream's container manager (pkg/kubelet/cm) keeps every pod in a cgroup tree under
``cgroupRoot``: ``kubepods`` (capped at node allocatable when ``enforceNodeAllocatable``
has "pods"), ``kubepods/burstable`` and ``kubepods/besteffort`` (cpu shares following the
pods in them), and ``pod<uid>`` per pod (Guaranteed pods directly in ``kubepods``) with
the pod's cpu shares, CFS quota, memory limit, hugetlb and ``podPidsLimit``. Sandboxes
and containers are created with the pod cgroup as parent, so the runtime nests them.

Here, as modules with one job each:

- ``names``: a cgroup's components, spelled for the cgroupfs or systemd driver;
- ``requests``: a pod's summed requests and limits (init containers, sidecars, overhead,
  pod-level resources), the one definition admission, eviction and the memory volumes read;
- ``values``: the values of every cgroup of the tree, and their v1/v2 file spellings;
- ``layout``: which hierarchies the host mounts (v1, hybrid, v2);
- ``fs``: the only code touching ``/sys/fs/cgroup`` (a root a test points at a tree);
- ``manager``: create/update/remove over ``fs``, the periodic QoS update, the orphan scan.

``run`` is the component's entry (``run_cgroups``): the tree set up at start, the
minute loop, and ``PodCgroups``, which the pod driver (a pod's cgroup before its
sandbox, removed after its teardown) and housekeeping (the orphan sweep) call.

The systemd driver: ``slices`` (unit names and properties, pure), ``systemd`` (systemd's
D-Bus API: StartTransientUnit, SetUnitProperties, StopUnit, JobRemoved) and ``driver``
(the runtime's cgroup driver, from CRI RuntimeConfig, wins over the configured one).
``SystemdBus`` loads on first use (``__getattr__``): a node on the cgroupfs driver never
loads the D-Bus client.
"""

from typing import TYPE_CHECKING

from kubelet.lazyinit import lazy_names as _lazy_names

from .driver import driver_from_runtime
from .fs import CgroupError, CgroupFs
from .layout import read_layout
from .manager import (
    FAILED_CREATE_POD_CONTAINER,
    CgroupManager,
    CgroupSettings,
    Event,
    Observe,
    hugepage_sizes,
)
from .names import (
    NODE_ALLOCATABLE,
    POD_PREFIX,
    CgroupName,
    QosCgroups,
    new_name,
    node_allocatable_root,
    to_cgroupfs,
    to_systemd,
)
from .requests import (
    ResourceList,
    hugepage_size,
    is_extended_resource,
    is_pod_level_resources_set,
    is_scalar_resource,
    milli,
    pod_limits,
    pod_requests,
    resource_limit,
    resource_request,
    whole,
)
from .run import (
    ActivePods,
    CgroupHost,
    CgroupParts,
    PodCgroups,
    capacity_of,
    host_cgroup_fs,
    run_cgroups,
)
from .swap import LIMITED_SWAP, NodeSwap
from .systemdaccess import SystemdAccess
from .values import (
    CPU_PERIOD,
    hugepage_limits,
    hugepage_unit,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    pod_memory_limit,
)

__all__ = [
    "CPU_PERIOD",
    "FAILED_CREATE_POD_CONTAINER",
    "LIMITED_SWAP",
    "NODE_ALLOCATABLE",
    "POD_PREFIX",
    "ActivePods",
    "CgroupError",
    "CgroupFs",
    "CgroupHost",
    "CgroupManager",
    "CgroupName",
    "CgroupParts",
    "CgroupSettings",
    "Event",
    "NodeSwap",
    "Observe",
    "PodCgroups",
    "QosCgroups",
    "ResourceList",
    "SystemdAccess",
    "SystemdBus",
    "capacity_of",
    "driver_from_runtime",
    "host_cgroup_fs",
    "hugepage_limits",
    "hugepage_size",
    "hugepage_sizes",
    "hugepage_unit",
    "is_extended_resource",
    "is_pod_level_resources_set",
    "is_scalar_resource",
    "milli",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "new_name",
    "node_allocatable_root",
    "pod_limits",
    "pod_memory_limit",
    "pod_requests",
    "read_layout",
    "resource_limit",
    "resource_request",
    "run_cgroups",
    "to_cgroupfs",
    "to_systemd",
    "whole",
]

if TYPE_CHECKING:
    from .systemd import SystemdBus

_LAZY = {"SystemdBus": "systemd"}
"""name -> the module that defines it, imported on first use (``__getattr__``)"""


__getattr__ = _lazy_names(__name__, _LAZY, globals())
