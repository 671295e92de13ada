"""TLS bootstrap and certificate rotation against FakeApiServer's CSR API, in fake time.

The fake serves HTTPS with a test CA and checks client certificates with its own clock
(an expired one gets 401 on every request, as kube-apiserver does); ``CsrController``
approves and signs requests like kube-controller-manager.
"""

from __future__ import annotations

import base64
import datetime
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from cryptography import x509
from prometheus_client import CollectorRegistry

from kubelet.api import PODS, ApiClient, ApiError, NodeAddress, WatchEvent, load_kubeconfig
from kubelet.config import build_options, parse_flags
from kubelet.node.certificates import (
    CertificateManager,
    ClientRotation,
    FileStore,
    RotatingTransport,
    client_manager,
    load_client_cert,
    transport_for,
)
from kubelet.node.certificates import csr as csrmod
from kubelet.node.certificates.bootstrap import TMP_KEY_FILE, clients_for
from kubelet.node.certificates.metrics import client_metrics, server_metrics
from kubelet.node.certificates.request import (
    RequestFailed,
    request_certificate,
    wait_for_certificate,
)
from kubelet.node.certificates.serving import ServingCertificate
from kubelet.node.certificates.store import CLIENT_PREFIX, SERVER_PREFIX
from kubelet.testing import FakeApiServer
from kubelet.testing.certs import NO_CHECK_TIME
from kubelet.testing.csrsigner import CsrController, csrapproving_and_serving

NODE = "node-1"
TOKEN = "abcdef.0123456789abcdef"


@asynccontextmanager
async def tls_api(tmp: Path) -> AsyncIterator[FakeApiServer]:
    api = FakeApiServer(require_auth=True)
    api.auth.add_token(TOKEN, "system:bootstrap:abcdef", ["system:bootstrappers"])
    async with api.serve(tls_dir=tmp / "apiserver-pki"):
        yield api


def bootstrap_kubeconfig(api: FakeApiServer, path: Path) -> Path:
    assert api.ca is not None
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kubernetes",
                "cluster": {"server": api.url, "certificate-authority": str(api.ca.cert_path)},
            }
        ],
        "users": [{"name": "tls-bootstrap-token-user", "user": {"token": TOKEN}}],
        "contexts": [
            {
                "name": "boot",
                "context": {"cluster": "kubernetes", "user": "tls-bootstrap-token-user"},
            }
        ],
        "current-context": "boot",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def csrs(api: FakeApiServer) -> dict[str, Any]:
    return api.objects("CertificateSigningRequest")


async def bootstrap(api: FakeApiServer, tmp: Path) -> tuple[str, str, str]:
    """Run TLS bootstrap to completion; (kubeconfig, bootstrap kubeconfig, cert dir)."""
    boot = bootstrap_kubeconfig(api, tmp / "bootstrap-kubelet.conf")
    kubeconfig, cert_dir = tmp / "kubelet.conf", tmp / "pki"
    await load_client_cert(str(kubeconfig), str(boot), str(cert_dir), NODE, now=api.now)
    return str(kubeconfig), str(boot), str(cert_dir)


