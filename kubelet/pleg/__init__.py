"""The PLEG: relist the runtime every second, keep the pod cache, tell the syncLoop.

``run_pleg`` is the entry; ``view`` reads the runtime, ``cache`` keeps the newest view
of each pod, ``generator`` turns two relists into pod lifecycle events.
"""

from .run import PlegHandle, run_pleg

__all__ = ["PlegHandle", "run_pleg"]
