"""Events: what the kubelet tells users about pods and the node (core/v1 Events).

What the package offers: ``EventRecorder`` (``NORMAL``/``WARNING`` events about an
``ObjectRef``, from ``pod_ref`` or ``node_ref``, folded as upstream's correlator does),
``run_event_recorder``, the component that sends them, and ``ApiEvents``, its sink over
the API server.
"""

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
