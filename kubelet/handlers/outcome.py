"""What one handler run against a container produces: a result and the text users see.

A handler (exec, HTTP GET, TCP, gRPC) answers with a ``ProbeOutcome`` or raises
``ProbeError`` when it could not run at all (a port name that does not resolve, the
runtime unreachable). Probes and lifecycle hooks read the same outcome.
"""

from __future__ import annotations

import enum

import attrs

from kubelet.api import Container, Pod

__all__ = ["ProbeError", "ProbeOutcome", "ProbeResult", "ProbeTarget"]


class ProbeResult(enum.Enum):
    """What one probe attempt said (upstream's ``probe.Result``; values as it prints them)."""

    SUCCESS = "success"
    WARNING = "warning"
    FAILURE = "failure"
    UNKNOWN = "unknown"


@attrs.frozen
class ProbeOutcome:
    result: ProbeResult
    output: str = ""


class ProbeError(Exception):
    """The probe could not be carried out; its result is unknown, not a failure."""


@attrs.frozen
class ProbeTarget:
    """Everything a prober needs to reach one container instance."""

    pod: Pod
    container: Container
    container_id: str
    pod_ip: str
