"""Desired pods and the tasks that drive each one: the syncLoop and the pod workers.

What the package offers the agent: ``run_pod_lifecycle`` (the syncLoop, the pod workers
and housekeeping, given its ``LifecycleParts`` and answering with a ``PodLifecycle``),
``PodManager`` (the desired pods), ``PodWorkers`` (one task per pod), ``KubeletPodSyncer``
(one worker step), ``NodeInfo``/``local_node``/``node_info_source`` (the Node as
admission reads it) and ``working_pods`` (the census of what the workers hold).
"""

from .census import working_pods
from .fit import NodeInfo
from .manager import PodManager
from .nodeinfo import local_node, node_info_source
from .run import LifecycleParts, PodLifecycle, run_pod_lifecycle
from .syncer import KubeletPodSyncer
from .workers import PodWorkers

__all__ = [
    "KubeletPodSyncer",
    "LifecycleParts",
    "NodeInfo",
    "PodLifecycle",
    "PodManager",
    "PodWorkers",
    "local_node",
    "node_info_source",
    "run_pod_lifecycle",
    "working_pods",
]
