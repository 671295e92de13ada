"""TCP probes: success iff a connection opens within the timeout; closed at once."""

from __future__ import annotations

import trio

from kubelet.api import Probe

from .http import dial_error_text, resolve_container_port
from .outcome import ProbeError, ProbeOutcome, ProbeResult, ProbeTarget

__all__ = ["connect", "probe"]


async def connect(host: str, port: int, timeout: float) -> ProbeOutcome:
    """Open and close one connection (``DoTCPProbe``); failures carry Go's dial text."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with trio.move_on_after(timeout):
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            return ProbeOutcome(ProbeResult.FAILURE, dial_error_text(exc, host, port))
        await trio.aclose_forcefully(stream)
        return ProbeOutcome(ProbeResult.SUCCESS)
    return ProbeOutcome(ProbeResult.FAILURE, f"dial tcp {address}: i/o timeout")


async def probe(spec: Probe, target: ProbeTarget) -> ProbeOutcome:
    """Connect to the action's host (default: the pod IP) and port."""
    assert spec.tcp_socket is not None
    port = resolve_container_port(spec.tcp_socket.port, target.container)
    host = spec.tcp_socket.host or target.pod_ip
    if not host:
        raise ProbeError("no host to probe: the pod has no IP yet")
    return await connect(host, port, spec.timeout_seconds)
