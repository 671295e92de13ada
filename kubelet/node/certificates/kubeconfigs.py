"""The kubeconfig files of TLS bootstrap: is ``--kubeconfig`` still good, and writing it.

Upstream (pkg/kubelet/certificate/bootstrap) keeps an existing ``--kubeconfig`` when it
loads and every certificate of its client certificate is within its validity; otherwise
it writes a new one from the bootstrap kubeconfig's cluster (server,
insecure-skip-tls-verify, the CA file, or the CA data when there is no file) whose user
presents ``<cert-dir>/kubelet-client-current.pem`` as both certificate and key:
cluster ``default-cluster``, user ``default-auth``, context ``default-context`` with
namespace ``default``. The file is written 0600, through a temporary name.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from kubelet.api import KubeconfigError, load_kubeconfig

__all__ = ["client_certificates", "still_valid", "write_bootstrapped"]

log = logging.getLogger(__name__)


def _current(doc: Mapping[str, Any], section: str, key: str, name: str) -> Mapping[str, Any]:
    for entry in doc.get(section) or []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            body = entry.get(key) or {}
            return body if isinstance(body, Mapping) else {}
    return {}


def _stanzas(path: str) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """(cluster, user) of the current context, from a kubeconfig that loads."""
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    context = _current(doc, "contexts", "context", str(doc.get("current-context", "")))
    cluster = _current(doc, "clusters", "cluster", str(context.get("cluster", "")))
    user = _current(doc, "users", "user", str(context.get("user", "")))
    return cluster, user


def _resolve(path: str, base: str) -> str:
    return (
        path if os.path.isabs(path) else os.path.join(os.path.dirname(os.path.abspath(base)), path)
    )


def client_certificates(path: str) -> list[x509.Certificate]:
    """The client certificates a kubeconfig presents (empty: none, or unreadable)."""
    _, user = _stanzas(path)
    if user.get("client-certificate-data"):
        data = base64.b64decode(str(user["client-certificate-data"]))
    elif user.get("client-certificate"):
        data = Path(_resolve(str(user["client-certificate"]), path)).read_bytes()
    else:
        return []
    return x509.load_pem_x509_certificates(data)


def still_valid(path: str, now: float) -> bool:
    """Whether ``--kubeconfig`` exists, loads, and its client certificate is unexpired."""
    if not os.path.exists(path):
        return False
    try:
        load_kubeconfig(path)
        certs = client_certificates(path)
    except (KubeconfigError, OSError, ValueError, yaml.YAMLError) as exc:
        log.error("unable to read existing bootstrap client config from %s: %s", path, exc)
        return False
    if not certs:
        log.error("unable to read TLS certificates from existing bootstrap client config %s", path)
        return False
    for cert in certs:
        if now > cert.not_valid_after_utc.timestamp():
            log.error(
                "part of the existing bootstrap client certificate in %s is expired: %s",
                path,
                cert.not_valid_after_utc.isoformat(),
            )
            return False
    return True


def write_bootstrapped(bootstrap_path: str, kubeconfig_path: str, pem_path: str) -> None:
    """Write ``kubeconfig_path`` for the bootstrap kubeconfig's cluster and ``pem_path``."""
    connection = load_kubeconfig(bootstrap_path)
    cluster_in, _ = _stanzas(bootstrap_path)
    cluster: dict[str, Any] = {"server": connection.server}
    if cluster_in.get("insecure-skip-tls-verify"):
        cluster["insecure-skip-tls-verify"] = True
    if cluster_in.get("certificate-authority"):
        cluster["certificate-authority"] = _resolve(
            str(cluster_in["certificate-authority"]), bootstrap_path
        )
    elif cluster_in.get("certificate-authority-data"):
        cluster["certificate-authority-data"] = str(cluster_in["certificate-authority-data"])
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": cluster}],
        "contexts": [
            {
                "name": "default-context",
                "context": {
                    "cluster": "default-cluster",
                    "namespace": "default",
                    "user": "default-auth",
                },
            }
        ],
        "current-context": "default-context",
        "preferences": {},
        "users": [
            {
                "name": "default-auth",
                "user": {"client-certificate": pem_path, "client-key": pem_path},
            }
        ],
    }
    target = Path(kubeconfig_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(yaml.safe_dump(doc, sort_keys=False))
    os.replace(tmp, target)
