"""Authentication and authorization of requests to the kubelet's TLS port, as upstream.

Authentication tries, in order: the TLS client certificate (verified against
``authentication.x509.clientCAFile`` during the handshake; CN is the user, O the groups),
then a bearer token checked by a TokenReview (``authentication.webhook``). A credential
that is presented but rejected fails the request (401) even when anonymous access is on;
only a request with no credential at all becomes ``system:anonymous``.

Authorization is ``AlwaysAllow`` or ``Webhook`` (a SubjectAccessReview per request). The
request maps to ``verb`` on ``nodes/<subresource>`` named after this node: with
fine-grained authorization (GA in 1.36) ``/pods``, ``/runningpods/``, ``/healthz`` and
``/configz`` first ask for their own subresource and fall back to ``proxy``; ``/stats``,
``/metrics``, ``/logs`` and ``/checkpoint`` have their own; everything else is ``proxy``.

Answers are cached as upstream: token reviews for ``cacheTTL`` (accepted or rejected),
access reviews for ``cacheAuthorizedTTL`` / ``cacheUnauthorizedTTL``. Failed calls are
never cached.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import attrs
import trio

from kubelet.config import KubeletConfiguration

from .backend import ReviewClient, TokenReviewResult

log = logging.getLogger(__name__)

ANONYMOUS_USER = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
"""The feature gate of the nodes/pods, nodes/healthz, nodes/configz subresources."""
AUTHENTICATED_GROUP = "system:authenticated"

_VERBS = {"POST": "create", "GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}

_FINE_GRAINED = (
    ("/pods", "pods"),
    ("/healthz", "healthz"),
    ("/configz", "configz"),
    ("/statusz", "statusz"),
    ("/runningpods/", "pods"),
)
_COARSE = (
    ("/stats/", "stats"),
    ("/metrics", "metrics"),
    ("/logs/", "log"),
    ("/checkpoint/", "checkpoint"),
)


class AuthConfigError(Exception):
    """The configured authentication or authorization cannot work (e.g. webhook, no client)."""


class AuthError(Exception):
    """A credential was presented and could not be accepted (or checking it failed)."""


@attrs.frozen
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


@attrs.frozen
class Attributes:
    """One authorization question: may ``user`` ``verb`` ``nodes/<subresource>`` ``name``."""

    user: User
    verb: str
    subresource: str
    name: str
    resource: str = "nodes"
    path: str = ""


def is_subpath(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it (``/metrics/probes`` under ``/metrics``)."""
    root = root.rstrip("/")
    return path == root or (path.startswith(root) and path[len(root)] == "/")


def subresources(path: str, *, fine_grained: bool = True) -> list[str]:
    """The ``nodes/<subresource>`` names to try for ``path``, in order."""
    out: list[str] = []
    if fine_grained:
        for root, sub in _FINE_GRAINED:
            if is_subpath(path, root):
                out.append(sub)
                break
    for root, sub in _COARSE:
        if is_subpath(path, root):
            out.append(sub)
            return out
    out.append("proxy")
    return out


def request_attributes(
    user: User, method: str, path: str, node_name: str, *, fine_grained: bool = True
) -> list[Attributes]:
    """What a request asks, one ``Attributes`` per subresource to try."""
    verb = _VERBS.get(method.upper(), "")
    return [
        Attributes(user, verb, sub, node_name, path=path)
        for sub in subresources(path, fine_grained=fine_grained)
    ]


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """A small expiring map on the trio clock (exact under ``autojump_clock``)."""

    def __init__(self, clock: Callable[[], float] = trio.current_time, max_entries: int = 4096):
        self._clock = clock
        self._max = max_entries
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        return value

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        if len(self._entries) >= self._max:
            now = self._clock()
            self._entries = {k: e for k, e in self._entries.items() if e[0] > now}
            if len(self._entries) >= self._max:
                self._entries.pop(next(iter(self._entries)))
        self._entries[key] = (self._clock() + ttl, value)

    def __len__(self) -> int:
        return len(self._entries)


def user_from_certificate(der: bytes) -> User:
    """The user a verified client certificate names: CN, and O as groups.

    cryptography loads with the first client certificate: a kubelet nobody reaches with
    one (a standalone node) never carries its native code."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    cert = x509.load_der_x509_certificate(der)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return User(
        name=str(names[0].value) if names else "",
        groups=tuple(str(o.value) for o in orgs),
    )


def bearer_token(authorization: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header ("" if none)."""
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return ""
    return token.strip()


