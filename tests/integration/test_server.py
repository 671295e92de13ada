"""The kubelet's servers for real: TLS, client certificates, tokens, authorization, endpoints.

Real sockets on 127.0.0.1 with ephemeral ports, the real httpx client, FakeRuntime
in-process for the CRI side, a fake ReviewClient standing in for the API server. Real
clock: real TLS and HTTP/2 over loopback sockets, as clients see them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from kubelet.api import Container, ObjectMeta, Pod, PodSpec
from kubelet.config import (
    KubeletAnonymousAuthentication,
    KubeletAuthentication,
    KubeletAuthorization,
    KubeletConfiguration,
    KubeletWebhookAuthentication,
    KubeletX509Authentication,
    Options,
)
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.metrics import KubeletMetrics
from kubelet.server import Addresses, TokenReviewResult, serve
from kubelet.server.limits import Limits
from kubelet.testing import ContainerBehaviour, FakeRuntime

from .helpers import container_config, sandbox_config

NODE = "node1"
UID = "uid-web"


# -- PKI -----------------------------------------------------------------------------------


@attrs.frozen
class Pki:
    ca_file: Path
    good: tuple[Path, Path]
    """alice (O=devs), signed by the client CA."""
    bad: tuple[Path, Path]
    """mallory, signed by another CA."""


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _ca(name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                key_cert_sign=True,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _client(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], user: str, group: str, where: Path
) -> tuple[Path, Path]:
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, group),
                    x509.NameAttribute(NameOID.COMMON_NAME, user),
                ]
            )
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    crt, key_file = where / f"{user}.crt", where / f"{user}.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(_key_pem(key))
    return crt, key_file


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    where = tmp_path_factory.mktemp("pki")
    ca = _ca("client-ca")
    other = _ca("someone-else")
    ca_file = where / "ca.crt"
    ca_file.write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    return Pki(ca_file, _client(ca, "alice", "devs", where), _client(other, "mallory", "x", where))


# -- fakes ---------------------------------------------------------------------------------


@attrs.define
class FakeBackend:
    runtime: RuntimeClient
    images: ImageClient | None
    registry: CollectorRegistry
    pods: list[Pod] = attrs.field(factory=list)
    probe_registry: CollectorRegistry | None = None
    last_iteration: float | None = None

    def desired_pods(self) -> Sequence[Pod]:
        return self.pods

    def pod_by_name(self, namespace: str, name: str) -> Pod | None:
        for pod in self.pods:
            if (pod.metadata.namespace, pod.metadata.name) == (namespace, name):
                return pod
        return None

    def translate_pod_uid(self, uid: str) -> str:
        return uid

    def sync_loop_last_iteration(self) -> float | None:
        return self.last_iteration


@attrs.define
class FakeReviews:
    """The API server's TokenReview / SubjectAccessReview, scripted."""

    tokens: dict[str, TokenReviewResult] = attrs.field(factory=dict)
    allowed: set[tuple[str, str]] = attrs.field(factory=set)
    """(user, subresource) pairs the SAR allows."""
    token_calls: list[str] = attrs.field(factory=list)
    sar_calls: list[tuple[str, str, str]] = attrs.field(factory=list)
    down: bool = False
    """The API server cannot be reached: every review raises."""

    async def token_review(self, token: str) -> TokenReviewResult:
        self.token_calls.append(token)
        if self.down:
            raise RuntimeError("apiserver down")
        return self.tokens.get(token, TokenReviewResult(False, error="token not known"))

    async def subject_access_review(
        self,
        user: str,
        groups: Sequence[str],
        verb: str,
        resource: str,
        subresource: str,
        name: str,
    ) -> bool:
        assert (resource, name) == ("nodes", NODE)
        self.sar_calls.append((user, verb, subresource))
        return (user, subresource) in self.allowed


def web_pod() -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid=UID),
        spec=PodSpec(containers=(Container(name="app", image="busybox"),)),
    )


