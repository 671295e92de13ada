"""Fault plans for FakeApiServer: what to do to the next requests matching a pattern.

The API-server twin of ``faults.FaultPlan``. A rule matches requests by Kubernetes
verb (get, list, watch, create, update, patch, delete, deletecollection; a plain
lower-case method for non-resource paths such as /healthz) and resource
(``pods``, ``pods/status``, ``leases``, ``nodes/status``...), both fnmatch patterns
(``"*"`` = any), optionally narrowed by object name, namespace or URL path. It applies
to ``times`` requests (None = every one until cleared). Rules are consulted in the
order they were added; every matching rule with requests left is consumed, and the
effects merge: ``delay`` first (latency, summed), then ``stall`` (never answer until the
client goes), then ``reset`` (the connection is cut, no response), then ``error`` (the
first matching error wins: status code, reason, message, optional Retry-After), then
``expire_watch`` (a watch answers 200 and a single ERROR event with a 410 Status), then
``body`` (200 with these raw bytes, whatever was asked: malformed or hostile API data).
Deterministic: no randomness, time is the trio clock.
"""

from __future__ import annotations

import fnmatch

import attrs

from .apierrors import REASONS, StatusError

__all__ = ["ANY", "ApiFaultEffect", "ApiFaultPlan", "ApiFaultRule", "RequestInfo"]

ANY = "*"


@attrs.frozen
class RequestInfo:
    """What a request is, in API terms (what rules match on)."""

    verb: str
    resource: str  # "pods", "pods/status"; "" for non-resource paths
    path: str
    namespace: str = ""
    name: str = ""
    group: str = ""


@attrs.define
class ApiFaultRule:
    """One injected behaviour for requests matching the patterns."""

    verb: str = ANY
    resource: str = ANY
    name: str | None = None
    namespace: str | None = None
    path: str | None = None
    times: int | None = None
    delay: float = 0.0
    stall: bool = False
    reset: bool = False
    code: int | None = None
    reason: str | None = None
    message: str | None = None
    retry_after: int | None = None
    expire_watch: bool = False
    body: bytes | None = None

    def matches(self, info: RequestInfo) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if not fnmatch.fnmatchcase(info.verb, self.verb):
            return False
        if self.resource != ANY and not fnmatch.fnmatchcase(info.resource, self.resource):
            return False
        if self.path is not None and not fnmatch.fnmatchcase(info.path, self.path):
            return False
        if self.name is not None and info.name != self.name:
            return False
        return self.namespace is None or info.namespace == self.namespace

    def error(self, info: RequestInfo) -> StatusError:
        """The StatusError this rule answers ``info`` with, worded as upstream would."""
        assert self.code is not None
        code = self.code
        plural = info.resource.split("/", 1)[0] or "resource"
        if self.message is None and code == 409:
            err = StatusError.stale(plural, info.name or "unknown", info.group)
        elif self.message is None and code == 404:
            err = StatusError.not_found(plural, info.name or "unknown", info.group)
        else:
            err = StatusError(
                code,
                self.message if self.message is not None else _default_message(code, info),
                details={"name": info.name, "kind": plural} if info.name else None,
            )
        if self.reason is not None:
            err.reason = self.reason
        if self.retry_after is not None:
            err.retry_after = self.retry_after
            err.details["retryAfterSeconds"] = self.retry_after
        return err


def _default_message(code: int, info: RequestInfo) -> str:
    what = info.resource.split("/", 1)[0]
    if code == 403:
        return (
            f'{what or info.path} "{info.name}" is forbidden: injected fault'
            if info.name
            else f"{what or info.path} is forbidden: injected fault"
        )
    if code == 429:
        return "Too many requests, please try again later."
    if code == 500:
        return "Internal error occurred: injected fault"
    if code == 503:
        return "the server is currently unable to handle the request (injected)"
    if code == 504:
        return (
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
        )
    return f"{REASONS.get(code, 'Error')}: injected fault"


@attrs.frozen
class ApiFaultEffect:
    """What one request must suffer, merged from every rule that matched it."""

    delay: float = 0.0
    stall: bool = False
    reset: bool = False
    error: StatusError | None = None
    expire_watch: bool = False
    body: bytes | None = None


