"""gRPC probes: ``grpc.health.v1.Health/Check`` answered SERVING within the timeout.

grpclib is asyncio-only, so the call runs on the trio-asyncio loop the agent opens at
its root (the CRI clients use the same bridge). Each probe dials a fresh channel, as
upstream does, and always closes it: an abandoned grpclib channel is reported to the
loop's exception handler. The deadline is a Trio deadline (exact on a fake clock);
cancelling it cancels the asyncio task and resets the stream.

Messages follow upstream's (``service unhealthy (responded with "NOT_SERVING")``,
``timeout: health rpc did not complete within 1s``). One difference: a refused
connection fails at once (``error: failed to connect service at ...``) where upstream's
blocking dial keeps retrying until the timeout.
"""

from __future__ import annotations

import trio
import trio_asyncio
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from kubelet.api import Probe
from kubelet.cri import LimitedProtoCodec
from kubelet.goformat import format_duration

from .http import dial_error_text
from .outcome import ProbeError, ProbeOutcome, ProbeResult, ProbeTarget

__all__ = ["check", "probe"]


class _Progress:
    """Which step the asyncio side reached, to word a timeout like upstream."""

    connected = False


MAX_ANSWER_BYTES = 4 << 20
"""grpc-go's default receive limit, which upstream's probe client keeps: a health server
(the pod author's) that announces more is refused from the length prefix, unread."""


async def _check(host: str, port: int, service: str, progress: _Progress) -> int:
    from grpclib.health.v1.health_grpc import HealthStub  # with the first gRPC probe
    from grpclib.health.v1.health_pb2 import HealthCheckRequest

    channel = Channel(host, port, codec=LimitedProtoCodec(MAX_ANSWER_BYTES))
    try:
        await channel.__connect__()
        progress.connected = True
        reply = await HealthStub(channel).Check(HealthCheckRequest(service=service))
        status: int = reply.status
        return status
    finally:
        channel.close()


async def check(host: str, port: int, service: str, timeout: float) -> ProbeOutcome:
    """One health check; every way it can go wrong is a failure, never an error."""
    if trio_asyncio.current_loop.get() is None:
        raise ProbeError("gRPC probes need the trio-asyncio loop")
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    within = format_duration(timeout)
    progress = _Progress()
    with trio.move_on_after(timeout):
        try:
            status = await trio_asyncio.aio_as_trio(_check)(host, port, service, progress)
        except GRPCError as exc:
            return _rpc_failure(exc, within)
        except OSError as exc:
            if not progress.connected:
                text = dial_error_text(exc, host, port)
                return ProbeOutcome(
                    ProbeResult.FAILURE, f'error: failed to connect service at "{address}": {text}'
                )
            return ProbeOutcome(ProbeResult.FAILURE, f"error: health rpc probe failed: {exc}")
        except Exception as exc:  # grpclib protocol errors, a stream cut short
            return ProbeOutcome(ProbeResult.FAILURE, f"error: health rpc probe failed: {exc}")
        from grpclib.health.v1.health_pb2 import HealthCheckResponse

        if status != HealthCheckResponse.SERVING:
            name = HealthCheckResponse.ServingStatus.Name(status)
            return ProbeOutcome(ProbeResult.FAILURE, f'service unhealthy (responded with "{name}")')
        return ProbeOutcome(ProbeResult.SUCCESS, "service healthy")
    if not progress.connected:
        return ProbeOutcome(
            ProbeResult.FAILURE,
            f'timeout: failed to connect service "{address}" within {within}: '
            "context deadline exceeded",
        )
    return ProbeOutcome(
        ProbeResult.FAILURE, f"timeout: health rpc did not complete within {within}"
    )


def _rpc_failure(exc: GRPCError, within: str) -> ProbeOutcome:
    message = exc.message or ""
    if exc.status is Status.UNIMPLEMENTED:
        return ProbeOutcome(
            ProbeResult.FAILURE,
            "error: this server does not implement the grpc health protocol "
            f"(grpc.health.v1.Health): {message}",
        )
    if exc.status is Status.DEADLINE_EXCEEDED:
        return ProbeOutcome(
            ProbeResult.FAILURE, f"timeout: health rpc did not complete within {within}"
        )
    code = "".join(part.capitalize() for part in exc.status.name.split("_"))
    return ProbeOutcome(
        ProbeResult.FAILURE,
        f"error: health rpc probe failed: rpc error: code = {code} desc = {message}",
    )


async def probe(spec: Probe, target: ProbeTarget) -> ProbeOutcome:
    """Check the pod IP at the action's port, for its service ("" by default)."""
    assert spec.grpc is not None
    if not target.pod_ip:
        raise ProbeError("no host to probe: the pod has no IP yet")
    return await check(target.pod_ip, spec.grpc.port, spec.grpc.service or "", spec.timeout_seconds)