@attrs.define
class Env:
    fake: FakeRuntime
    backend: FakeBackend
    reviews: FakeReviews
    pki: Pki
    tmp: Path
    nursery: trio.Nursery
    metrics: KubeletMetrics
    limits: Limits | None = None
    """Each listener's (None: shares of the open-files limit, as ``serve`` picks)."""

    async def start(self, config: KubeletConfiguration) -> Addresses:
        options = Options(
            config=config,
            node_name=NODE,
            root_dir=str(self.tmp),
            cert_dir=str(self.tmp / "pki"),
        )
        addresses: Addresses = await self.nursery.start(
            lambda task_status: serve(
                self.backend,
                options,
                reviews=self.reviews,
                metrics=self.metrics,
                ephemeral_ports=True,
                limits=self.limits,
                task_status=task_status,
            )
        )
        return addresses

    def client(self, cert: tuple[Path, Path] | None = None, token: str = "") -> httpx.AsyncClient:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if cert is not None:
            context.load_cert_chain(str(cert[0]), str(cert[1]))
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(verify=context, headers=headers, timeout=10)

    async def run_web_pod(self, lines: Sequence[str] = ("one", "two", "three")) -> str:
        """A running pod ``default/web`` with container ``app`` that logged ``lines``."""
        runtime = self.backend.runtime
        self.fake.behave(ContainerBehaviour(log_lines=tuple(lines)), container="app")
        sandbox = sandbox_config("web", UID, log_directory=str(self.tmp / "pods" / "web"))
        sid = await runtime.run_pod_sandbox(sandbox)
        cid = await runtime.create_container(
            sid, container_config("app", pod="web", uid=UID, log_path="app/0.log"), sandbox
        )
        await runtime.start_container(cid)
        self.backend.pods.append(web_pod())
        return cid


def config(**changes: Any) -> KubeletConfiguration:
    """Servers on 127.0.0.1; the healthz port and read-only port on too."""
    base = KubeletConfiguration(
        address="127.0.0.1", healthz_bind_address="127.0.0.1", read_only_port=10255
    )
    return attrs.evolve(base, **changes)


def authn(
    *, client_ca: Path | None = None, webhook: bool = True, anonymous: bool = False
) -> KubeletAuthentication:
    return KubeletAuthentication(
        x509=KubeletX509Authentication(client_ca_file=str(client_ca) if client_ca else ""),
        webhook=KubeletWebhookAuthentication(enabled=webhook),
        anonymous=KubeletAnonymousAuthentication(enabled=anonymous),
    )


@pytest.fixture
async def env(
    clients: tuple[RuntimeClient, ImageClient], fake: FakeRuntime, pki: Pki, short_tmp: Path
) -> AsyncIterator[Env]:
    runtime, images = clients
    metrics = KubeletMetrics(NODE)
    runtime.channel.observer = metrics.observe_runtime_operation
    backend = FakeBackend(runtime, images, metrics.registry)
    async with trio.open_nursery() as nursery:
        yield Env(fake, backend, FakeReviews(), pki, short_tmp, nursery, metrics)
        nursery.cancel_scope.cancel()


def url(address: str, path: str) -> str:
    return f"https://{address}{path}"


# -- authentication and authorization -------------------------------------------------------

ENDPOINTS = {
    "/pods": ["pods", "proxy"],
    "/runningpods/": ["pods", "proxy"],
    "/healthz": ["healthz", "proxy"],
    "/configz": ["configz", "proxy"],
    "/stats/summary": ["stats"],
    "/metrics": ["metrics"],
    "/metrics/probes": ["metrics"],
    "/spec/": ["proxy"],
    "/containerLogs/default/web/app": ["proxy"],
}


async def test_no_credentials_is_unauthorized_unless_anonymous(env: Env) -> None:
    addr = await env.start(config(authentication=authn(client_ca=env.pki.ca_file)))
    async with env.client() as client:
        for path in ENDPOINTS:
            r = await client.get(url(addr.main, path))
            assert (r.status_code, r.text) == (401, "Unauthorized"), path
    assert env.reviews.sar_calls == []