class ApiFaultPlan:
    """Rules the fake consults on every request. Methods return self for chaining."""

    def __init__(self) -> None:
        self.rules: list[ApiFaultRule] = []

    def add(self, rule: ApiFaultRule) -> ApiFaultPlan:
        self.rules.append(rule)
        return self

    def fail(
        self,
        verb: str = ANY,
        resource: str = ANY,
        code: int = 500,
        message: str | None = None,
        *,
        reason: str | None = None,
        retry_after: int | None = None,
        times: int | None = None,
        name: str | None = None,
        namespace: str | None = None,
        path: str | None = None,
    ) -> ApiFaultPlan:
        """Answer matching requests with ``code`` and a Status body (every one, or ``times``)."""
        return self.add(
            ApiFaultRule(
                verb,
                resource,
                name,
                namespace,
                path,
                times,
                code=code,
                reason=reason,
                message=message,
                retry_after=retry_after,
            )
        )

    def fail_next(
        self, verb: str, resource: str, n: int, code: int = 500, message: str | None = None
    ) -> ApiFaultPlan:
        """Fail the next ``n`` matching requests with ``code``."""
        return self.fail(verb, resource, code, message, times=n)

    def conflict(
        self, verb: str = "update", resource: str = ANY, *, times: int | None = 1
    ) -> ApiFaultPlan:
        """409 "the object has been modified", as if someone wrote in between."""
        return self.fail(verb, resource, 409, times=times)

    def throttle(
        self,
        verb: str = ANY,
        resource: str = ANY,
        retry_after: int = 1,
        *,
        times: int | None = None,
    ) -> ApiFaultPlan:
        """429 TooManyRequests with ``Retry-After`` (API priority and fairness said no)."""
        return self.fail(verb, resource, 429, retry_after=retry_after, times=times)

    def forbid(
        self, verb: str = ANY, resource: str = ANY, *, times: int | None = None
    ) -> ApiFaultPlan:
        """403 Forbidden (RBAC or the NodeRestriction admission said no)."""
        return self.fail(verb, resource, 403, times=times)

    def delay(
        self, verb: str, resource: str, seconds: float, *, times: int | None = None
    ) -> ApiFaultPlan:
        """Add ``seconds`` of latency (trio clock) before matching requests are served."""
        return self.add(ApiFaultRule(verb, resource, times=times, delay=seconds))

    def stall(
        self, verb: str = ANY, resource: str = ANY, *, times: int | None = None
    ) -> ApiFaultPlan:
        """Never answer: the request waits until the client gives up or goes."""
        return self.add(ApiFaultRule(verb, resource, times=times, stall=True))

    def reset(self, verb: str = ANY, resource: str = ANY, *, times: int | None = 1) -> ApiFaultPlan:
        """Cut the connection instead of answering (a load balancer or a crash would)."""
        return self.add(ApiFaultRule(verb, resource, times=times, reset=True))

    def expire_next_watch(self, resource: str = ANY, *, times: int | None = 1) -> ApiFaultPlan:
        """The next matching watch gets an ERROR event with a 410 Expired Status."""
        return self.add(ApiFaultRule("watch", resource, times=times, expire_watch=True))

    def answer(
        self, verb: str, resource: str, body: bytes, *, times: int | None = None
    ) -> ApiFaultPlan:
        """Answer 200 with ``body`` as it is (for a watch: the whole stream, then its end)."""
        return self.add(ApiFaultRule(verb, resource, times=times, body=body))

    def clear(self, verb: str | None = None, resource: str | None = None) -> None:
        """Drop every rule, or those with exactly this verb and/or resource pattern."""
        if verb is None and resource is None:
            self.rules = []
            return
        self.rules = [
            r
            for r in self.rules
            if not (
                (verb is None or r.verb == verb) and (resource is None or r.resource == resource)
            )
        ]

    def take(self, info: RequestInfo) -> ApiFaultEffect:
        """Consume one request's worth of every matching rule and merge the effects."""
        delay, stall, reset, expire = 0.0, False, False, False
        error: StatusError | None = None
        body: bytes | None = None
        for rule in self.rules:
            if not rule.matches(info):
                continue
            if rule.expire_watch and info.verb != "watch":
                continue
            if rule.times is not None:
                rule.times -= 1
            delay += rule.delay
            stall = stall or rule.stall
            reset = reset or rule.reset
            expire = expire or rule.expire_watch
            if rule.code is not None and error is None:
                error = rule.error(info)
            if body is None:
                body = rule.body
        self.rules = [r for r in self.rules if r.times is None or r.times > 0]
        return ApiFaultEffect(delay, stall, reset, error, expire, body)
