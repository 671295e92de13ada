"""What kube-controller-manager's csrapproving and csrsigning check in a kubelet's CSR.

Upstream's rules, restated (pkg/apis/certificates/helpers.go, pkg/controller/certificates/
approver and signer), so the fake control plane refuses what a real one refuses:

* a kubelet client request (``kubernetes.io/kube-apiserver-client-kubelet``): subject
  organizations exactly ``[system:nodes]``; no DNS, email, IP or URI SAN; CN beginning
  ``system:node:``; usages exactly {digital signature, client auth} or {digital
  signature, key encipherment, client auth};
* a kubelet serving request (``kubernetes.io/kubelet-serving``): organizations exactly
  ``[system:nodes]``; at least one DNS or IP SAN; no email or URI SAN; usages exactly
  {digital signature, server auth} or {digital signature, key encipherment, server
  auth}; CN beginning ``system:node:``;
* csrapproving approves only client requests: ``selfnodeclient`` when the requester is
  the CN, else ``nodeclient``, each if a SubjectAccessReview for ``create`` on
  ``certificatesigningrequests/<that>`` allows the requester (here: kubeadm's bindings,
  ``KUBEADM_GRANTS``). Serving requests are left for someone else to approve;
* csrsigning signs an approved request of its signer only if it passes the signer's
  rule, else marks it Failed (reason ``SignerValidationFailure``, the rule's message);
  the certificate lives ``--cluster-signing-duration`` or ``spec.expirationSeconds`` if
  shorter (never under 10 minutes), from 5 minutes ago; a certificate shorter than 8
  hours gets its backdate on top of its lifetime.

Messages are upstream's (``subject organization is not system:nodes``, ...).
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = [
    "CLIENT_SIGNER",
    "KUBEADM_GRANTS",
    "SERVING_SIGNER",
    "approval_message",
    "csrapproving",
    "parse_request",
    "recognize",
    "signer_error",
    "validate_kubelet_client",
    "validate_kubelet_serving",
    "validity",
]

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
SERVING_SIGNER = "kubernetes.io/kubelet-serving"

DIGITAL_SIGNATURE = "digital signature"
KEY_ENCIPHERMENT = "key encipherment"
CLIENT_AUTH = "client auth"
SERVER_AUTH = "server auth"

CLIENT_USAGES = (
    frozenset({DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, CLIENT_AUTH}),
    frozenset({DIGITAL_SIGNATURE, CLIENT_AUTH}),
)
SERVING_USAGES = (
    frozenset({DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, SERVER_AUTH}),
    frozenset({DIGITAL_SIGNATURE, SERVER_AUTH}),
)

KUBEADM_GRANTS: Mapping[str, frozenset[str]] = {
    # kubeadm:node-autoapprove-bootstrap (and the TLS bootstrapping guide's binding)
    "nodeclient": frozenset(
        {"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token"}
    ),
    # kubeadm:node-autoapprove-certificate-rotation
    "selfnodeclient": frozenset({"system:nodes"}),
}
"""Groups whose members the SubjectAccessReview allows, per approval subresource."""

APPROVAL_MESSAGES = {
    "selfnodeclient": "Auto approving self kubelet client certificate after SubjectAccessReview.",
    "nodeclient": "Auto approving kubelet client certificate after SubjectAccessReview.",
}

BACKDATE = datetime.timedelta(minutes=5)
SHORT = datetime.timedelta(hours=8)
MIN_DURATION = datetime.timedelta(minutes=10)


def parse_request(spec: Mapping[str, Any]) -> x509.CertificateSigningRequest:
    """The PKCS#10 request of a CSR's spec (ValueError if it is not one)."""
    return x509.load_pem_x509_csr(base64.b64decode(str(spec.get("request", ""))))


