"""What the pod workers hold, counted as upstream's ``kubelet_working_pods`` counts it.

Each worker is in one lifecycle step (``sync``; ``terminating`` from the moment its
termination is asked for; ``terminated``) and one standing with the config: ``desired``
(a source wants the pod), ``orphan`` (it came from a source that no longer wants it) or
``runtime_only`` (a runtime leftover no source ever named; its ``static`` is
``unknown``). All fifteen combinations upstream reports are present, zeros included.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from .workers import PodPhase, PodWorker

LIFECYCLES = ("sync", "terminating", "terminated")
CONFIGS = (("desired", "true"), ("desired", ""), ("orphan", "true"), ("orphan", ""),
           ("runtime_only", "unknown"))  # fmt: skip

WorkingPod = tuple[str, str, str]
"""(lifecycle, config, static): the labels of ``kubelet_working_pods``."""


def lifecycle(worker: PodWorker) -> str:
    if worker.phase is PodPhase.TERMINATED:
        return "terminated"
    if worker.phase is PodPhase.TERMINATING or worker.terminate_requested:
        return "terminating"
    return "sync"


def standing(worker: PodWorker, desired: Callable[[str], bool]) -> tuple[str, str]:
    pod = worker.pod
    if pod.config_source is None:  # a stand-in for runtime leftovers
        return "runtime_only", "unknown"
    static = "true" if pod.is_static else ""
    return ("desired" if desired(worker.uid) else "orphan"), static


def working_pods(
    workers: Iterable[PodWorker], desired: Callable[[str], bool]
) -> dict[WorkingPod, int]:
    """Every combination upstream reports, with how many workers are in it."""
    counts = Counter((lifecycle(w), *standing(w, desired)) for w in workers)
    return {
        (step, config, static): counts[(step, config, static)]
        for config, static in CONFIGS
        for step in LIFECYCLES
    }
