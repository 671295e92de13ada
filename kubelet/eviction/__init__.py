"""Node-pressure eviction: watch the node's resources, reclaim, evict one pod at a time.

Upstream (pkg/kubelet/eviction) runs ``synchronize`` every 10 s and whenever a memory
cgroup notifier fires: it turns a stats summary into signal observations, finds the
thresholds met (soft ones after their grace period, met ones until their minimum
reclaim is available), derives the MemoryPressure / DiskPressure / PIDPressure
conditions (held for ``evictionPressureTransitionPeriod``), evicts pods over local
storage limits, then for the most urgent resource reclaims on the node (dead
containers, unused images) and, if that is not enough, evicts the first non-critical
pod of the resource's ranking and waits for it to be cleaned up.

Here the same decisions are pure functions over typed figures (kubelet.stats.summary):

- ``thresholds``: signals, parsing the configuration, containerfs derivation;
- ``observations``: signals from a summary;
- ``state``: one monitoring pass (met, grace periods, conditions, fresh figures);
- ``ranking`` and ``requests``: the eviction order per signal;
- ``decide``: node-level reclaim per signal, the pod to evict and its grace period,
  local storage limit evictions, the evicted status;
- ``messages``: upstream's exact reason, messages and event annotations;
- ``admission``: who is admitted under pressure;
- ``notifier``: the memory threshold notifier (cgroup v1 eventfd), so memory pressure
  is seen within a second instead of at the next 10 s pass.

``run.run_eviction`` composes them: the manager loop in its own nursery, fed by the
summary provider, killing through the pod workers (a grace override and a status
function), reclaiming through the garbage collectors; its conditions go into node status
and its admission handler into pod admission.
"""

from . import admission
from .decide import Eviction, eviction_conditions
from .manager import EvictionConfig, EvictionManager
from .messages import REASON
from .run import EvictionParts, NodePressure, eviction_settings, run_eviction
from .thresholds import DISK_PRESSURE, MEMORY_PRESSURE, PID_PRESSURE, parse_thresholds

__all__ = [
    "DISK_PRESSURE",
    "MEMORY_PRESSURE",
    "PID_PRESSURE",
    "REASON",
    "Eviction",
    "EvictionConfig",
    "EvictionManager",
    "EvictionParts",
    "NodePressure",
    "admission",
    "eviction_conditions",
    "eviction_settings",
    "parse_thresholds",
    "run_eviction",
]
