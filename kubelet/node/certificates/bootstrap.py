"""TLS bootstrap: from a bootstrap kubeconfig to this node's own client certificate.

Upstream's LoadClientCert (pkg/kubelet/certificate/bootstrap), which runs before the
kubelet builds its API client when ``--bootstrap-kubeconfig`` is given:

1. an existing ``--kubeconfig`` whose client certificate is still valid wins: nothing to do;
2. otherwise the key is the current pair's in ``--cert-dir`` if there is one, else
   ``<cert-dir>/kubelet-client.key.tmp``, created if absent and kept until a certificate
   is stored, so a kubelet restarted mid-way asks with the same key, hence under the
   same CSR name (``node-csr-<digest>``) and picks up its pending request;
3. the API server's ``/healthz`` is polled for up to a minute (every 2 s, jittered);
4. a CSR (``CN=system:node:<node>``, ``O=system:nodes``, signer
   ``kubernetes.io/kube-apiserver-client-kubelet``) is created with the bootstrap
   credentials and watched for up to an hour;
5. the certificate and key go to ``kubelet-client-<time>.pem`` (the ``current`` link
   updated), the temporary key is removed, and ``--kubeconfig`` is written to present
   ``kubelet-client-current.pem``.

Upstream returns the error and the process exits (systemd restarts it). Here a failed
attempt is logged with its reason and retried in-process with back-off (2 s doubling to
5 min); a Denied or Failed request also drops the temporary key, since asking again
with the same key would only find the same refused request. Cancellation (SIGTERM)
stops it at any point: what was written so far is what a restart resumes from.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import trio

from kubelet.api import ApiClient, ApiError, ClusterConnection, KubeconfigError, load_kubeconfig

from .csr import (
    CLIENT_SIGNER,
    NODES_GROUP,
    PrivateKey,
    bootstrap_csr_name,
    bootstrap_usages,
    generate_key,
    key_pem,
    load_key,
    make_csr,
    node_common_name,
)
from .csr import CertificateTemplate as Template
from .kubeconfigs import still_valid, write_bootstrapped
from .request import (
    CertificateRequestError,
    RequestDenied,
    RequestFailed,
    request_certificate,
    wait_for_certificate,
)
from .store import CLIENT_PREFIX, FileStore, StoreError

__all__ = ["TMP_KEY_FILE", "BootstrapError", "clients_for", "load_client_cert"]

log = logging.getLogger(__name__)

TMP_KEY_FILE = "kubelet-client.key.tmp"
SERVER_WAIT = 60.0
"""How long to poll the API server's /healthz before asking anyway."""
HEALTHZ_PERIOD = 2.0
REQUEST_TIMEOUT = 3600.0
"""How long one CSR is waited for (upstream: 3600 s)."""
RETRY_FIRST, RETRY_MAX = 2.0, 300.0

OpenApi = Callable[[ClusterConnection], AbstractAsyncContextManager[ApiClient]]
Now = Callable[[], float]


class BootstrapError(Exception):
    """Bootstrap cannot even start (the bootstrap kubeconfig is unusable, the cert
    directory unwritable); the message names the file."""


def _open_default(connection: ClusterConnection) -> AbstractAsyncContextManager[ApiClient]:
    return ApiClient.open(connection)


