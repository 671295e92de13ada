"""Exec probes: a command in the container through CRI ExecSync.

``run_in_container`` is shared with the lifecycle hooks: it returns the combined
output, or raises ``CommandExited`` (non-zero exit) / ``CommandTimedOut`` (the runtime's
or our deadline) with upstream's error texts; any other CRI failure propagates as
``CriError`` (an error, not a failure: the probe's result stays unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from kubelet.api import Container, Probe
from kubelet.cri import CriError, DeadlineExceeded
from kubelet.env import ExpansionTooLarge, expand_all

from .outcome import ProbeError, ProbeOutcome, ProbeResult, ProbeTarget

__all__ = [
    "MAX_EXEC_OUTPUT",
    "CommandExited",
    "CommandTimedOut",
    "ExecRunner",
    "cri_error_text",
    "expand_command",
    "probe",
    "run_in_container",
]

MAX_EXEC_OUTPUT = 10 * 1024
"""Bytes of command output an exec probe keeps (upstream's ``maxReadLength``)."""


class ExecSyncReply(Protocol):
    @property
    def stdout(self) -> bytes: ...
    @property
    def stderr(self) -> bytes: ...
    @property
    def exit_code(self) -> int: ...


class ExecRunner(Protocol):
    """What exec needs from the runtime (``kubelet.cri.RuntimeClient`` fits)."""

    async def exec_sync(
        self, container_id: str, cmd: Iterable[str], timeout: int = 0
    ) -> ExecSyncReply: ...


class CommandExited(Exception):
    """The command ran and exited non-zero; ``output`` is stdout then stderr."""

    def __init__(self, cmd: Sequence[str], exit_code: int, output: bytes, stderr: bytes) -> None:
        text = stderr.decode("utf-8", "replace")
        super().__init__(f"command '{' '.join(cmd)}' exited with {exit_code}: {text}")
        self.exit_code = exit_code
        self.output = output


class CommandTimedOut(Exception):
    """The command did not finish within its timeout."""

    def __init__(self, cmd: Sequence[str], timeout: int) -> None:
        super().__init__(f'command "{" ".join(cmd)}" timed out')
        self.timeout = timeout


def expand_command(command: Iterable[str], container: Container) -> list[str]:
    """``$(VAR)`` expansion against the container's literal env only (as upstream: probes
    and hooks never see valueFrom values; those expand to ""). ``ExpansionTooLarge`` past
    the expansion bounds."""
    env = {var.name: var.value or "" for var in container.env}
    return expand_all(command, env)


async def run_in_container(
    runner: ExecRunner, container_id: str, cmd: Sequence[str], timeout: int = 0
) -> bytes:
    """Run ``cmd`` (``timeout`` seconds, 0: unbounded); the combined output on exit 0."""
    try:
        reply = await runner.exec_sync(container_id, cmd, timeout)
    except DeadlineExceeded as exc:
        raise CommandTimedOut(cmd, timeout) from exc
    output = bytes(reply.stdout) + bytes(reply.stderr)
    if reply.exit_code != 0:
        raise CommandExited(cmd, reply.exit_code, output, bytes(reply.stderr))
    return output


def cri_error_text(exc: CriError) -> str:
    """A CRI failure as upstream prints a gRPC error (``rpc error: code = X desc = ...``)."""
    if exc.code is None:
        return exc.message
    code = "".join(part.capitalize() for part in exc.code.name.split("_"))
    return f"rpc error: code = {code} desc = {exc.message}"


def _text(output: bytes) -> str:
    return output[:MAX_EXEC_OUTPUT].decode("utf-8", "replace")


async def probe(runner: ExecRunner, spec: Probe, target: ProbeTarget) -> ProbeOutcome:
    """Exit 0: success; non-zero: failure with the output; timeout: failure."""
    assert spec.exec is not None
    try:
        cmd = expand_command(spec.exec.command, target.container)
    except ExpansionTooLarge as exc:
        raise ProbeError(f"cannot expand the probe command: {exc}") from None
    try:
        output = await run_in_container(runner, target.container_id, cmd, spec.timeout_seconds)
    except CommandExited as exc:
        return ProbeOutcome(ProbeResult.FAILURE, _text(exc.output))
    except CommandTimedOut as exc:
        return ProbeOutcome(ProbeResult.FAILURE, str(exc))
    except CriError as exc:
        raise ProbeError(cri_error_text(exc)) from exc
    return ProbeOutcome(ProbeResult.SUCCESS, _text(output))
