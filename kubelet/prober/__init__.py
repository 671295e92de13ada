"""Probes: liveness, readiness and startup workers, their results, the probers.

``run_prober`` is the entry; ``ProberManager`` owns the probers nursery (one Trio task
per container and probe kind) and the three result stores; ``probes``/``prober`` run one
probe through ``kubelet.handlers`` (exec through the CRI, HTTP GET, TCP, gRPC health),
the same handlers the lifecycle hooks use. See the modules' docstrings.
"""

from __future__ import annotations

from kubelet.handlers import ProbeError, ProbeOutcome, ProbeResult, ProbeTarget

from .manager import ProberManager, ProbeStatus, WorkerSummary, run_prober
from .metrics import ProberMetrics
from .prober import ActionProber
from .probes import ContainerEventSink, Prober
from .results import ProbeKind, Result, ResultsManager, ResultUpdate
from .worker import ProbeKey, ProbeWorker

__all__ = [
    "ActionProber",
    "ContainerEventSink",
    "ProbeError",
    "ProbeKey",
    "ProbeKind",
    "ProbeOutcome",
    "ProbeResult",
    "ProbeStatus",
    "ProbeTarget",
    "ProbeWorker",
    "Prober",
    "ProberManager",
    "ProberMetrics",
    "Result",
    "ResultUpdate",
    "ResultsManager",
    "WorkerSummary",
    "run_prober",
]
