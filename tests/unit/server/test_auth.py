"""Authentication, authorization, their caches and the path → attributes mapping (fake clock)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest
import trio

from kubelet.config import (
    KubeletAuthentication,
    KubeletAuthorization,
    KubeletConfiguration,
    KubeletWebhookAuthentication,
)
from kubelet.server import AuthConfigError, KubeletAuth, TokenReviewResult, build_auth
from kubelet.server.auth import (
    Authenticator,
    Authorizer,
    User,
    bearer_token,
    request_attributes,
    subresources,
    user_from_certificate,
)
from kubelet.server.certs import self_signed_pair


@attrs.define
class Reviews:
    tokens: dict[str, TokenReviewResult] = attrs.field(factory=dict)
    allow: set[str] = attrs.field(factory=set)
    token_calls: int = 0
    sar_calls: list[str] = attrs.field(factory=list)
    fail: bool = False

    async def token_review(self, token: str) -> TokenReviewResult:
        self.token_calls += 1
        if self.fail:
            raise ConnectionError("down")
        return self.tokens.get(token, TokenReviewResult(False))

    async def subject_access_review(
        self,
        user: str,
        groups: Sequence[str],
        verb: str,
        resource: str,
        subresource: str,
        name: str,
    ) -> bool:
        self.sar_calls.append(subresource)
        if self.fail:
            raise ConnectionError("down")
        return subresource in self.allow


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/pods", ["pods", "proxy"]),
        ("/pods/", ["pods", "proxy"]),
        ("/podsx", ["proxy"]),
        ("/runningpods/", ["pods", "proxy"]),
        ("/healthz", ["healthz", "proxy"]),
        ("/healthz/syncloop", ["healthz", "proxy"]),
        ("/configz", ["configz", "proxy"]),
        ("/stats/summary", ["stats"]),
        ("/stats", ["stats"]),
        ("/metrics", ["metrics"]),
        ("/metrics/probes", ["metrics"]),
        ("/metricsfoo", ["proxy"]),
        ("/logs/syslog", ["log"]),
        ("/checkpoint/ns/p/c", ["checkpoint"]),
        ("/containerLogs/ns/p/c", ["proxy"]),
        ("/exec/ns/p/c", ["proxy"]),
        ("/spec/", ["proxy"]),
    ],
)
def test_subresources(path: str, expected: list[str]) -> None:
    assert subresources(path) == expected


def test_coarse_authorization_without_the_feature() -> None:
    assert subresources("/pods", fine_grained=False) == ["proxy"]
    assert subresources("/stats/summary", fine_grained=False) == ["stats"]


def test_verbs() -> None:
    user = User("u")
    verbs = [
        request_attributes(user, m, "/x", "n")[0].verb
        for m in ("GET", "POST", "PUT", "PATCH", "DELETE")
    ]
    assert verbs == ["get", "create", "update", "patch", "delete"]
    assert request_attributes(user, "HEAD", "/x", "n")[0].verb == ""


def test_bearer_token() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer  abc ") == "abc"
    assert bearer_token("Basic abc") == ""
    assert bearer_token("") == ""


def test_user_from_certificate() -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    chain, _ = self_signed_pair("node1")
    cert = x509.load_pem_x509_certificates(chain)[0]
    user = user_from_certificate(cert.public_bytes(Encoding.DER))
    assert user.name.startswith("node1@") and user.groups == ()


async def test_token_cache_ttl(autojump_clock: trio.abc.Clock) -> None:
    reviews = Reviews(tokens={"t": TokenReviewResult(True, "bob", ("g",))})
    authn = Authenticator(anonymous=False, reviews=reviews, cache_ttl=120.0)
    user = await authn.authenticate(None, "Bearer t")
    assert user == User("bob", ("g", "system:authenticated"))
    await trio.sleep(119)
    await authn.authenticate(None, "Bearer t")
    assert reviews.token_calls == 1
    await trio.sleep(2)
    await authn.authenticate(None, "Bearer t")
    assert reviews.token_calls == 2


async def test_rejections_cached_errors_not(autojump_clock: trio.abc.Clock) -> None:
    from kubelet.server.auth import AuthError

    reviews = Reviews()
    authn = Authenticator(anonymous=True, reviews=reviews, cache_ttl=60.0)
    for _ in range(2):
        with pytest.raises(AuthError):
            await authn.authenticate(None, "Bearer forged")
    assert reviews.token_calls == 1
    reviews.fail = True
    for _ in range(2):
        with pytest.raises(AuthError):
            await authn.authenticate(None, "Bearer other")
    assert reviews.token_calls == 3
    anonymous = await authn.authenticate(None, "")
    assert anonymous == User("system:anonymous", ("system:unauthenticated",))


async def test_sar_cache_ttls(autojump_clock: trio.abc.Clock) -> None:
    reviews = Reviews(allow={"stats"})
    authz = Authorizer("Webhook", reviews, authorized_ttl=300.0, unauthorized_ttl=30.0)
    user = User("alice")
    [stats] = request_attributes(user, "GET", "/stats/summary", "node1")
    [metrics] = request_attributes(user, "GET", "/metrics", "node1")
    assert await authz.authorize(stats) and not await authz.authorize(metrics)
    await trio.sleep(31)
    assert await authz.authorize(stats) and not await authz.authorize(metrics)
    assert reviews.sar_calls == ["stats", "metrics", "metrics"]
    await trio.sleep(270)
    await authz.authorize(stats)
    assert reviews.sar_calls[-1] == "stats"


async def test_kubelet_auth_answers() -> None:
    reviews = Reviews(tokens={"t": TokenReviewResult(True, "bob")}, allow={"proxy"})
    auth = KubeletAuth(
        Authenticator(anonymous=False, reviews=reviews, cache_ttl=0),
        Authorizer("Webhook", reviews),
        "node1",
    )
    _, denial = await auth.check("GET", "/pods", None, "")
    assert denial is not None and (denial.status, denial.body) == (401, "Unauthorized")
    user, denial = await auth.check("GET", "/pods", None, "Bearer t")
    assert user is not None and user.name == "bob" and denial is None
    _, denial = await auth.check("GET", "/stats/summary", None, "Bearer t")
    assert denial is not None and denial.status == 403
    assert denial.body == (
        "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[stats])\n"
    )
    reviews.fail = True
    _, denial = await auth.check("GET", "/metrics", None, "Bearer t")
    assert denial is not None and denial.status == 401  # token reviews are not cached at ttl 0


async def test_authorization_error_is_500() -> None:
    reviews = Reviews(fail=True)
    auth = KubeletAuth(
        Authenticator(anonymous=True, reviews=None, cache_ttl=0),
        Authorizer("Webhook", reviews),
        "n",
    )
    _, denial = await auth.check("GET", "/pods", None, "")
    assert denial is not None and denial.status == 500
    assert denial.body == (
        "Authorization error (user=system:anonymous, verb=get, resource=nodes, subresource=pods)"
    )


def test_build_auth_needs_a_client_for_webhooks() -> None:
    config = KubeletConfiguration()  # v1beta1 defaults: webhook authn and authz
    with pytest.raises(AuthConfigError, match="webhook authentication"):
        build_auth(config, "n", None)
    no_token_webhook = attrs.evolve(
        config,
        authentication=KubeletAuthentication(webhook=KubeletWebhookAuthentication(enabled=False)),
    )
    with pytest.raises(AuthConfigError, match="webhook authorization"):
        build_auth(no_token_webhook, "n", None)
    allow = attrs.evolve(no_token_webhook, authorization=KubeletAuthorization(mode="AlwaysAllow"))
    assert build_auth(allow, "n", None).authorizer.mode == "AlwaysAllow"
    assert build_auth(allow, "n", None).fine_grained
    assert not build_auth(allow, "n", None, fine_grained=False).fine_grained
