"""The node's certificates: TLS bootstrap, client and serving certificate rotation.

What upstream does (client-go util/certificate, pkg/kubelet/certificate, cmd/kubelet):
with ``--bootstrap-kubeconfig`` and no valid ``--kubeconfig``, the kubelet asks the
certificates API for a client certificate with the bootstrap credentials before it
builds its API client; with ``rotateCertificates`` a certificate manager renews it at a
jittered 70-90 % of its lifetime, and with ``serverTLSBootstrap`` a second manager
obtains and renews the :10250 serving certificate (SANs from the node's addresses).
Pairs live in ``--cert-dir`` as ``kubelet-{client,server}-<time>.pem`` behind a
``-current.pem`` link; the kubeconfig written by bootstrap points at the client link.

What this package does: the same, in modules with one job each —
``csr`` (keys, CSR content, names, usages; pure), ``deadline`` (rotation deadline and
retry back-off; pure), ``store`` (the files), ``request`` (create, reuse and watch a CSR),
``kubeconfigs`` (is ``--kubeconfig`` still valid; writing it), ``bootstrap`` (TLS
bootstrap), ``manager`` (rotation), ``metrics`` (upstream's metric names),
``transport`` (new client certificates for new API connections while old requests
finish), ``serving`` (the listener's SSLContext follows the serving manager).

Wiring: ``kubelet.agent`` runs ``bootstrap.load_client_cert`` before it opens the API
client (with a ``RotatingTransport`` under ``rotateCertificates``); ``managers`` builds the
two managers from the configuration, which run in ``run_node``'s nursery; ``serve``
follows the serving manager. Only ``sslload`` loads with the package; every other name
loads its module on first use (``__getattr__``).
"""

from typing import TYPE_CHECKING

from kubelet.lazyinit import lazy_names as _lazy_names

from .sslload import PAIR_FILE_LIMIT, load_cert_chain_pem, load_verify_pem

__all__ = [
    "CLIENT_SIGNER",
    "PAIR_FILE_LIMIT",
    "SERVING_SIGNER",
    "BootstrapError",
    "CertKeyPair",
    "CertificateManager",
    "CertificateTemplate",
    "ClientCertificateWatch",
    "ClientRotation",
    "FileStore",
    "RotatingTransport",
    "client_manager",
    "load_cert_chain_pem",
    "load_client_cert",
    "load_verify_pem",
    "serving_manager",
    "transport_for",
]

if TYPE_CHECKING:
    from .bootstrap import BootstrapError, load_client_cert
    from .csr import CLIENT_SIGNER, SERVING_SIGNER, CertificateTemplate
    from .expiry import ClientCertificateWatch
    from .manager import CertificateManager
    from .managers import client_manager, serving_manager
    from .store import CertKeyPair, FileStore
    from .transport import ClientRotation, RotatingTransport, transport_for

_LAZY = {
    "BootstrapError": "bootstrap",
    "load_client_cert": "bootstrap",
    "CLIENT_SIGNER": "csr",
    "SERVING_SIGNER": "csr",
    "CertificateTemplate": "csr",
    "ClientCertificateWatch": "expiry",
    "CertificateManager": "manager",
    "client_manager": "managers",
    "serving_manager": "managers",
    "CertKeyPair": "store",
    "FileStore": "store",
    "ClientRotation": "transport",
    "RotatingTransport": "transport",
    "transport_for": "transport",
}
"""name -> the module that defines it, imported on first use (``__getattr__``): the TLS
port of a kubelet without certificate rotation or bootstrap reads only ``sslload``, and
the rest pulls in cryptography, httpx and the API client."""


__getattr__ = _lazy_names(__name__, _LAZY, globals())