async def test_bootstrap_from_nothing_to_a_node_identity(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with tls_api(tmp_path) as api, trio.open_nursery() as nursery:
        controller = CsrController(api, api.ca)  # type: ignore[arg-type]
        await nursery.start(controller.run)
        kubeconfig, _, cert_dir = await bootstrap(api, tmp_path)
        [(name, obj)] = csrs(api).items()
        assert name.startswith("node-csr-")
        assert obj["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
        assert obj["spec"]["usages"] == ["digital signature", "client auth"]
        assert obj["spec"]["username"] == "system:bootstrap:abcdef"
        request = x509.load_pem_x509_csr(base64.b64decode(obj["spec"]["request"]))
        assert request.subject.rfc4514_string() == "CN=system:node:node-1,O=system:nodes"
        assert (Path(cert_dir) / "kubelet-client-current.pem").is_symlink()
        assert not (Path(cert_dir) / TMP_KEY_FILE).exists()
        # the written kubeconfig authenticates as the node
        api.clear_requests()
        async with ApiClient.open(load_kubeconfig(kubeconfig)) as client:
            await client.get(PODS.path("default"))
        assert [r.user for r in api.requests] == ["system:node:node-1"]
        # a second start finds a valid kubeconfig and asks for nothing
        api.clear_requests()
        boot = str(tmp_path / "bootstrap-kubelet.conf")
        await load_client_cert(kubeconfig, boot, cert_dir, NODE, now=api.now)
        assert api.requests == []
        nursery.cancel_scope.cancel()


async def test_a_restart_mid_way_resumes_the_pending_request(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with tls_api(tmp_path) as api, trio.open_nursery() as nursery:
        controller = CsrController(api, api.ca, policy=lambda _: None)  # type: ignore[arg-type]
        await nursery.start(controller.run)
        boot = bootstrap_kubeconfig(api, tmp_path / "bootstrap-kubelet.conf")
        kubeconfig, cert_dir = tmp_path / "kubelet.conf", tmp_path / "pki"
        with trio.move_on_after(600):  # nobody approves: the "kubelet" is stopped waiting
            await load_client_cert(str(kubeconfig), str(boot), str(cert_dir), NODE, now=api.now)
        [name] = csrs(api)
        assert (cert_dir / TMP_KEY_FILE).exists() and not kubeconfig.exists()
        controller.decide(name, "Approved")
        api.clear_requests()
        await load_client_cert(str(kubeconfig), str(boot), str(cert_dir), NODE, now=api.now)
        assert list(csrs(api)) == [name]  # the same request, picked up again
        create = api.requests_of("create", "certificatesigningrequests")
        assert [r.status for r in create] == [409]
        assert load_kubeconfig(str(kubeconfig)).client_cert_files is not None
        nursery.cancel_scope.cancel()


async def test_a_denied_request_is_reported_and_asked_again_with_a_new_key(
    tmp_path: Path, autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    verdicts = iter(["Denied", "Approved"])
    async with tls_api(tmp_path) as api, trio.open_nursery() as nursery:
        controller = CsrController(api, api.ca, policy=lambda _: next(verdicts))  # type: ignore[arg-type]
        await nursery.start(controller.run)
        start = trio.current_time()
        with caplog.at_level(logging.INFO, "kubelet.node.certificates"):
            await bootstrap(api, tmp_path)
        assert trio.current_time() - start >= 2.0  # backed off before asking again
        assert len(csrs(api)) == 2  # a second request, under another name
        assert "certificate signing request is denied, reason: AutoDenied" in caplog.text
        nursery.cancel_scope.cancel()


class PodWatcher:
    """A reflector in small: list, then watch from the list's version, again after every
    end; records every pod name it sees added."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.seen: list[str] = []
        self.errors: list[str] = []

    async def run(self) -> None:
        rv = ""
        while True:
            if not rv:
                page = await self.client.list(PODS.path("default"))
                rv = page.resource_version
                self.seen += [
                    p["metadata"]["name"]
                    for p in page.items
                    if p["metadata"]["name"] not in self.seen
                ]

            async def on_event(event: WatchEvent) -> None:
                nonlocal rv
                if event.type == "ADDED" and event.object["metadata"]["name"] not in self.seen:
                    self.seen.append(event.object["metadata"]["name"])
                rv = event.resource_version or rv

            try:
                await self.client.watch(
                    PODS.path("default"), on_event, resource_version=rv, timeout_seconds=420
                )
            except ApiError as exc:
                self.errors.append(f"{exc.code} {exc}")
                if exc.code == 410:
                    rv = ""
                await trio.sleep(1)


async def test_client_certificate_rotated_twice_without_losing_watch_events(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Certificates live one hour; over three hours the client rotates at least twice and
    keeps its watch: the fake refuses an expired certificate (401), so any request made
    with a stale one would show up as an error."""
    async with tls_api(tmp_path) as api, trio.open_nursery() as nursery:
        controller = CsrController(api, api.ca, lifetime=3600)  # type: ignore[arg-type]
        await nursery.start(controller.run)
        kubeconfig, boot, cert_dir = await bootstrap(api, tmp_path)
        registry = CollectorRegistry()
        metrics, connect = client_metrics(registry, api.now)
        manager = CertificateManager(
            name="kubernetes.io/kube-apiserver-client-kubelet",
            store=FileStore(CLIENT_PREFIX, cert_dir),
            signer=csrmod.CLIENT_SIGNER,
            template=lambda: csrmod.client_template(NODE),
            usages=csrmod.client_usages,
            client_for=clients_for(kubeconfig, boot),
            now=api.now,
            metrics=metrics,
        )
        connect(manager.expiry)
        first = manager.current()
        # one hour, backdated 5 minutes on top (upstream signs short certificates so)
        assert first is not None and first.not_after - first.not_before == 3600 + 300
        connection = load_kubeconfig(kubeconfig)
        transport = RotatingTransport(transport_for(connection))
        rotation = ClientRotation(connection, transport)
        async with ApiClient.open(connection, transport=transport) as client:
            await nursery.start(transport.run)
            nursery.start_soon(rotation.follow, manager.subscribe())
            await nursery.start(manager.run)
            watcher = PodWatcher(client)
            nursery.start_soon(watcher.run)
            created = []
            for i in range(36):  # a pod every 5 minutes for three hours
                await trio.sleep(300)
                name = f"pod-{i}"
                api.create(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                    }
                )
                created.append(name)
            await trio.sleep(5)
            assert manager.rotations >= 2 and transport.generation == manager.rotations
            assert watcher.seen == created
            assert watcher.errors == []
            node_requests = [r for r in api.requests if r.user == "system:node:node-1"]
            assert node_requests and all(r.status != 401 for r in node_requests)
            assert api.count(None, None) and not [r for r in api.requests if r.status == 401]
            assert transport.retiring <= 1
            ttl = registry.get_sample_value("kubelet_certificate_manager_client_ttl_seconds")
            current = manager.current()
            assert current is not None and ttl == int(current.not_after - api.now())
            assert (
                registry.get_sample_value(
                    "kubelet_certificate_manager_client_expiration_renew_errors"
                )
                == 0
            )
            nursery.cancel_scope.cancel()


def embedded_kubeconfig(api: FakeApiServer, path: Path, chain: bytes, key: bytes) -> Path:
    """A kubeconfig as kubeadm init writes its first one: certificate and key inline."""
    assert api.ca is not None
    user = {
        "client-certificate-data": base64.b64encode(chain).decode(),
        "client-key-data": base64.b64encode(key).decode(),
    }
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kubernetes",
                "cluster": {"server": api.url, "certificate-authority": str(api.ca.cert_path)},
            }
        ],
        "users": [{"name": "node", "user": user}],
        "contexts": [{"name": "node", "context": {"cluster": "kubernetes", "user": "node"}}],
        "current-context": "node",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_an_embedded_client_certificate_is_stored_and_replaced_at_once(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream (buildClientCertificateManager, getCurrentCertificateOrBootstrap): with
    no valid pair in --cert-dir, the one --kubeconfig embeds becomes the current pair,
    is written to kubelet-client-current.pem and is rotated out immediately; a restart
    that finds that stored pair still valid waits for 70-90 % of its lifetime."""
    async with tls_api(tmp_path) as api, trio.open_nursery() as nursery:
        assert api.ca is not None
        await nursery.start(CsrController(api, api.ca, policy=lambda _: None).run)  # pending
        key = csrmod.generate_key()
        start = datetime.datetime.fromtimestamp(api.now(), datetime.UTC)
        chain = api.ca.sign_csr(
            csrmod.make_csr(key, csrmod.client_template(NODE)),
            start - datetime.timedelta(minutes=5),
            start + datetime.timedelta(hours=1),
        )
        kubeconfig = embedded_kubeconfig(api, tmp_path / "kubelet.conf", chain, csrmod.key_pem(key))
        cert_dir = tmp_path / "pki"
        flags = [f"--kubeconfig={kubeconfig}", f"--cert-dir={cert_dir}"]
        options = build_options(
            parse_flags([*flags, f"--hostname-override={NODE}", "--rotate-certificates"])
        )
        connection = load_kubeconfig(kubeconfig)
        registry = CollectorRegistry()
        manager = client_manager(options, connection, registry, api.now, ApiClient.open)
        assert manager is not None
        leaf = x509.load_pem_x509_certificate(chain)
        current = manager.current()
        assert current is not None and current.serial == leaf.serial_number
        stored = x509.load_pem_x509_certificate(
            (cert_dir / "kubelet-client-current.pem").read_bytes()
        )
        assert stored.serial_number == leaf.serial_number
        ttl = registry.get_sample_value("kubelet_certificate_manager_client_ttl_seconds")
        assert ttl is not None and 3500 < ttl <= 3600
        await nursery.start(manager.run)
        await trio.sleep(1)
        [(_, obj)] = csrs(api).items()  # asked for its own certificate at once
        assert obj["spec"]["signerName"] == csrmod.CLIENT_SIGNER
        nursery.cancel_scope.cancel()
    again = client_manager(options, connection, CollectorRegistry(), api.now, ApiClient.open)
    assert again is not None
    first = again.current()
    assert first is not None and first.serial == leaf.serial_number
    not_before, not_after = first.not_before, first.not_after
    deadline = again.next_deadline()
    total = not_after - not_before
    assert not_before + 0.7 * total <= deadline <= not_before + 0.9 * total


def serving_manager(
    api: FakeApiServer,
    client: ApiClient,
    cert_dir: Path,
    addresses: Callable[[], list[NodeAddress]],
    registry: CollectorRegistry,
) -> CertificateManager:
    metrics, connect = server_metrics(registry, api.now)

    @asynccontextmanager
    async def same_client(_: object) -> AsyncIterator[ApiClient]:
        yield client

    manager = CertificateManager(
        name="kubernetes.io/kubelet-serving",
        store=FileStore(SERVER_PREFIX, str(cert_dir)),
        signer=csrmod.SERVING_SIGNER,
        template=lambda: csrmod.serving_template(NODE, addresses()),
        usages=csrmod.serving_usages,
        client_for=same_client,
        now=api.now,
        metrics=metrics,
    )
    connect(manager.expiry)
    return manager


def node_client(api: FakeApiServer, tmp: Path) -> AbstractAsyncContextManager[ApiClient]:
    return ApiClient.open(
        load_kubeconfig(str(api.kubeconfig(tmp / "node.conf", user="system:node:node-1")))
    )


async def peer_serial(port: int, context: ssl.SSLContext) -> int:
    stream = await trio.open_ssl_over_tcp_stream("127.0.0.1", port, ssl_context=context)
    try:
        await stream.do_handshake()
        der = stream.getpeercert(binary_form=True)
    finally:
        await stream.aclose()
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


async def test_serving_certificate_rotated_and_seen_by_a_tls_client(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with (
        tls_api(tmp_path) as api,
        trio.open_nursery() as nursery,
        node_client(api, tmp_path) as client,
    ):
        assert api.ca is not None
        controller = CsrController(api, api.ca, lifetime=3600, policy=csrapproving_and_serving)
        await nursery.start(controller.run)
        registry = CollectorRegistry()
        manager = serving_manager(
            api,
            client,
            tmp_path / "pki",
            lambda: [NodeAddress(type="InternalIP", address="127.0.0.1")],
            registry,
        )
        assert manager.current() is None
        assert registry.get_sample_value("kubelet_certificate_manager_server_ttl_seconds") == float(
            "inf"
        )
        server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        serving = ServingCertificate(server_context, manager.current())
        nursery.start_soon(serving.follow, manager.subscribe())

        async def handler(stream: trio.SSLStream[trio.SocketStream]) -> None:
            try:
                await stream.do_handshake()
                await stream.send_all(b"hello")
                await stream.receive_some(1)
            except trio.BrokenResourceError:
                pass

        [listener] = await nursery.start(
            partial(trio.serve_ssl_over_tcp, host="127.0.0.1"), handler, 0, server_context
        )
        port = listener.transport_listener.socket.getsockname()[1]
        client_context = ssl.create_default_context(cafile=str(api.ca.cert_path))
        client_context.verify_flags = client_context.verify_flags | NO_CHECK_TIME
        with pytest.raises(trio.BrokenResourceError):  # no certificate yet: handshakes refused
            await peer_serial(port, client_context)
        await nursery.start(manager.run)
        while manager.current() is None:
            await trio.sleep(1)
        first = manager.current()
        assert first is not None
        [(_, obj)] = csrs(api).items()
        assert obj["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
        assert obj["spec"]["usages"] == ["digital signature", "server auth"]
        assert await peer_serial(port, client_context) == first.serial
        # a connection opened now keeps its certificate through the rotation
        held = await trio.open_ssl_over_tcp_stream("127.0.0.1", port, ssl_context=client_context)
        await held.do_handshake()
        assert await held.receive_some(5) == b"hello"
        while manager.rotations < 2:
            await trio.sleep(60)
        second = manager.current()
        assert second is not None and second.serial != first.serial
        # issued at 70-90 % of the first one's life: one hour and the 5-minute backdate
        # (upstream's signer backdates a short certificate on top of its lifetime)
        total = first.not_after - first.not_before
        assert total == 3600 + 300
        assert 0.7 * total <= second.not_before - first.not_before + 300 <= 0.9 * total + 60
        assert await peer_serial(port, client_context) == second.serial
        held_der = held.getpeercert(binary_form=True)
        assert (
            held_der is not None
            and x509.load_der_x509_certificate(held_der).serial_number == first.serial
        )
        await held.aclose()
        assert (
            registry.get_sample_value("kubelet_certificate_manager_server_rotation_seconds_count")
            == 1
        )
        nursery.cancel_scope.cancel()


async def test_a_new_node_address_rotates_the_serving_certificate_at_once(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    addresses = [NodeAddress(type="InternalIP", address="10.0.0.5")]
    async with (
        tls_api(tmp_path) as api,
        trio.open_nursery() as nursery,
        node_client(api, tmp_path) as client,
    ):
        assert api.ca is not None
        await nursery.start(
            CsrController(api, api.ca, lifetime=86400, policy=csrapproving_and_serving).run
        )
        manager = serving_manager(
            api, client, tmp_path / "pki", lambda: list(addresses), CollectorRegistry()
        )
        await nursery.start(manager.run)
        while manager.rotations < 1:
            await trio.sleep(1)
        start = trio.current_time()
        addresses.append(NodeAddress(type="ExternalIP", address="192.0.2.7"))
        manager.template_changed()
        while manager.rotations < 2:
            await trio.sleep(1)
        assert trio.current_time() - start < 60
        current = manager.current()
        assert current is not None
        san = current.leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert [str(i) for i in san.get_values_for_type(x509.IPAddress)] == [
            "10.0.0.5",
            "192.0.2.7",
        ]
        nursery.cancel_scope.cancel()


async def test_failed_rotations_are_counted_and_retried_with_back_off(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    verdicts = iter(["Denied", "Denied", "Approved"])
    async with (
        tls_api(tmp_path) as api,
        trio.open_nursery() as nursery,
        node_client(api, tmp_path) as client,
    ):
        assert api.ca is not None
        await nursery.start(CsrController(api, api.ca, policy=lambda _: next(verdicts)).run)
        registry = CollectorRegistry()
        manager = serving_manager(
            api,
            client,
            tmp_path / "pki",
            lambda: [NodeAddress(type="InternalIP", address="10.0.0.5")],
            registry,
        )
        start = trio.current_time()
        await nursery.start(manager.run)
        while manager.rotations < 1:
            await trio.sleep(0.5)
        assert registry.get_sample_value("kubelet_server_expiration_renew_errors") == 2
        assert 2 + 4 <= trio.current_time() - start <= 2.2 + 4.4 + 1
        assert manager.server_healthy
        nursery.cancel_scope.cancel()


async def test_an_expired_client_certificate_is_refused_by_the_fake(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """The premise of the rotation test: a stale certificate gets 401 from the fake."""
    async with tls_api(tmp_path) as api, trio.open_nursery() as nursery:
        await nursery.start(CsrController(api, api.ca, lifetime=3600).run)  # type: ignore[arg-type]
        kubeconfig, _, _ = await bootstrap(api, tmp_path)
        async with ApiClient.open(load_kubeconfig(kubeconfig)) as client:
            await client.get(PODS.path("default"))
            await trio.sleep(3700)
            with pytest.raises(ApiError) as caught:
                await client.get(PODS.path("default"))
            assert caught.value.code == 401
        nursery.cancel_scope.cancel()


async def test_the_fake_csr_api(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    """What the kubelet relies on from the CSR API: validation, the requester recorded,
    approval changing only the conditions, issuance by the controller."""
    async with tls_api(tmp_path) as api, node_client(api, tmp_path) as client:
        assert api.ca is not None
        path = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
        with pytest.raises(ApiError) as bad:
            await client.create(path, {"metadata": {"name": "x"}, "spec": {"request": "Zm9v"}})
        assert bad.value.code == 422 and "spec.request" in str(bad.value)
        key = csrmod.generate_key()
        body = {
            "metadata": {"generateName": "csr-"},
            "spec": {
                "request": base64.b64encode(
                    csrmod.make_csr(key, csrmod.client_template(NODE))
                ).decode(),
                "signerName": csrmod.CLIENT_SIGNER,
                "usages": ["digital signature", "client auth"],
                "username": "someone-else",
            },
            "status": {"certificate": "Zm9v"},
        }
        created = await client.create(path, body)
        name = created["metadata"]["name"]
        assert name.startswith("csr-") and created["spec"]["username"] == "system:node:node-1"
        assert created["status"] == {}
        approval = dict(created)
        approval["status"] = {
            "conditions": [{"type": "Approved", "status": "True", "reason": "ByHand"}],
            "certificate": "Zm9v",
        }
        approval["spec"] = {**created["spec"], "usages": ["server auth"]}
        approved = await client.update(f"{path}/{name}/approval", approval)
        assert approved["status"] == {"conditions": approval["status"]["conditions"]}
        assert approved["spec"]["usages"] == ["digital signature", "client auth"]
        controller = CsrController(api, api.ca, policy=lambda _: None)
        async with trio.open_nursery() as nursery:
            await nursery.start(controller.run)
            issued = await client.get(f"{path}/{name}")
            nursery.cancel_scope.cancel()
        cert = x509.load_pem_x509_certificate(base64.b64decode(issued["status"]["certificate"]))
        assert cert.subject.rfc4514_string() == "CN=system:node:node-1,O=system:nodes"
        assert controller.issued == [name]


def condition(obj: dict[str, Any], kind: str) -> tuple[str, str] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c["reason"], c["message"]
    return None


async def test_the_fake_control_plane_decides_as_kube_controller_manager(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """csrapproving approves the bootstrap request (nodeclient) and the node's renewal
    (selfnodeclient) with upstream's messages, leaves serving requests to someone else;
    csrsigning fails a request its rule refuses, so the kubelet's wait ends in an error."""
    async with tls_api(tmp_path) as api, trio.open_nursery() as nursery:
        assert api.ca is not None
        controller = CsrController(api, api.ca)
        await nursery.start(controller.run)
        kubeconfig, _, _ = await bootstrap(api, tmp_path)
        [(_, first)] = csrs(api).items()
        assert first["spec"]["groups"] == ["system:bootstrappers", "system:authenticated"]
        assert condition(first, "Approved") == (
            "AutoApproved",
            "Auto approving kubelet client certificate after SubjectAccessReview.",
        )
        key = csrmod.generate_key()
        async with ApiClient.open(load_kubeconfig(kubeconfig)) as client:
            template = csrmod.client_template(NODE)
            name, uid = await request_certificate(
                client, csrmod.make_csr(key, template), "", csrmod.CLIENT_SIGNER,
                csrmod.client_usages(key), key, now=api.now(),
            )  # fmt: skip
            await wait_for_certificate(client, name, uid)
            assert condition(csrs(api)[name], "Approved") == (
                "AutoApproved",
                "Auto approving self kubelet client certificate after SubjectAccessReview.",
            )
            addresses = [NodeAddress(type="InternalIP", address="10.0.0.5")]
            serving = csrmod.serving_template(NODE, addresses)
            assert serving is not None
            name, _ = await request_certificate(
                client, csrmod.make_csr(key, serving), "", csrmod.SERVING_SIGNER,
                csrmod.serving_usages(key), key, now=api.now(),
            )  # fmt: skip
            await trio.sleep(60)
            assert csrs(api)[name]["status"] == {}  # pending: nobody approves serving
            # an administrator approves a serving request without any SAN: refused
            name, uid = await request_certificate(
                client, csrmod.make_csr(key, template), "", csrmod.SERVING_SIGNER,
                csrmod.serving_usages(key), key, now=api.now(),
            )  # fmt: skip
            controller.decide(name, "Approved", "ByHand", "looks fine to me")
            with pytest.raises(RequestFailed) as failed:
                await wait_for_certificate(client, name, uid)
        assert "DNS or IP subjectAltName is required" in str(failed.value)
        assert condition(csrs(api)[name], "Failed") == (
            "SignerValidationFailure",
            "DNS or IP subjectAltName is required",
        )
        nursery.cancel_scope.cancel()
