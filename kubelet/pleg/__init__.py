"""The PLEG: relist the runtime every second, keep the pod cache, tell the syncLoop.

``run_pleg`` is the entry; ``view`` reads the runtime, ``cache`` keeps the newest view
of each pod, ``generator`` turns two relists into pod lifecycle events.
"""

from .cache import PodCache, ViewMark
from .generator import EventType, PodLifecycleEvent
from .run import PlegHandle, run_pleg
from .view import RuntimeView, pod_from_runtime

__all__ = [
    "EventType",
    "PlegHandle",
    "PodCache",
    "PodLifecycleEvent",
    "RuntimeView",
    "ViewMark",
    "pod_from_runtime",
    "run_pleg",
]
