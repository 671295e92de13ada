"""The container runtime driven toward pod specs: the pod driver, images, isolation, logs."""

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