async def test_anonymous_with_always_allow(env: Env) -> None:
    await env.run_web_pod()
    addr = await env.start(
        config(
            authentication=authn(webhook=False, anonymous=True),
            authorization=KubeletAuthorization(mode="AlwaysAllow"),
        )
    )
    async with env.client() as client:
        for path in ENDPOINTS:
            r = await client.get(url(addr.main, path))
            assert r.status_code == 200, (path, r.text)


async def test_anonymous_is_authorized_as_system_anonymous(env: Env) -> None:
    addr = await env.start(config(authentication=authn(webhook=False, anonymous=True)))
    async with env.client() as client:
        r = await client.get(url(addr.main, "/pods"))
    assert r.status_code == 403
    assert r.text == (
        "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"
    )
    assert env.reviews.sar_calls == [
        ("system:anonymous", "get", "pods"),
        ("system:anonymous", "get", "proxy"),
    ]


async def test_client_certificate_matrix(env: Env) -> None:
    await env.run_web_pod()
    env.reviews.allowed = {("alice", sub) for subs in ENDPOINTS.values() for sub in subs}
    addr = await env.start(config(authentication=authn(client_ca=env.pki.ca_file)))
    async with env.client(env.pki.good) as client:
        for path in ENDPOINTS:
            r = await client.get(url(addr.main, path))
            assert r.status_code == 200, (path, r.status_code, r.text)
    # the first subresource asked is the fine-grained one, allowed at once
    asked = {sub for _, _, sub in env.reviews.sar_calls}
    assert asked == {subs[0] for subs in ENDPOINTS.values()}
    # a certificate from an unknown CA never completes the handshake
    async with env.client(env.pki.bad) as client:
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            await client.get(url(addr.main, "/pods"))


async def test_fine_grained_falls_back_to_proxy(env: Env) -> None:
    env.reviews.allowed = {("alice", "proxy")}
    addr = await env.start(config(authentication=authn(client_ca=env.pki.ca_file)))
    async with env.client(env.pki.good) as client:
        assert (await client.get(url(addr.main, "/pods"))).status_code == 200
        r = await client.get(url(addr.main, "/stats/summary"))
    assert r.status_code == 403
    assert "user=alice, verb=get, resource=nodes, subresource(s)=[stats]" in r.text
    assert env.reviews.sar_calls == [
        ("alice", "get", "pods"),
        ("alice", "get", "proxy"),
        ("alice", "get", "stats"),
    ]


async def test_tokens_reviewed_and_cached(env: Env) -> None:
    env.reviews.tokens["good"] = TokenReviewResult(True, "bob", ("team",))
    env.reviews.allowed = {("bob", "metrics")}
    addr = await env.start(config())
    async with env.client(token="good") as client:
        assert (await client.get(url(addr.main, "/metrics"))).status_code == 200
        assert (await client.get(url(addr.main, "/metrics"))).status_code == 200
        denied = await client.get(url(addr.main, "/pods"))
    assert denied.status_code == 403
    assert env.reviews.token_calls == ["good"]  # cacheTTL
    # the second /metrics was answered from the SAR cache too
    assert env.reviews.sar_calls.count(("bob", "get", "metrics")) == 1
    async with env.client(token="forged") as client:
        r = await client.get(url(addr.main, "/metrics"))
    assert (r.status_code, r.text) == (401, "Unauthorized")


async def test_rejected_token_fails_even_with_anonymous(env: Env) -> None:
    addr = await env.start(
        config(
            authentication=authn(anonymous=True),
            authorization=KubeletAuthorization(mode="AlwaysAllow"),
        )
    )
    async with env.client(token="forged") as client:
        assert (await client.get(url(addr.main, "/pods"))).status_code == 401
    async with env.client() as client:
        assert (await client.get(url(addr.main, "/pods"))).status_code == 200