def _sans(req: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName | None:
    try:
        return req.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def _names(req: x509.CertificateSigningRequest) -> dict[str, int]:
    """How many SANs of each kind (dns, email, ip, uri) the request carries."""
    sans = _sans(req)
    if sans is None:
        return {"dns": 0, "email": 0, "ip": 0, "uri": 0}
    return {
        "dns": len(sans.get_values_for_type(x509.DNSName)),
        "email": len(sans.get_values_for_type(x509.RFC822Name)),
        "ip": len(sans.get_values_for_type(x509.IPAddress)),
        "uri": len(sans.get_values_for_type(x509.UniformResourceIdentifier)),
    }


def _subject(req: x509.CertificateSigningRequest) -> tuple[str, list[str]]:
    cns = req.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = req.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return (str(cns[0].value) if cns else ""), [str(o.value) for o in orgs]


def _usages_error(usages: Collection[str], allowed: Sequence[frozenset[str]]) -> str | None:
    if frozenset(usages) in allowed:
        return None
    return f"usages did not match [{' '.join(sorted(allowed[0]))}]"


def validate_kubelet_client(
    req: x509.CertificateSigningRequest, usages: Collection[str]
) -> str | None:
    """Why ``req`` is no kubelet client certificate request (None: it is one)."""
    cn, orgs = _subject(req)
    names = _names(req)
    if orgs != ["system:nodes"]:
        return "subject organization is not system:nodes"
    for kind, label in (("dns", "DNS"), ("email", "Email"), ("ip", "IP"), ("uri", "URI")):
        if names[kind]:
            return f"{label} subjectAltNames are not allowed"
    if not cn.startswith("system:node:"):
        return "subject common name does not begin with system:node:"
    return _usages_error(usages, CLIENT_USAGES)


def validate_kubelet_serving(
    req: x509.CertificateSigningRequest, usages: Collection[str]
) -> str | None:
    """Why ``req`` is no kubelet serving certificate request (None: it is one)."""
    cn, orgs = _subject(req)
    names = _names(req)
    if orgs != ["system:nodes"]:
        return "subject organization is not system:nodes"
    if not names["dns"] and not names["ip"]:
        return "DNS or IP subjectAltName is required"
    if names["email"]:
        return "Email subjectAltNames are not allowed"
    if names["uri"]:
        return "URI subjectAltNames are not allowed"
    usage_error = _usages_error(usages, SERVING_USAGES)
    if usage_error is not None:
        return usage_error
    if not cn.startswith("system:node:"):
        return "subject common name does not begin with system:node:"
    return None


def recognize(spec: Mapping[str, Any], req: x509.CertificateSigningRequest) -> list[str]:
    """The approval subresources csrapproving would ask a review for, in its order."""
    if spec.get("signerName") != CLIENT_SIGNER:
        return []
    if validate_kubelet_client(req, [str(u) for u in spec.get("usages") or ()]) is not None:
        return []
    cn, _ = _subject(req)
    self_node = spec.get("username") == cn
    return ["selfnodeclient", "nodeclient"] if self_node else ["nodeclient"]


def approval_message(csr: Mapping[str, Any], grants: Mapping[str, frozenset[str]]) -> str | None:
    """csrapproving's verdict on ``csr``: the approval message, or None (left alone)."""
    spec = csr.get("spec") or {}
    try:
        req = parse_request(spec)
    except ValueError:
        return None
    groups = set(spec.get("groups") or ())
    for subresource in recognize(spec, req):
        if groups & grants.get(subresource, frozenset()):
            return APPROVAL_MESSAGES[subresource]
    return None


def csrapproving(csr: Mapping[str, Any]) -> str | None:
    """A ``csrsigner.Policy``: kube-controller-manager's csrapproving with kubeadm's RBAC."""
    return "Approved" if approval_message(csr, KUBEADM_GRANTS) is not None else None


def signer_error(spec: Mapping[str, Any]) -> str | None:
    """Why csrsigning fails an approved kubelet request instead of signing it."""
    try:
        req = parse_request(spec)
    except ValueError as exc:
        return str(exc)
    usages = [str(u) for u in spec.get("usages") or ()]
    if spec.get("signerName") == SERVING_SIGNER:
        return validate_kubelet_serving(req, usages)
    return validate_kubelet_client(req, usages)


def validity(
    now: datetime.datetime, ttl: datetime.timedelta, expiration_seconds: int | None
) -> tuple[datetime.datetime, datetime.datetime]:
    """(NotBefore, NotAfter) of a certificate signed at ``now`` with the signer's
    ``ttl`` (--cluster-signing-duration) for a request asking ``expiration_seconds``."""
    duration = ttl
    if expiration_seconds is not None:
        requested = datetime.timedelta(seconds=expiration_seconds)
        if requested > ttl:
            duration = ttl
        elif requested < MIN_DURATION:
            duration = MIN_DURATION
        else:
            duration = requested
    not_before = now - BACKDATE
    if duration < SHORT:
        return not_before, now + duration
    return not_before, not_before + duration
