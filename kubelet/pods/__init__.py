"""Desired pods and the tasks that drive each one: the syncLoop and the pod workers."""

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
