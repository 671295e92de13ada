"""Fault plans for FakeRuntime: what to do to the next calls of an RPC.

A plan is a list of rules, each matching one RPC name (or ``"*"`` for every RPC) and
applying to a number of calls (``times``; None = every call until cleared). Rules are
consulted in the order they were added; each matching rule with calls left applies
its effect in turn: ``delay`` first (latency), then ``hang`` (wait until the client
cancels), then ``crash`` (the whole server goes down), then ``error`` (the call fails
with that gRPC status). Deterministic: no randomness, time is the Trio clock.
"""

from __future__ import annotations

import attrs
from grpclib.const import Status

ANY_RPC = "*"


@attrs.define
class FaultRule:
    """One injected behaviour for calls of ``rpc``."""

    rpc: str
    times: int | None = None
    delay: float = 0.0
    hang: bool = False
    crash: bool = False
    error: Status | None = None
    message: str = "injected fault"

    def matches(self, rpc: str) -> bool:
        return (self.rpc == ANY_RPC or self.rpc == rpc) and (self.times is None or self.times > 0)


@attrs.frozen
class FaultEffect:
    """What one call must suffer, merged from every rule that matched it."""

    delay: float = 0.0
    hang: bool = False
    crash: bool = False
    error: Status | None = None
    message: str = ""


class FaultPlan:
    """Rules the fake consults on every call. Methods return self for chaining."""

    def __init__(self) -> None:
        self.rules: list[FaultRule] = []

    def fail(
        self,
        rpc: str,
        code: Status = Status.UNKNOWN,
        message: str = "injected fault",
        *,
        times: int | None = None,
    ) -> FaultPlan:
        """Make calls of ``rpc`` fail with ``code`` (every call, or the next ``times``)."""
        self.rules.append(FaultRule(rpc, times=times, error=code, message=message))
        return self

    def fail_next(
        self, rpc: str, n: int, code: Status = Status.UNKNOWN, message: str = "injected fault"
    ) -> FaultPlan:
        """Make the next ``n`` calls of ``rpc`` fail with ``code``."""
        return self.fail(rpc, code, message, times=n)

    def unavailable(self, rpc: str = ANY_RPC, *, times: int | None = None) -> FaultPlan:
        """Answer UNAVAILABLE, as a runtime that is shutting down would."""
        return self.fail(rpc, Status.UNAVAILABLE, "runtime unavailable (injected)", times=times)

    def delay(self, rpc: str, seconds: float, *, times: int | None = None) -> FaultPlan:
        """Add ``seconds`` of latency before ``rpc`` is served."""
        self.rules.append(FaultRule(rpc, times=times, delay=seconds))
        return self

    def hang(self, rpc: str, *, times: int | None = None) -> FaultPlan:
        """Never answer ``rpc``: the call waits until the client gives up or cancels."""
        self.rules.append(FaultRule(rpc, times=times, hang=True))
        return self

    def crash(self, rpc: str, *, times: int | None = 1) -> FaultPlan:
        """Take the whole server down when ``rpc`` arrives (as if the runtime died)."""
        self.rules.append(FaultRule(rpc, times=times, crash=True))
        return self

    def clear(self, rpc: str | None = None) -> None:
        """Drop every rule, or those for ``rpc``."""
        self.rules = [r for r in self.rules if rpc is not None and r.rpc != rpc]

    def take(self, rpc: str) -> FaultEffect:
        """Consume one call's worth of every matching rule and merge the effects."""
        delay, hang, crash = 0.0, False, False
        error: Status | None = None
        message = ""
        for rule in self.rules:
            if not rule.matches(rpc):
                continue
            if rule.times is not None:
                rule.times -= 1
            delay += rule.delay
            hang = hang or rule.hang
            crash = crash or rule.crash
            if rule.error is not None and error is None:
                error, message = rule.error, rule.message
        self.rules = [r for r in self.rules if r.times is None or r.times > 0]
        return FaultEffect(delay, hang, crash, error, message)
