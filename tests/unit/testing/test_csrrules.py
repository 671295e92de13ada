"""kube-controller-manager's CSR rules, as the fake control plane applies them.

Cases after upstream's sarapprove_test.go (TestRecognizers) and helpers_test.go
(kubelet client and serving requests), and the kubelet's own requests: each must pass
exactly as a real csrapproving and csrsigning would take them.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from collections.abc import Sequence
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from kubelet.api import NodeAddress
from kubelet.node.certificates import csr as kubelet_csr
from kubelet.node.certificates.bootstrap import bootstrap_usages
from kubelet.testing.csrrules import (
    CLIENT_SIGNER,
    KUBEADM_GRANTS,
    SERVING_SIGNER,
    approval_message,
    csrapproving,
    parse_request,
    recognize,
    signer_error,
    validate_kubelet_client,
    validate_kubelet_serving,
    validity,
)

KEY = ec.generate_private_key(ec.SECP256R1())
CLIENT = ("key encipherment", "digital signature", "client auth")
SERVING = ("key encipherment", "digital signature", "server auth")


def request(
    cn: str = "system:node:foo",
    orgs: Sequence[str] = ("system:nodes",),
    *,
    dns: Sequence[str] = (),
    ips: Sequence[str] = (),
    emails: Sequence[str] = (),
    uris: Sequence[str] = (),
) -> x509.CertificateSigningRequest:
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    if cn:
        names.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names))
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    sans += [x509.RFC822Name(e) for e in emails]
    sans += [x509.UniformResourceIdentifier(u) for u in uris]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(KEY, hashes.SHA256())


def spec_of(
    req: x509.CertificateSigningRequest | bytes,
    usages: Sequence[str],
    *,
    signer: str = CLIENT_SIGNER,
    username: str = "system:node:foo",
    groups: Sequence[str] = ("system:nodes", "system:authenticated"),
) -> dict[str, Any]:
    pem = req if isinstance(req, bytes) else req.public_bytes(serialization.Encoding.PEM)
    return {
        "signerName": signer,
        "usages": list(usages),
        "request": base64.b64encode(pem).decode(),
        "username": username,
        "groups": list(groups),
    }


# -- the recognizers (TestRecognizers) ------------------------------------------------


def test_a_good_client_request_is_recognized_as_self_node_and_node_client() -> None:
    spec = spec_of(request(), CLIENT)
    assert recognize(spec, parse_request(spec)) == ["selfnodeclient", "nodeclient"]


@pytest.mark.parametrize(
    ("req", "usages"),
    [
        (request(cn="mike"), CLIENT),
        (request(orgs=()), CLIENT),
        (request(orgs=("system:master",)), CLIENT),
        (request(), (*CLIENT, "server auth")),
    ],
    ids=["cn", "no-orgs", "other-org", "extra-usage"],
)
def test_bad_client_requests_are_not_recognized(
    req: x509.CertificateSigningRequest, usages: Sequence[str]
) -> None:
    spec = spec_of(req, usages)
    assert recognize(spec, parse_request(spec)) == []


@pytest.mark.parametrize(
    ("req", "requester"),
    [(request(), "joe"), (request(cn="system:node:bar"), "system:node:foo")],
    ids=["other-requester", "other-cn"],
)
def test_a_requester_not_the_cn_is_only_a_node_client(
    req: x509.CertificateSigningRequest, requester: str
) -> None:
    spec = spec_of(req, CLIENT, username=requester)
    assert recognize(spec, parse_request(spec)) == ["nodeclient"]


def test_only_the_kubelet_client_signer_is_approved() -> None:
    spec = spec_of(request(dns=("foo",)), SERVING, signer=SERVING_SIGNER)
    assert recognize(spec, parse_request(spec)) == []
    assert csrapproving({"spec": spec}) is None  # serving requests wait for someone else


# -- the review: kubeadm's bindings ---------------------------------------------------


def test_approval_follows_the_requesters_groups() -> None:
    renewal = {"spec": spec_of(request(), CLIENT)}
    assert approval_message(renewal, KUBEADM_GRANTS) == (
        "Auto approving self kubelet client certificate after SubjectAccessReview."
    )
    boot = spec_of(
        request(),
        CLIENT,
        username="system:bootstrap:abcdef",
        groups=("system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token"),
    )
    assert approval_message({"spec": boot}, KUBEADM_GRANTS) == (
        "Auto approving kubelet client certificate after SubjectAccessReview."
    )
    # a node asking for another node's certificate: recognized, but not allowed
    other = spec_of(request(cn="system:node:bar"), CLIENT)
    assert approval_message({"spec": other}, KUBEADM_GRANTS) is None
    stranger = spec_of(request(), CLIENT, username="joe", groups=("system:authenticated",))
    assert csrapproving({"spec": stranger}) is None


# -- the signer's rules (helpers.go) ---------------------------------------------------


@pytest.mark.parametrize(
    ("req", "usages", "error"),
    [
        (request(), CLIENT, None),
        (request(), ("digital signature", "client auth"), None),
        (request(orgs=("system:nodes", "x")), CLIENT, "subject organization is not system:nodes"),
        (request(dns=("foo",)), CLIENT, "DNS subjectAltNames are not allowed"),
        (request(emails=("a@b.c",)), CLIENT, "Email subjectAltNames are not allowed"),
        (request(ips=("10.0.0.1",)), CLIENT, "IP subjectAltNames are not allowed"),
        (request(uris=("spiffe://x",)), CLIENT, "URI subjectAltNames are not allowed"),
        (request(cn="foo"), CLIENT, "subject common name does not begin with system:node:"),
        (
            request(),
            ("client auth",),
            "usages did not match [client auth digital signature key encipherment]",
        ),
    ],
)
def test_kubelet_client_requests(
    req: x509.CertificateSigningRequest, usages: Sequence[str], error: str | None
) -> None:
    assert validate_kubelet_client(req, usages) == error


@pytest.mark.parametrize(
    ("req", "usages", "error"),
    [
        (request(dns=("foo",)), SERVING, None),
        (request(ips=("10.0.0.1",)), ("digital signature", "server auth"), None),
        (request(orgs=(), dns=("foo",)), SERVING, "subject organization is not system:nodes"),
        (request(), SERVING, "DNS or IP subjectAltName is required"),
        (
            request(dns=("foo",), emails=("a@b.c",)),
            SERVING,
            "Email subjectAltNames are not allowed",
        ),
        (
            request(dns=("foo",), uris=("spiffe://x",)),
            SERVING,
            "URI subjectAltNames are not allowed",
        ),
        (
            request(dns=("foo",)),
            (*SERVING, "client auth"),
            "usages did not match [digital signature key encipherment server auth]",
        ),
        (
            request(cn="foo", dns=("foo",)),
            SERVING,
            "subject common name does not begin with system:node:",
        ),
    ],
)
def test_kubelet_serving_requests(
    req: x509.CertificateSigningRequest, usages: Sequence[str], error: str | None
) -> None:
    assert validate_kubelet_serving(req, usages) == error


# -- the kubelet's own requests pass exactly --------------------------------------------


@pytest.mark.parametrize("rsa_key", [False, True], ids=["p256", "rsa"])
def test_the_kubelets_requests_pass_approval_and_signing(rsa_key: bool) -> None:
    key: kubelet_csr.PrivateKey = (
        rsa.generate_private_key(65537, 2048) if rsa_key else kubelet_csr.generate_key()
    )
    client = kubelet_csr.make_csr(key, kubelet_csr.client_template("node-1"))
    for usages in (kubelet_csr.client_usages(key), bootstrap_usages(key)):
        renewal = spec_of(client, usages, username="system:node:node-1")
        assert signer_error(renewal) is None
        assert csrapproving({"spec": renewal}) == "Approved"
        assert recognize(renewal, parse_request(renewal))[0] == "selfnodeclient"
    addresses = [
        NodeAddress(type="Hostname", address="node-1"),
        NodeAddress(type="InternalIP", address="10.0.0.5"),
    ]
    template = kubelet_csr.serving_template("node-1", addresses)
    assert template is not None
    serving = kubelet_csr.make_csr(key, template)
    spec = spec_of(serving, kubelet_csr.serving_usages(key), signer=SERVING_SIGNER)
    assert signer_error(spec) is None
    # a serving request carrying only a DNS name (AllowDNSOnlyNodeCSR) is signed too
    dns_only = kubelet_csr.serving_template("node-1", addresses[:1], allow_dns_only=True)
    assert dns_only is not None
    spec = spec_of(kubelet_csr.make_csr(key, dns_only), kubelet_csr.serving_usages(key))
    assert signer_error({**spec, "signerName": SERVING_SIGNER}) is None


# -- the signed certificate's lifetime ----------------------------------------------------

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
YEAR = datetime.timedelta(days=365)
MINUTE = datetime.timedelta(minutes=1)


@pytest.mark.parametrize(
    ("ttl", "seconds", "lifetime"),
    [
        (YEAR, None, YEAR),  # --cluster-signing-duration
        (YEAR, 86400, datetime.timedelta(days=1)),  # shorter on request
        (datetime.timedelta(hours=1), 86400, 65 * MINUTE),  # never beyond the signer's
        (YEAR, 600, 15 * MINUTE),  # short: the backdate comes on top
        (YEAR, 60, 15 * MINUTE),  # at least 10 minutes
    ],
)
def test_validity(
    ttl: datetime.timedelta, seconds: int | None, lifetime: datetime.timedelta
) -> None:
    not_before, not_after = validity(NOW, ttl, seconds)
    assert not_before == NOW - 5 * MINUTE
    assert not_after - not_before == lifetime
