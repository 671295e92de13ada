"""The real prober: dispatch a probe to exec, HTTP GET, TCP or gRPC by its action."""

from __future__ import annotations

from kubelet.api import Probe, format_pod
from kubelet.handlers import ProbeError, ProbeOutcome, ProbeTarget
from kubelet.handlers import exec as exec_probe
from kubelet.handlers import grpc as grpc_probe
from kubelet.handlers import http as http_probe
from kubelet.handlers import tcp as tcp_probe

from .results import ProbeKind

__all__ = ["ActionProber"]


class ActionProber:
    """Implements ``Prober``. ``runtime`` runs exec probes (``RuntimeClient`` fits);
    ``http`` is shared with the lifecycle hooks so both send GETs the same way."""

    def __init__(
        self,
        runtime: exec_probe.ExecRunner | None = None,
        http: http_probe.HttpGetter | None = None,
    ) -> None:
        self.runtime = runtime
        self.http = http if http is not None else http_probe.HttpGetter()

    async def __call__(self, kind: ProbeKind, probe: Probe, target: ProbeTarget) -> ProbeOutcome:
        if probe.exec is not None:
            if self.runtime is None:
                raise ProbeError("no container runtime to run exec probes")
            return await exec_probe.probe(self.runtime, probe, target)
        if probe.http_get is not None:
            return await http_probe.probe(self.http, probe, target)
        if probe.tcp_socket is not None:
            return await tcp_probe.probe(probe, target)
        if probe.grpc is not None:
            return await grpc_probe.probe(probe, target)
        pod = format_pod(target.pod)
        raise ProbeError(f"missing probe handler for {pod}:{target.container.name}")