async def load_client_cert(
    kubeconfig: str,
    bootstrap_kubeconfig: str,
    cert_dir: str,
    node_name: str,
    *,
    now: Now,
    open_api: OpenApi = _open_default,
    rng: random.Random | None = None,
) -> None:
    """Make sure ``kubeconfig`` holds a valid client certificate for ``node_name``,
    obtaining one through ``bootstrap_kubeconfig`` if needed; retries until it has one."""
    if still_valid(kubeconfig, now()):
        log.info("Kubeconfig %s exists and is valid, skipping bootstrap", kubeconfig)
        return
    log.info("Using bootstrap kubeconfig to generate TLS client cert, key and kubeconfig file")
    try:
        connection = load_kubeconfig(bootstrap_kubeconfig)
    except KubeconfigError as exc:
        raise BootstrapError(f"unable to load bootstrap kubeconfig: {exc}") from None
    try:
        store = FileStore(CLIENT_PREFIX, cert_dir)
    except (StoreError, OSError) as exc:
        raise BootstrapError(f"unable to build bootstrap cert store: {exc}") from None
    rng = rng or random.Random()
    delay = RETRY_FIRST
    async with open_api(connection) as client:
        await _wait_for_server(client, rng)
        while True:
            key = _bootstrap_key(store, cert_dir)
            try:
                with trio.fail_after(REQUEST_TIMEOUT):
                    chain = await _request(client, key, node_name, now())
                store.update(chain, key_pem(key), now())
            except trio.TooSlowError:
                log.error("client certificate request was not issued within %ds", REQUEST_TIMEOUT)
            except (RequestDenied, RequestFailed) as exc:
                log.error("TLS bootstrap: %s; asking again with a new key", exc)
                _remove(Path(cert_dir) / TMP_KEY_FILE)
            except (CertificateRequestError, ApiError, StoreError) as exc:
                log.error("TLS bootstrap: %s", exc)
            else:
                break
            log.info("TLS bootstrap: next attempt in %.0fs", delay)
            await trio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)
    _remove(Path(cert_dir) / TMP_KEY_FILE)
    write_bootstrapped(bootstrap_kubeconfig, kubeconfig, store.current_path)
    log.info("TLS bootstrap: client certificate stored; %s written", kubeconfig)


def clients_for(
    kubeconfig: str, bootstrap_kubeconfig: str = "", open_api: OpenApi = _open_default
) -> Callable[[object | None], AbstractAsyncContextManager[ApiClient]]:
    """The client manager's ``client_for``: with a current certificate, a client from
    ``kubeconfig`` (which presents it); without one, from the bootstrap kubeconfig, as
    upstream's buildClientCertificateManager chooses. Read afresh each time."""

    def client_for(current: object | None) -> AbstractAsyncContextManager[ApiClient]:
        path = (
            kubeconfig if current is not None or not bootstrap_kubeconfig else bootstrap_kubeconfig
        )
        return open_api(load_kubeconfig(path))

    return client_for


def _bootstrap_key(store: FileStore, cert_dir: str) -> PrivateKey:
    """The current pair's key if the store has one, else the kept temporary key
    (created on first use)."""
    try:
        return store.current().key
    except StoreError:
        pass
    path = Path(cert_dir) / TMP_KEY_FILE
    try:
        return load_key(path.read_bytes())
    except (OSError, ValueError):
        pass
    key = generate_key()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key_pem(key))
    os.replace(tmp, path)
    return key


async def _request(client: ApiClient, key: PrivateKey, node_name: str, now: float) -> bytes:
    template = Template(node_common_name(node_name), (NODES_GROUP,))
    usages = bootstrap_usages(key)
    name = bootstrap_csr_name(key, template.common_name, template.organizations, usages)
    csr = make_csr(key, template)
    name, uid = await request_certificate(client, csr, name, CLIENT_SIGNER, usages, key, now=now)
    log.info("Waiting for client certificate to be issued (csr %s)", name)
    return await wait_for_certificate(client, name, uid)


async def _wait_for_server(client: ApiClient, rng: random.Random) -> None:
    """Poll /healthz until it answers 200 or a minute passes (then ask anyway)."""
    with trio.move_on_after(SERVER_WAIT):
        while True:
            try:
                auth = client.connection.authorization()
                with trio.fail_after(1.0):
                    response = await client.http.get(
                        "/healthz", headers={"Authorization": auth} if auth else None
                    )
                if response.status_code == 200:
                    return
                log.info(
                    "Failed to connect to apiserver: /healthz answered %d", response.status_code
                )
            except (httpx.HTTPError, trio.TooSlowError) as exc:
                log.info("Failed to connect to apiserver: %s", exc or type(exc).__name__)
            await trio.sleep(HEALTHZ_PERIOD * (1 + 0.2 * rng.random()))
    log.info("Error waiting for apiserver to come up: timed out waiting to connect to apiserver")


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.info("Failed cleaning up private key file %s: %s", path, exc)