class Authenticator:
    """x509, then bearer token via TokenReview, then (optionally) anonymous."""

    def __init__(
        self,
        *,
        anonymous: bool,
        reviews: ReviewClient | None,
        cache_ttl: float,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.anonymous = anonymous
        self._reviews = reviews
        self._ttl = cache_ttl
        self._cache: TTLCache[str, TokenReviewResult] = TTLCache(clock)

    async def authenticate(self, peer_certificate: bytes | None, authorization: str) -> User | None:
        """The request's user; None when it presented nothing and anonymous is off.

        Raises ``AuthError`` when a presented credential is rejected.
        """
        if peer_certificate:
            user = user_from_certificate(peer_certificate)
            if user.name:
                return _with_authenticated(user)
        token = bearer_token(authorization) if self._reviews is not None else ""
        if token:
            return _with_authenticated(await self._review(token))
        if self.anonymous:
            return User(ANONYMOUS_USER, (UNAUTHENTICATED_GROUP,))
        return None

    async def _review(self, token: str) -> User:
        assert self._reviews is not None
        key = hashlib.sha256(token.encode()).hexdigest()
        result = self._cache.get(key)
        if result is None:
            try:
                result = await self._reviews.token_review(token)
            except Exception as exc:
                raise AuthError(f"token review failed: {exc}") from exc
            self._cache.put(key, result, self._ttl)
        if not result.authenticated:
            raise AuthError(result.error or "invalid bearer token")
        return User(result.user, result.groups, result.uid)


def _with_authenticated(user: User) -> User:
    if AUTHENTICATED_GROUP in user.groups:
        return user
    return attrs.evolve(user, groups=(*user.groups, AUTHENTICATED_GROUP))


class Authorizer:
    """``AlwaysAllow``, or ``Webhook``: a cached SubjectAccessReview per question."""

    def __init__(
        self,
        mode: str,
        reviews: ReviewClient | None = None,
        *,
        authorized_ttl: float = 300.0,
        unauthorized_ttl: float = 30.0,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.mode = mode
        self._reviews = reviews
        self._authorized_ttl = authorized_ttl
        self._unauthorized_ttl = unauthorized_ttl
        self._cache: TTLCache[tuple[object, ...], bool] = TTLCache(clock)

    async def authorize(self, attributes: Attributes) -> bool:
        """Allowed or not; raises ``AuthError`` when the review itself failed."""
        if self.mode == "AlwaysAllow":
            return True
        if self._reviews is None:
            return False
        a = attributes
        key = (a.user.name, a.user.groups, a.verb, a.resource, a.subresource, a.name)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        try:
            allowed = await self._reviews.subject_access_review(
                a.user.name, a.user.groups, a.verb, a.resource, a.subresource, a.name
            )
        except Exception as exc:
            raise AuthError(f"subject access review failed: {exc}") from exc
        ttl = self._authorized_ttl if allowed else self._unauthorized_ttl
        self._cache.put(key, allowed, ttl)
        return allowed


@attrs.frozen
class Denial:
    """An HTTP answer that ends a request before its handler runs."""

    status: int
    body: str


@attrs.define
class KubeletAuth:
    """The main server's filter: authenticate, then authorize, or say why not."""

    authenticator: Authenticator
    authorizer: Authorizer
    node_name: str
    fine_grained: bool = True

    async def check(
        self, method: str, path: str, peer_certificate: bytes | None, authorization: str
    ) -> tuple[User | None, Denial | None]:
        """(user, None) to go on, or (user or None, the answer to send instead)."""
        try:
            user = await self.authenticator.authenticate(peer_certificate, authorization)
        except AuthError as exc:
            log.info("Unable to authenticate the request: %s", exc)
            return None, Denial(401, "Unauthorized")
        if user is None:
            return None, Denial(401, "Unauthorized")
        attrs_list = request_attributes(
            user, method, path, self.node_name, fine_grained=self.fine_grained
        )
        for a in attrs_list:
            try:
                if await self.authorizer.authorize(a):
                    return user, None
            except AuthError as exc:
                log.error(
                    "Authorization error (user=%s, verb=%s, resource=%s, subresource=%s): %s",
                    a.user.name, a.verb, a.resource, a.subresource, exc,
                )  # fmt: skip
                return user, Denial(
                    500,
                    f"Authorization error (user={a.user.name}, verb={a.verb}, "
                    f"resource={a.resource}, subresource={a.subresource})",
                )
        first = attrs_list[0]
        subs = " ".join(a.subresource for a in attrs_list)
        return user, Denial(
            403,
            f"Forbidden (user={user.name}, verb={first.verb}, resource={first.resource}, "
            f"subresource(s)=[{subs}])\n",
        )


def build_auth(
    config: KubeletConfiguration,
    node_name: str,
    reviews: ReviewClient | None,
    *,
    fine_grained: bool = True,
    clock: Callable[[], float] = trio.current_time,
) -> KubeletAuth:
    """The filter for ``config.authentication``/``authorization``.

    Raises ``AuthConfigError`` as upstream does when a webhook is configured without an
    API client to call it. ``fine_grained``: the KubeletFineGrainedAuthz gate.
    """
    authn, authz = config.authentication, config.authorization
    if authn.webhook.enabled and reviews is None:
        raise AuthConfigError("no client provided, cannot use webhook authentication")
    if authz.mode == "Webhook" and reviews is None:
        raise AuthConfigError("no client provided, cannot use webhook authorization")
    if authz.mode not in ("AlwaysAllow", "Webhook"):
        raise AuthConfigError(f"unknown authorization mode {authz.mode!r}")
    return KubeletAuth(
        authenticator=Authenticator(
            anonymous=authn.anonymous.enabled,
            reviews=reviews if authn.webhook.enabled else None,
            cache_ttl=authn.webhook.cache_ttl,
            clock=clock,
        ),
        authorizer=Authorizer(
            authz.mode,
            reviews,
            authorized_ttl=authz.webhook.cache_authorized_ttl,
            unauthorized_ttl=authz.webhook.cache_unauthorized_ttl,
            clock=clock,
        ),
        node_name=node_name,
        fine_grained=fine_grained,
    )
