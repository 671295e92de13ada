"""The container runtime driven toward pod specs: the pod driver, images, isolation, logs.

What the package offers the agent and the pod lifecycle: ``run_runtime`` (the component,
given its ``RuntimeParts``), ``PodRuntime`` (one pod's sandbox and containers driven
toward its spec over the CRI, and torn down), ``RuntimeInfo`` (the runtime's handlers and
their features), and ``still_running``/``all_gone`` (what of a pod the runtime still
holds). ``credentials`` (image pull credentials) is a package of its own.
"""

from .podruntime import PodRuntime
from .run import RuntimeParts, run_runtime
from .runtimeinfo import RuntimeInfo
from .teardown import all_gone, still_running

__all__ = [
    "PodRuntime",
    "RuntimeInfo",
    "RuntimeParts",
    "all_gone",
    "run_runtime",
    "still_running",
]