async def test_review_failure_is_not_cached(env: Env) -> None:
    env.reviews.down = True
    addr = await env.start(config())
    async with env.client(token="t") as client:
        for _ in range(2):
            assert (await client.get(url(addr.main, "/pods"))).status_code == 401
    assert env.reviews.token_calls == ["t", "t"]


# -- the other servers ---------------------------------------------------------------------


async def test_healthz_port_and_read_only_port(env: Env) -> None:
    await env.run_web_pod()
    addr = await env.start(config())
    async with httpx.AsyncClient(timeout=10) as client:
        r = await client.get(f"http://{addr.healthz}/healthz")
        assert (r.status_code, r.text) == (200, "ok")
        r = await client.get(f"http://{addr.read_only}/pods")
        assert r.status_code == 200
        body = r.json()
        assert (body["kind"], body["apiVersion"]) == ("PodList", "v1")
        assert [p["metadata"]["name"] for p in body["items"]] == ["web"]
        r = await client.get(f"http://{addr.read_only}/containerLogs/default/web/app")
        assert (r.status_code, r.text) == (405, "Debug endpoints are disabled.\n")
        assert (await client.get(f"http://{addr.read_only}/configz")).status_code == 404
        r = await client.get(f"http://{addr.read_only}/healthz?verbose")
        assert r.text == "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n"


async def test_debugging_handlers_disabled(env: Env) -> None:
    addr = await env.start(
        config(
            authentication=authn(webhook=False, anonymous=True),
            authorization=KubeletAuthorization(mode="AlwaysAllow"),
            enable_debugging_handlers=False,
        )
    )
    async with env.client() as client:
        for path in ("/containerLogs/default/web/app", "/runningpods/", "/exec/a/b/c", "/logs/"):
            r = await client.get(url(addr.main, path))
            assert (r.status_code, r.text) == (405, "Debug endpoints are disabled.\n"), path
        assert (await client.get(url(addr.main, "/pods"))).status_code == 200


# -- endpoints -------------------------------------------------------------------------------


@pytest.fixture
async def open_server(env: Env) -> Callable[[], Awaitable[tuple[Env, httpx.AsyncClient, str]]]:
    async def start() -> tuple[Env, httpx.AsyncClient, str]:
        addr = await env.start(
            config(
                authentication=authn(webhook=False, anonymous=True),
                authorization=KubeletAuthorization(mode="AlwaysAllow"),
            )
        )
        return env, env.client(), addr.main

    return start


async def test_metrics_parse(open_server: Callable[[], Awaitable[tuple[Env, Any, str]]]) -> None:
    env, client, addr = await open_server()
    await env.run_web_pod()
    async with client:
        text = (await client.get(url(addr, "/metrics"))).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    node = families["kubelet_node_name"].samples[0]
    assert (node.labels, node.value) == ({"node": NODE}, 1.0)
    ops = {
        s.labels["operation_type"]: s.value
        for s in families["kubelet_runtime_operations"].samples
        if s.name == "kubelet_runtime_operations_total"
    }
    assert ops["run_podsandbox"] == 1 and ops["start_container"] == 1
    assert "kubelet_runtime_operations_duration_seconds" in families
    assert "process_cpu_seconds" in families
    http = families["kubelet_http_requests"].samples
    assert any(s.labels["path"] == "metrics" for s in http)
    # the event-loop monitor runs with the servers: its families are there from the start
    assert families["kubelet_event_loop_lag_max_seconds"].type == "gauge"
    assert families["kubelet_event_loop_lag_seconds"].type == "histogram"


