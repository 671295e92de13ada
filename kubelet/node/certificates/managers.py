"""The kubelet's two certificate managers, as its configuration asks for them.

Upstream (cmd/kubelet/app/server.go, pkg/kubelet/certificate/kubelet.go):

* with ``rotateCertificates`` the client certificate manager keeps
  ``<cert-dir>/kubelet-client-current.pem`` fresh. A certificate the kubeconfig embeds
  (kubeadm init's first ``kubelet.conf``) is stored there when the directory has no
  valid one, and replaced at once ("rotated out immediately", upstream says); one found
  in the directory is renewed at 70-90 % of its lifetime. It asks with a client from
  ``--kubeconfig`` (which presents the current certificate), or from
  ``--bootstrap-kubeconfig`` while there is none; the API client's new connections
  present each new certificate (``transport.ClientRotation``);
* with ``serverTLSBootstrap`` (gate RotateKubeletServerCertificate, on) the serving
  certificate manager obtains ``<cert-dir>/kubelet-server-current.pem`` (or uses
  ``tlsCertFile``/``tlsPrivateKeyFile`` while they are valid) for the node's last
  reported addresses, with the kubelet's own API client; the :10250 listener follows it
  (``serving.ServingCertificate``). No address reported yet: no request yet.

Both report upstream's metrics on the kubelet's registry.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager

from prometheus_client.registry import CollectorRegistry

from kubelet.api import ApiClient, ClusterConnection, NodeAddress
from kubelet.config import Options, features

from .bootstrap import OpenApi, clients_for
from .csr import (
    CLIENT_SIGNER,
    SERVING_SIGNER,
    CertificateTemplate,
    client_template,
    client_usages,
    serving_template,
    serving_usages,
)
from .manager import CertificateManager
from .metrics import client_metrics, server_metrics
from .store import CLIENT_PREFIX, SERVER_PREFIX, CertKeyPair, FileStore

__all__ = ["client_manager", "serving_manager"]


def client_manager(
    options: Options,
    connection: ClusterConnection,
    registry: CollectorRegistry,
    now: Callable[[], float],
    open_api: OpenApi,
) -> CertificateManager | None:
    """The client certificate manager (``rotateCertificates``), else None."""
    if not options.config.rotate_certificates:
        return None
    files = connection.client_cert_files or ("", "")
    metrics, connect = client_metrics(registry, now)
    manager = CertificateManager(
        name="kubelet-client",
        store=FileStore(CLIENT_PREFIX, options.cert_dir, *files),
        signer=CLIENT_SIGNER,
        template=lambda: client_template(options.node_name),
        usages=client_usages,
        client_for=clients_for(options.kubeconfig, options.bootstrap_kubeconfig, open_api),
        now=now,
        metrics=metrics,
        initial=connection.client_cert_data,
    )
    connect(manager.expiry)
    return manager


def serving_manager(
    options: Options,
    api: ApiClient,
    addresses: Callable[[], Sequence[NodeAddress]],
    registry: CollectorRegistry,
    now: Callable[[], float],
) -> CertificateManager | None:
    """The serving certificate manager (``serverTLSBootstrap``), else None."""
    cfg = options.config
    if not cfg.server_tls_bootstrap:
        return None
    allow_dns_only = options.features.enabled(features.ALLOW_DNS_ONLY_NODE_CSR)

    def template() -> CertificateTemplate | None:
        return serving_template(options.node_name, addresses(), allow_dns_only=allow_dns_only)

    @contextlib.asynccontextmanager
    async def own_client(_: CertKeyPair | None) -> AsyncIterator[ApiClient]:
        yield api  # the kubelet's own client: its connections stay open

    client_for: Callable[[CertKeyPair | None], AbstractAsyncContextManager[ApiClient]]
    client_for = own_client
    metrics, connect = server_metrics(registry, now)
    manager = CertificateManager(
        name="kubelet-serving",
        store=FileStore(
            SERVER_PREFIX, options.cert_dir, cfg.tls_cert_file, cfg.tls_private_key_file
        ),
        signer=SERVING_SIGNER,
        template=template,
        usages=serving_usages,
        client_for=client_for,
        now=now,
        metrics=metrics,
    )
    connect(manager.expiry)
    return manager
