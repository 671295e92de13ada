"""The whole kubelet joining a cluster as ``kubeadm join`` starts it: a bootstrap
kubeconfig only, then certificates from the CSR API, rotated as they age.

FakeApiServer serves HTTPS with a test CA and refuses expired client certificates (401);
``CsrController`` approves and signs like kube-controller-manager. Everything runs on
the fake clock.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import yaml
from cryptography import x509

from kubelet import agent
from kubelet.agent import Components, Host
from kubelet.boundedio import inline
from kubelet.config import Options, resolve
from kubelet.errors import FatalError
from kubelet.testing import FakeApiServer, FakeRuntime
from kubelet.testing.certs import NO_CHECK_TIME
from kubelet.testing.csrsigner import CsrController, csrapproving_and_serving
from kubelet.testing.fakeproc import fake_proc, fake_proc_sys

from .cluster_harness import MACHINE
from .kubelet_harness import EPOCH, KUBELET_IMAGES, NODE

TOKEN = "abcdef.0123456789abcdef"
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
SERVING_SIGNER = "kubernetes.io/kubelet-serving"


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


@asynccontextmanager
async def tls_api(tmp: Path) -> AsyncIterator[FakeApiServer]:
    api = FakeApiServer(require_auth=True, epoch=EPOCH)
    api.auth.add_token(TOKEN, "system:bootstrap:abcdef", ["system:bootstrappers"])
    async with api.serve(tls_dir=tmp / "apiserver-pki"):
        yield api


def write_bootstrap_kubeconfig(api: FakeApiServer, path: Path) -> Path:
    """What kubeadm join writes to /etc/kubernetes/bootstrap-kubelet.conf."""
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
                "name": "tls-bootstrap-token-user@kubernetes",
                "context": {"cluster": "kubernetes", "user": "tls-bootstrap-token-user"},
            }
        ],
        "current-context": "tls-bootstrap-token-user@kubernetes",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def join_options(api: FakeApiServer, fake: FakeRuntime, tmp: Path, *extra: str) -> Options:
    boot = write_bootstrap_kubeconfig(api, tmp / "bootstrap-kubelet.conf")
    options = resolve(
        [
            f"--bootstrap-kubeconfig={boot}",
            f"--kubeconfig={tmp / 'kubelet.conf'}",
            f"--cert-dir={tmp / 'pki'}",
            f"--container-runtime-endpoint={fake.endpoint}",
            f"--hostname-override={NODE}",
            "--node-ip=10.0.0.5",
            f"--root-dir={tmp / 'root'}",
            "--healthz-port=0",
            "--read-only-port=0",
            "--fail-cgroupv1=false",  # the host's hierarchies are read: this one is v1
            *extra,
        ]
    )
    return attrs.evolve(
        options, config=attrs.evolve(options.config, pod_logs_dir=str(tmp / "logs"))
    )


def host(api: FakeApiServer, tmp: Path) -> Host:
    """No connection: the kubelet has to obtain one (TLS bootstrap). /proc/swaps is a
    fake one without swap, whatever the machine has."""
    return Host(
        wall_clock=api.now,
        watch_files=False,
        machine=MACHINE,
        node_ips=("10.0.0.5",),
        source_io=inline,
        ephemeral_ports=True,
        proc=fake_proc(tmp / "proc"),
        proc_sys=fake_proc_sys(tmp / "proc-sys"),
        containers_log_dir=str(tmp / "containers"),
    )


def csrs(api: FakeApiServer, signer: str) -> list[dict[str, Any]]:
    return [
        obj
        for obj in api.objects("CertificateSigningRequest").values()
        if obj["spec"]["signerName"] == signer
    ]


def node_ready(api: FakeApiServer) -> bool:
    node = api.get("nodes", "", NODE)
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def wait_for(predicate: Callable[[], bool], timeout: float = 300.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.5)


async def serving_serial(port: int, ca: Path) -> int:
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False  # the certificate names 10.0.0.5 and the node
    context.verify_flags |= NO_CHECK_TIME  # issued in fake time
    stream = await trio.open_ssl_over_tcp_stream("127.0.0.1", port, ssl_context=context)
    try:
        await stream.do_handshake()
        der = stream.getpeercert(binary_form=True)
    finally:
        await stream.aclose()
    assert der is not None
    cert = x509.load_der_x509_certificate(der)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.5"]
    assert sans.get_values_for_type(x509.DNSName) == [NODE]
    return cert.serial_number


async def test_join_with_a_bootstrap_kubeconfig_then_both_certificates_rotate(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """From a bootstrap token to a Ready node, then 25 minutes with 10-minute
    certificates: the client certificate is replaced at least twice, no request of the
    node's is ever refused (an expired certificate would get 401) and every pod created
    meanwhile runs (the pod watch lost nothing); the serving certificate too, and a TLS
    client of :10250 sees each new one."""
    async with tls_api(short_tmp) as api, trio.open_nursery() as nursery:
        assert api.ca is not None
        controller = CsrController(api, api.ca, lifetime=600, policy=csrapproving_and_serving)
        await nursery.start(controller.run)
        options = join_options(
            api, fake, short_tmp, "--rotate-certificates", "--rotate-server-certificates"
        )
        components: Components = await nursery.start(agent.run, options, host(api, short_tmp))
        await wait_for(lambda: node_ready(api))
        pki = short_tmp / "pki"
        assert (pki / "kubelet-client-current.pem").is_symlink()
        written = yaml.safe_load((short_tmp / "kubelet.conf").read_text())
        assert written["users"][0]["user"] == {
            "client-certificate": str(pki / "kubelet-client-current.pem"),
            "client-key": str(pki / "kubelet-client-current.pem"),
        }
        [boot_csr] = csrs(api, CLIENT_SIGNER)
        assert boot_csr["metadata"]["name"].startswith("node-csr-")
        assert boot_csr["spec"]["username"] == "system:bootstrap:abcdef"
        await wait_for(lambda: (pki / "kubelet-server-current.pem").exists())
        [serving_csr] = csrs(api, SERVING_SIGNER)
        assert serving_csr["spec"]["username"] == f"system:node:{NODE}"
        assert components.addresses is not None
        port = int(components.addresses.main.rsplit(":", 1)[1])
        first_serial = await serving_serial(port, api.ca.cert_path)

        created = []
        for i in range(25):  # a pod a minute: the kubelet's watch must see every one
            await trio.sleep(60)
            name = f"p{i}"
            api.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {
                        "nodeName": NODE,
                        "containers": [{"name": "app", "image": "busybox:1.35"}],
                    },
                }
            )
            created.append(name)
        await trio.sleep(30)
        phases = {n: ((api.get("pods", "default", n) or {}).get("status") or {}) for n in created}
        assert {n: p.get("phase") for n, p in phases.items()} == dict.fromkeys(created, "Running")
        client_csrs = csrs(api, CLIENT_SIGNER)
        assert len(client_csrs) >= 3  # bootstrap, then two rotations
        users = sorted(c["spec"]["username"] for c in client_csrs)
        # one with the bootstrap token, the rotations with the node's own certificate
        assert users == ["system:bootstrap:abcdef"] + [f"system:node:{NODE}"] * (len(users) - 1)
        node_requests = [r for r in api.requests if r.user == f"system:node:{NODE}"]
        assert node_requests and not [r for r in api.requests if r.status == 401]
        # the bootstrap token did nothing kubeadm's RBAC refuses (the fake enforces it)
        boot_requests = [r for r in api.requests if r.user == "system:bootstrap:abcdef"]
        assert boot_requests and not [r for r in api.requests if r.status == 403]
        assert {(r.verb, r.resource) for r in boot_requests} <= {
            ("get", ""),  # /healthz
            ("create", "certificatesigningrequests"),
            ("list", "certificatesigningrequests"),
            ("watch", "certificatesigningrequests"),
        }
        assert node_ready(api)
        assert len(csrs(api, SERVING_SIGNER)) >= 3
        assert await serving_serial(port, api.ca.cert_path) != first_serial
        registry = components.metrics.registry
        for name in (
            "kubelet_certificate_manager_client_ttl_seconds",
            "kubelet_certificate_manager_server_ttl_seconds",
        ):
            ttl = registry.get_sample_value(name)
            assert ttl is not None and 0 < ttl <= 600
        errors = "kubelet_certificate_manager_client_expiration_renew_errors"
        assert registry.get_sample_value(errors) == 0
        nursery.cancel_scope.cancel()


async def test_a_restart_mid_way_resumes_and_a_denied_request_is_asked_again(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    verdicts: list[str | None] = [None, "Denied"]  # pending first, then denied
    async with tls_api(short_tmp) as api, trio.open_nursery() as nursery:
        assert api.ca is not None
        controller = CsrController(
            api, api.ca, policy=lambda _: verdicts.pop(0) if verdicts else "Approved"
        )
        await nursery.start(controller.run)
        options = join_options(api, fake, short_tmp)
        scope = await start_kubelet_soon(nursery, options, host(api, short_tmp))
        await wait_for(lambda: len(csrs(api, CLIENT_SIGNER)) == 1)
        await trio.sleep(60)
        scope.cancel()  # stopped while its request is pending
        [pending] = csrs(api, CLIENT_SIGNER)
        assert (short_tmp / "pki" / "kubelet-client.key.tmp").exists()
        assert not (short_tmp / "kubelet.conf").exists()
        controller.decide(pending["metadata"]["name"], "Denied", "Untrusted", "not this one")
        with caplog.at_level(logging.INFO, "kubelet.node.certificates"):
            await start_kubelet_soon(nursery, options, host(api, short_tmp))
            await wait_for(lambda: node_ready(api))
        # the restart found its pending request (now denied): reported, asked again
        assert (
            "certificate signing request is denied, reason: Untrusted, message: not this one"
            in caplog.text
        )
        names = [c["metadata"]["name"] for c in csrs(api, CLIENT_SIGNER)]
        assert pending["metadata"]["name"] in names and len(names) == 3
        assert "csr for this node already exists, reusing" in caplog.text
        assert not (short_tmp / "pki" / "kubelet-client.key.tmp").exists()
        nursery.cancel_scope.cancel()


def leaves(group: BaseExceptionGroup[FatalError]) -> list[FatalError]:
    out: list[FatalError] = []
    for exc in group.exceptions:
        out += leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return out


async def start_kubelet_soon(nursery: trio.Nursery, options: Options, h: Host) -> trio.CancelScope:
    """Start a kubelet that may block in TLS bootstrap (never reports started)."""
    scope = trio.CancelScope()

    async def run_it() -> None:
        with scope:
            await agent.run(options, h)

    nursery.start_soon(run_it)
    return scope


async def test_no_valid_client_certificate_for_five_minutes_exits_the_kubelet(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Joined with a 10-minute certificate, then every renewal denied and the bootstrap
    token gone (they expire): once the certificate has expired the manager's requests get
    401, the server counts as responsive, and five minutes later the kubelet exits as
    upstream's does (klog.Fatal, so systemd starts it again and bootstrap runs)."""
    async with tls_api(short_tmp) as api, trio.open_nursery() as nursery:
        assert api.ca is not None
        verdicts = iter(["Approved"])  # the bootstrap request; every renewal denied
        controller = CsrController(
            api, api.ca, lifetime=600, policy=lambda _: next(verdicts, "Denied")
        )
        await nursery.start(controller.run)
        options = join_options(api, fake, short_tmp, "--rotate-certificates")
        failed: list[BaseException] = []

        async def kubelet(task_status: trio.TaskStatus[None]) -> None:
            try:
                await agent.run(options, host(api, short_tmp), task_status=task_status)
            except* FatalError as group:
                failed.extend(leaves(group))

        with caplog.at_level(logging.INFO):
            await nursery.start(kubelet)
            await wait_for(lambda: node_ready(api))
            del api.auth.tokens[TOKEN]
            pem = (short_tmp / "pki" / "kubelet-client-current.pem").read_bytes()
            expiry = x509.load_pem_x509_certificate(pem).not_valid_after_utc.timestamp()
            await wait_for(lambda: bool(failed), timeout=1200)
        exited = api.now()
        assert expiry + 290 < exited <= expiry + 311
        message = (
            "It has been 5m0s since a valid client cert was found and the server is "
            "responsive, exiting."
        )
        assert [str(e) for e in failed] == [message]
        fatal = [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
        assert fatal == [message]
        assert not (short_tmp / "pki" / "kubelet-client.key.tmp").exists()
        nursery.cancel_scope.cancel()
