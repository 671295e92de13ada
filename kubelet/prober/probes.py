"""What one probe run produces, how it is retried, and what users read about it.

A prober answers with a ``ProbeOutcome`` (success, warning, failure, unknown plus the
output users see) or raises ``ProbeError`` when it could not probe at all (a port name
that does not resolve, the runtime unreachable). ``run_probe`` turns that into what the
worker acts on: errors are retried up to ``MAX_PROBE_RETRIES`` times and then discarded
(the worker keeps its previous state); failures and warnings become the events upstream
records ("Liveness probe failed: ...").

``kubelet.prober.prober.ActionProber`` is the real prober; tests inject any callable
with the ``Prober`` signature.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs

from kubelet.api import Pod, Probe
from kubelet.handlers import ProbeError, ProbeOutcome, ProbeResult, ProbeTarget

from .results import ProbeKind, Result

__all__ = [
    "MAX_PROBE_RETRIES",
    "ContainerEventSink",
    "ProbeError",
    "ProbeEvent",
    "ProbeOutcome",
    "ProbeResult",
    "ProbeTarget",
    "ProbeVerdict",
    "Prober",
    "run_probe",
    "verdict_of",
]

MAX_PROBE_RETRIES = 3
"""``maxProbeRetries``: attempts per probe while the prober errors."""

EVENT_UNHEALTHY = "Unhealthy"
EVENT_PROBE_WARNING = "ProbeWarning"


class Prober(Protocol):
    """Runs one attempt of ``probe`` against ``target``."""

    def __call__(
        self, kind: ProbeKind, probe: Probe, target: ProbeTarget
    ) -> Awaitable[ProbeOutcome]: ...


ContainerEventSink = Callable[[Pod, str, str, str, str], None]
"""``(pod, container name, type, reason, message)``: an event about one container."""


@attrs.frozen
class ProbeEvent:
    """An event to record about the probed container (type, reason, message)."""

    type: str
    reason: str
    message: str


@attrs.frozen
class ProbeVerdict:
    """One probe after retries: the result to count, whether it errored, the event."""

    result: Result
    error: str | None = None
    event: ProbeEvent | None = None


async def run_probe(
    prober: Prober,
    kind: ProbeKind,
    probe: Probe,
    target: ProbeTarget,
    retries: int = MAX_PROBE_RETRIES,
) -> ProbeVerdict:
    """Probe up to ``retries`` times while the prober errors; map the outcome."""
    error: ProbeError | None = None
    outcome = ProbeOutcome(ProbeResult.UNKNOWN)
    for _ in range(max(retries, 1)):
        try:
            outcome = await prober(kind, probe, target)
        except ProbeError as exc:
            error = exc
            outcome = ProbeOutcome(ProbeResult.UNKNOWN)
            continue
        error = None
        break
    return verdict_of(kind, outcome, error)


def verdict_of(kind: ProbeKind, outcome: ProbeOutcome, error: ProbeError | None) -> ProbeVerdict:
    """Upstream's mapping of a probe attempt to a result and an event (pure)."""
    name = kind.value
    if error is not None:
        message = f"{name} probe errored and resulted in {outcome.result.value} state: {error}"
        return ProbeVerdict(
            Result.FAILURE, str(error), ProbeEvent("Warning", EVENT_UNHEALTHY, message)
        )
    if outcome.result is ProbeResult.SUCCESS:
        return ProbeVerdict(Result.SUCCESS)
    if outcome.result is ProbeResult.WARNING:
        message = f"{name} probe warning: {outcome.output}"
        return ProbeVerdict(
            Result.SUCCESS, event=ProbeEvent("Warning", EVENT_PROBE_WARNING, message)
        )
    if outcome.result is ProbeResult.FAILURE:
        message = f"{name} probe failed: {outcome.output}"
        return ProbeVerdict(Result.FAILURE, event=ProbeEvent("Warning", EVENT_UNHEALTHY, message))
    return ProbeVerdict(Result.FAILURE)


# -- upstream's text forms ------------------------------------------------------------------