async def test_pods_configz_runningpods_spec(
    open_server: Callable[[], Awaitable[tuple[Env, Any, str]]],
) -> None:
    env, client, addr = await open_server()
    await env.run_web_pod()
    async with client:
        pods = (await client.get(url(addr, "/pods"))).json()
        configz = (await client.get(url(addr, "/configz"))).json()
        running = (await client.get(url(addr, "/runningpods/"))).json()
        spec = (await client.get(url(addr, "/spec/"))).json()
        missing = await client.get(url(addr, "/nothing"))
        post = await client.post(url(addr, "/pods"))
    assert pods["items"][0]["spec"]["containers"][0]["name"] == "app"
    assert configz["kubeletconfig"]["syncFrequency"] == "1m0s"
    assert configz["kubeletconfig"]["readOnlyPort"] == 10255
    [item] = running["items"]
    assert item["metadata"] == {
        "name": "web",
        "namespace": "default",
        "uid": UID,
        "creationTimestamp": None,
    }
    assert [c["name"] for c in item["spec"]["containers"]] == ["app"]
    assert spec["num_cores"] >= 1 and spec["memory_capacity"] > 0
    assert (missing.status_code, missing.text) == (404, "404 page not found\n")
    assert post.status_code == 405


async def test_stats_summary(open_server: Callable[[], Awaitable[tuple[Env, Any, str]]]) -> None:
    env, client, addr = await open_server()
    await env.run_web_pod()
    async with client:
        summary = (await client.get(url(addr, "/stats/summary"))).json()
        resource = (await client.get(url(addr, "/metrics/resource"))).text
    assert summary["node"]["nodeName"] == NODE
    assert summary["node"]["memory"]["workingSetBytes"] > 0
    assert summary["node"]["fs"]["capacityBytes"] > 0
    [pod] = summary["pods"]
    assert pod["podRef"] == {"name": "web", "namespace": "default", "uid": UID}
    assert [c["name"] for c in pod["containers"]] == ["app"]
    families = {f.name for f in text_string_to_metric_families(resource)}
    assert {"node_cpu_usage_seconds", "container_start_time_seconds"} <= families


async def test_container_logs(open_server: Callable[[], Awaitable[tuple[Env, Any, str]]]) -> None:
    env, client, addr = await open_server()
    await env.run_web_pod(["one", "two", "three"])
    base = url(addr, "/containerLogs/default/web/app")
    async with client:
        assert (await client.get(base)).text == "one\ntwo\nthree\n"
        assert (await client.get(base + "?tailLines=1")).text == "three\n"
        assert (await client.get(base + "?tail=all")).text == "one\ntwo\nthree\n"
        assert (await client.get(base + "?limitBytes=5")).text == "one\nt"
        stamped = (await client.get(base + "?timestamps=true&tailLines=1")).text
        assert stamped.endswith(" three\n") and len(stamped.split(" ")[0]) == 30
        r = await client.get(base + "?tailLines=x")
        assert (r.status_code, r.text) == (400, '{"message": "Unable to decode query."}')
        r = await client.get(base + "?tailLines=-1")
        assert (r.status_code, r.text) == (422, '{"message": "Invalid request."}')
        for huge in ("sinceSeconds=1" + "0" * 400, "limitBytes=9223372036854775808"):
            r = await client.get(base + "?" + huge)  # not an int64: 400, not a broken 200
            assert (r.status_code, r.text) == (400, '{"message": "Unable to decode query."}')
        assert (await client.get(base + "?sinceSeconds=9223372036854775807")).text.count("\n") == 3
        r = await client.get(base + "?previous=true")
        assert r.status_code == 400
        assert r.text == "previous terminated container 'app' in pod 'web' not found"
        r = await client.get(url(addr, "/containerLogs/default/nope/app"))
        assert (r.status_code, r.text) == (404, 'pod "nope" does not exist')
        r = await client.get(url(addr, "/containerLogs/default/web/db"))
        assert (r.status_code, r.text) == (404, 'container "db" not found in pod "web"')


