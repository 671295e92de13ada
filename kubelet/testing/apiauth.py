"""Scripted authentication and authorization for FakeApiServer.

The kubelet asks the API server two questions about whoever calls its own :10250 —
TokenReview (who owns this bearer token?) and SubjectAccessReview (may this user do
this?) — and asks for service-account tokens for projected volumes (TokenRequest).
A test scripts the answers here:

* ``add_token(token, user, groups)``: a bearer token that authenticates (in
  TokenReview, and for requests to the fake itself). Tokens issued by TokenRequest are
  added automatically, with their expiry; an expired token no longer authenticates.
* ``allow(...)`` / ``deny(...)``: access rules matched in order (fnmatch patterns on
  user, verb, resource[/subresource], namespace, name, non-resource path); the first
  match decides, and with none ``default_allowed`` does (False: denied, as with RBAC).
"""

from __future__ import annotations

import base64
import fnmatch
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

__all__ = ["AccessRule", "ApiAuth", "TokenInfo"]

ISSUER = "https://kubernetes.default.svc.cluster.local"


@attrs.frozen
class TokenInfo:
    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    audiences: tuple[str, ...] = ()
    expires: float | None = None  # epoch seconds


@attrs.frozen
class AccessRule:
    """One scripted authorization answer; every pattern defaults to anything."""

    allowed: bool
    user: str = "*"
    verb: str = "*"
    resource: str = "*"  # "nodes/proxy", "pods", "*"
    namespace: str = "*"
    name: str = "*"
    path: str | None = None  # a non-resource path pattern ("/healthz*"); None: resources only
    group: str | None = None  # a group the user must be in
    reason: str = ""

    def matches(self, spec: Mapping[str, Any]) -> bool:
        user, groups = spec.get("user", ""), spec.get("groups") or []
        if not fnmatch.fnmatchcase(user, self.user):
            return False
        if self.group is not None and self.group not in groups:
            return False
        res, nonres = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if isinstance(nonres, dict):
            return (
                self.path is not None
                and fnmatch.fnmatchcase(nonres.get("path", ""), self.path)
                and fnmatch.fnmatchcase(nonres.get("verb", ""), self.verb)
            )
        if self.path is not None or not isinstance(res, dict):
            return False
        resource = res.get("resource", "")
        if res.get("subresource"):
            resource = f"{resource}/{res['subresource']}"
        return (
            fnmatch.fnmatchcase(res.get("verb", ""), self.verb)
            and fnmatch.fnmatchcase(resource, self.resource)
            and fnmatch.fnmatchcase(res.get("namespace", ""), self.namespace)
            and fnmatch.fnmatchcase(res.get("name", ""), self.name)
        )


class ApiAuth:
    """Token table and access rules; ``now`` is the fake's wall clock (epoch seconds)."""

    def __init__(self) -> None:
        self.tokens: dict[str, TokenInfo] = {}
        self.rules: list[AccessRule] = []
        self.default_allowed = False
        self.reviews: list[dict[str, Any]] = []
        self._issued = 0

    def add_token(
        self,
        token: str,
        user: str,
        groups: Sequence[str] = (),
        *,
        uid: str = "",
        audiences: Sequence[str] = (),
        expires: float | None = None,
    ) -> None:
        self.tokens[token] = TokenInfo(user, tuple(groups), uid, tuple(audiences), expires)

    def allow(self, user: str = "*", verb: str = "*", resource: str = "*", **kw: Any) -> None:
        """Allow matching requests (keyword patterns: namespace, name, path, group, reason)."""
        self.rules.append(AccessRule(True, user, verb, resource, **kw))

    def deny(self, user: str = "*", verb: str = "*", resource: str = "*", **kw: Any) -> None:
        """Deny matching requests (same patterns as ``allow``)."""
        self.rules.append(AccessRule(False, user, verb, resource, **kw))

    def authenticate(self, token: str, now: float) -> TokenInfo | None:
        info = self.tokens.get(token)
        if info is None or (info.expires is not None and now >= info.expires):
            return None
        return info

    def review_token(self, spec: Mapping[str, Any], now: float) -> dict[str, Any]:
        """A TokenReview's status for ``spec``."""
        info = self.authenticate(str(spec.get("token", "")), now)
        if info is None:
            return {"authenticated": False, "user": {}, "error": "invalid bearer token"}
        wanted = list(spec.get("audiences") or [])
        if wanted and info.audiences and not set(wanted) & set(info.audiences):
            return {"authenticated": False, "user": {}, "error": "token audiences do not match"}
        user: dict[str, Any] = {"username": info.user}
        if info.uid:
            user["uid"] = info.uid
        if info.groups:
            user["groups"] = list(info.groups)
        status: dict[str, Any] = {"authenticated": True, "user": user}
        if wanted or info.audiences:
            status["audiences"] = wanted or list(info.audiences)
        return status

    def review_access(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """A SubjectAccessReview's status for ``spec``; the review is kept in ``reviews``."""
        self.reviews.append(dict(spec))
        for rule in self.rules:
            if rule.matches(spec):
                if rule.allowed:
                    return {"allowed": True, "reason": rule.reason or "allowed by test rule"}
                return {
                    "allowed": False,
                    "denied": True,
                    "reason": rule.reason or "denied by test rule",
                }
        if self.default_allowed:
            return {"allowed": True, "reason": "allowed by default"}
        return {"allowed": False, "reason": "no rule allows it"}

    def issue(
        self,
        namespace: str,
        account: str,
        account_uid: str,
        audiences: Sequence[str],
        issued_at: float,
        expires: float,
        bound: Mapping[str, Any] | None,
    ) -> str:
        """A JWT-shaped service-account token (unsigned: ``alg`` none) that authenticates."""
        self._issued += 1
        claims: dict[str, Any] = {
            "aud": list(audiences),
            "exp": int(expires),
            "iat": int(issued_at),
            "iss": ISSUER,
            "jti": f"fake-{self._issued}",
            "nbf": int(issued_at),
            "sub": f"system:serviceaccount:{namespace}:{account}",
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": account, "uid": account_uid},
            },
        }
        if bound:
            claims["kubernetes.io"][str(bound.get("kind", "")).lower()] = {
                "name": bound.get("name", ""),
                "uid": bound.get("uid", ""),
            }
        token = (
            ".".join(
                _b64(json.dumps(part, separators=(",", ":")).encode())
                for part in ({"alg": "none", "kid": "fakeapiserver"}, claims)
            )
            + "."
            + _b64(f"fake-signature-{self._issued}".encode())
        )
        groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
        self.add_token(
            token,
            f"system:serviceaccount:{namespace}:{account}",
            groups,
            uid=account_uid,
            audiences=audiences,
            expires=expires,
        )
        return token


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
