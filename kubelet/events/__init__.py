"""Events: what the kubelet tells users about pods and the node (core/v1 Events)."""

from .recorder import (
    NORMAL,
    WARNING,
    EventRecorder,
    ObjectRef,
    node_ref,
    pod_ref,
    run_event_recorder,
)
from .sink import ApiEvents

__all__ = [
    "NORMAL",
    "WARNING",
    "ApiEvents",
    "EventRecorder",
    "ObjectRef",
    "node_ref",
    "pod_ref",
    "run_event_recorder",
]