async def test_container_logs_follow_until_exit(
    open_server: Callable[[], Awaitable[tuple[Env, Any, str]]],
) -> None:
    env, client, addr = await open_server()
    cid = await env.run_web_pod(["first"])
    log_file = Path(env.fake.containers[cid].log_path)
    received: list[str] = []

    async def follow() -> None:
        async with client.stream("GET", url(addr, "/containerLogs/default/web/app?follow")) as r:
            async for chunk in r.aiter_text():
                received.append(chunk)

    # the stream ends by itself once the container has exited
    with trio.fail_after(10):
        async with client, trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            while "".join(received) != "first\n":
                await trio.sleep(0.05)
            with log_file.open("a") as fh:
                fh.write("2030-01-01T00:00:00.000000001Z stdout F second\n")
            while "".join(received) != "first\nsecond\n":
                await trio.sleep(0.05)
            env.fake.exit_container(cid, 0)
    assert "".join(received) == "first\nsecond\n"


def _release_fifo_readers(path: Path, stop: threading.Event, after: float) -> None:
    """From ``after`` seconds on, open ``path`` for writing now and then, so a reader stuck
    in ``open`` of a FIFO there wakes up (the test then fails rather than hangs)."""
    if stop.wait(after):
        return
    while not stop.is_set():
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        stop.wait(0.05)


async def test_a_fifo_or_a_link_at_the_log_path_is_not_read(
    open_server: Callable[[], Awaitable[tuple[Env, Any, str]]],
) -> None:
    """Whoever can write the log directory can put a FIFO or a link at the log path: a
    follower reads the old file to its end and stops, /healthz answers meanwhile, and a
    new request for the log is a 400."""
    env, client, addr = await open_server()
    cid = await env.run_web_pod(["first"])
    log_file = Path(env.fake.containers[cid].log_path)
    base = url(addr, "/containerLogs/default/web/app")
    received: list[str] = []
    ended = trio.Event()

    async def follow() -> None:
        async with client.stream("GET", base + "?follow") as r:
            async for chunk in r.aiter_text():
                received.append(chunk)
        ended.set()

    fifo = log_file.with_name("fifo")
    os.mkfifo(fifo)
    stop = threading.Event()
    helper = threading.Thread(target=_release_fifo_readers, args=(log_file, stop, 3.0))
    helper.start()
    try:
        async with client, trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            with trio.fail_after(5):
                while "".join(received) != "first\n":
                    await trio.sleep(0.05)
            os.rename(fifo, log_file)
            await trio.sleep(0.3)  # the follower's next look at the path
            start = trio.current_time()
            assert (await client.get(url(addr, "/healthz"))).text == "ok"
            assert trio.current_time() - start < 1.5
            with trio.fail_after(5):
                await ended.wait()
            r = await client.get(base)
            assert (r.status_code, r.text) == (
                400, f'failed to open log file "{log_file}": not a regular file'
            )
            log_file.unlink()
            log_file.symlink_to(env.tmp / "elsewhere")
            (env.tmp / "elsewhere").write_text("2030-01-01T00:00:00Z stdout F secret\n")
            r = await client.get(base)
            assert (r.status_code, r.text) == (
                400, f'failed to open log file "{log_file}": a symbolic link'
            )
    finally:
        stop.set()
        helper.join()
    assert "".join(received) == "first\n"


async def test_follow_stops_when_the_client_goes(
    open_server: Callable[[], Awaitable[tuple[Env, Any, str]]],
) -> None:
    env, client, addr = await open_server()
    await env.run_web_pod(["first"])
    calls_before = len(env.fake.calls_of("ContainerStatus"))
    async with client:
        with trio.move_on_after(0.5):
            async with client.stream(
                "GET", url(addr, "/containerLogs/default/web/app?follow")
            ) as r:
                async for _ in r.aiter_text():
                    pass
    # the server noticed the disconnect: no more running checks after a moment
    await trio.sleep(1.5)
    settled = len(env.fake.calls_of("ContainerStatus"))
    await trio.sleep(1.5)
    assert len(env.fake.calls_of("ContainerStatus")) == settled > calls_before
    async with env.client() as again:
        assert (await again.get(url(addr, "/healthz"))).text == "ok"
