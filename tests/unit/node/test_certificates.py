"""The pure parts of kubelet.node.certificates: CSR content, names, deadlines, the store,
the kubeconfig bootstrap writes, and how a CSR's status is read."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
import os
import random
import time
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from kubelet.api import NodeAddress
from kubelet.node.certificates import FileStore
from kubelet.node.certificates import csr as csrmod
from kubelet.node.certificates.deadline import retry_delays, rotation_deadline
from kubelet.node.certificates.kubeconfigs import still_valid, write_bootstrapped
from kubelet.node.certificates.request import (
    RequestDenied,
    RequestFailed,
    RequestGone,
    csr_body,
    csr_certificate,
    incompatibility,
)
from kubelet.node.certificates.store import NoCertificate, StoreError
from kubelet.testing import TestCA

# -- CSR content --------------------------------------------------------------------------


def test_client_usages_follow_the_key_type() -> None:
    ec_key = csrmod.generate_key()
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert csrmod.client_usages(ec_key) == ("digital signature", "client auth")
    assert csrmod.client_usages(rsa_key) == ("digital signature", "key encipherment", "client auth")
    assert csrmod.serving_usages(ec_key) == ("digital signature", "server auth")
    assert csrmod.serving_usages(rsa_key) == (
        "digital signature",
        "key encipherment",
        "server auth",
    )
    assert csrmod.bootstrap_usages(rsa_key)[-1] == "key encipherment"


def test_keys_are_p256_written_as_sec1() -> None:
    key = csrmod.generate_key()
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.curve.name == "secp256r1"
    pem = csrmod.key_pem(key)
    assert pem.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    assert csrmod.load_key(pem).private_numbers() == key.private_numbers()
    with pytest.raises(ValueError):
        csrmod.load_key(b"not a key")


def test_client_csr_subject() -> None:
    key = csrmod.generate_key()
    pem = csrmod.make_csr(key, csrmod.client_template("node-1"))
    request = x509.load_pem_x509_csr(pem)
    assert request.is_signature_valid
    cn = request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    orgs = [a.value for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert (cn, orgs) == ("system:node:node-1", ["system:nodes"])
    with pytest.raises(x509.ExtensionNotFound):
        request.extensions.get_extension_for_class(x509.SubjectAlternativeName)


# upstream's TestAddressesToHostnamesAndIPs cases, restated
ADDRESS_CASES = [
    ([], (), ()),
    (
        [
            NodeAddress(type="Hostname", address="hostname"),
            NodeAddress(type="ExternalDNS", address="myexternaldns.com"),
            NodeAddress(type="InternalDNS", address="myinternaldns.com"),
            NodeAddress(type="ExternalIP", address="2.2.2.2"),
            NodeAddress(type="InternalIP", address="1.1.1.1"),
            NodeAddress(type="InternalIP", address="1.1.1.1"),
            NodeAddress(type="Hostname", address="hostname"),
        ],
        ("hostname", "myexternaldns.com", "myinternaldns.com"),
        ("1.1.1.1", "2.2.2.2"),
    ),
    (
        [
            NodeAddress(type="Hostname", address="10.0.0.5"),
            NodeAddress(type="ExternalIP", address="x"),
        ],
        (),
        ("10.0.0.5",),
    ),
    ([NodeAddress(type="InternalIP", address="")], (), ()),
]


@pytest.mark.parametrize(("addresses", "dns", "ips"), ADDRESS_CASES)
def test_serving_sans_from_node_addresses(
    addresses: list[NodeAddress], dns: tuple[str, ...], ips: tuple[str, ...]
) -> None:
    assert csrmod.split_addresses(addresses) == (dns, ips)


def test_no_serving_template_without_an_ip() -> None:
    only_dns = [NodeAddress(type="Hostname", address="node-1")]
    assert csrmod.serving_template("node-1", only_dns) is None
    template = csrmod.serving_template("node-1", only_dns, allow_dns_only=True)
    assert template is not None and template.dns_names == ("node-1",)
    full = csrmod.serving_template(
        "node-1", [*only_dns, NodeAddress(type="InternalIP", address="10.0.0.5")]
    )
    assert full == csrmod.CertificateTemplate(
        "system:node:node-1", ("system:nodes",), ("node-1",), ("10.0.0.5",)
    )
    request = x509.load_pem_x509_csr(csrmod.make_csr(csrmod.generate_key(), full))
    san = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["node-1"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.5")]


def _digested(key: csrmod.PrivateKey, cn: str, orgs: list[str], usages: list[str]) -> str:
    """upstream's digestedName, written out step by step."""

    def enc(b: bytes) -> bytes:
        return base64.urlsafe_b64encode(b).rstrip(b"=")

    h = hashlib.new("sha512_256")
    spki = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for part in [spki, cn.encode(), *(o.encode() for o in orgs), *(u.encode() for u in usages)]:
        h.update(enc(part) + b"|")
    return "node-csr-" + enc(h.digest()).decode()


def test_bootstrap_csr_name_is_a_digest_of_key_subject_and_usages() -> None:
    key = csrmod.generate_key()
    usages = ["digital signature", "client auth"]
    name = csrmod.bootstrap_csr_name(key, "system:node:n1", ["system:nodes"], usages)
    assert name == _digested(key, "system:node:n1", ["system:nodes"], usages)
    assert name.startswith("node-csr-") and len(name) == len("node-csr-") + 43
    # stable for the same inputs, different when any changes
    assert name == csrmod.bootstrap_csr_name(key, "system:node:n1", ["system:nodes"], usages)
    assert name != csrmod.bootstrap_csr_name(key, "system:node:n2", ["system:nodes"], usages)
    assert name != csrmod.bootstrap_csr_name(
        csrmod.generate_key(), "system:node:n1", ["system:nodes"], usages
    )
    # the delimiter keeps 'CN:foo,O:bar' apart from 'CN:foob,O:ar'
    assert csrmod.bootstrap_csr_name(key, "foo", ["bar"], []) != csrmod.bootstrap_csr_name(
        key, "foob", ["ar"], []
    )


def _cert(
    key: csrmod.PrivateKey,
    cn: str,
    orgs: tuple[str, ...] = (),
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    not_before: float = 0.0,
    not_after: float | None = None,
) -> x509.Certificate:
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    names.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    start = dt.datetime.fromtimestamp(not_before or time.time() - 60, dt.UTC)
    end = dt.datetime.fromtimestamp(not_after or time.time() + 3600, dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(names))
        .issuer_name(x509.Name(names))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(key, hashes.SHA256())


def test_satisfies_the_template() -> None:
    key = csrmod.generate_key()
    template = csrmod.CertificateTemplate(
        "system:node:n1", ("system:nodes",), ("n1",), ("10.0.0.1",)
    )
    good = _cert(key, "system:node:n1", ("system:nodes", "extra"), ("n1", "more"), ("10.0.0.1",))
    assert csrmod.satisfies(good, template)
    assert not csrmod.satisfies(
        _cert(key, "system:node:n2", ("system:nodes",), ("n1",), ("10.0.0.1",)), template
    )
    assert not csrmod.satisfies(_cert(key, "system:node:n1", (), ("n1",), ("10.0.0.1",)), template)
    assert not csrmod.satisfies(
        _cert(key, "system:node:n1", ("system:nodes",), (), ("10.0.0.1",)), template
    )
    assert not csrmod.satisfies(
        _cert(key, "system:node:n1", ("system:nodes",), ("n1",), ("10.0.0.2",)), template
    )


# -- deadlines ----------------------------------------------------------------------------


@pytest.mark.parametrize(("rand", "expected"), [(0.0, 700.0), (0.5, 800.0), (0.999999, 899.9998)])
def test_rotation_deadline_is_70_to_90_percent_of_the_lifetime(
    rand: float, expected: float
) -> None:
    assert rotation_deadline(1000.0, 2000.0, rand) == pytest.approx(1000.0 + expected)


def test_rotation_deadline_spread() -> None:
    rng = random.Random(7)
    deadlines = [rotation_deadline(0.0, 100.0, rng.random()) for _ in range(1000)]
    assert 70.0 <= min(deadlines) < 71.0 and 89.0 < max(deadlines) <= 90.0


def test_retry_delays_double_then_stay_at_32s() -> None:
    delays = retry_delays(random.Random(1))
    first = [next(delays) for _ in range(5)]
    for got, base in zip(first, (2, 4, 8, 16, 32), strict=True):
        assert base <= got <= base * 1.1
    assert [next(delays) for _ in range(3)] == [32.0, 32.0, 32.0]


# -- the store ----------------------------------------------------------------------------


def _pair(now: float, lifetime: float = 3600.0) -> tuple[bytes, bytes]:
    key = csrmod.generate_key()
    cert = _cert(
        key, "system:node:n1", ("system:nodes",), not_before=now - 60, not_after=now + lifetime
    )
    return cert.public_bytes(serialization.Encoding.PEM), csrmod.key_pem(key)


def test_store_names_files_by_time_and_links_current(tmp_path: Path) -> None:
    store = FileStore("kubelet-client", str(tmp_path))
    with pytest.raises(NoCertificate, match="no cert/key files read at"):
        store.current()
    now = time.mktime((2026, 3, 4, 5, 6, 7, 0, 0, -1))
    first = store.update(*_pair(now), now=now)
    target = tmp_path / "kubelet-client-2026-03-04-05-06-07.pem"
    current = tmp_path / "kubelet-client-current.pem"
    assert current.is_symlink() and os.readlink(current) == str(target)
    assert target.stat().st_mode & 0o777 == 0o600
    text = target.read_text()
    assert text.index("BEGIN CERTIFICATE") < text.index("BEGIN EC PRIVATE KEY")
    assert store.current().serial == first.serial
    assert first.cert_file == first.key_file == str(current)
    second = store.update(*_pair(now + 61), now=now + 61)
    assert os.readlink(current) == str(tmp_path / "kubelet-client-2026-03-04-05-07-08.pem")
    assert store.current().serial == second.serial
    assert target.exists()  # older pairs stay, as upstream leaves them
    assert not (tmp_path / "kubelet-client-updated.pem").exists()


def test_store_refuses_bad_data_and_changes_nothing(tmp_path: Path) -> None:
    store = FileStore("kubelet-client", str(tmp_path))
    cert, _ = _pair(time.time())
    _, other_key = _pair(time.time())
    with pytest.raises(StoreError, match="does not match"):
        store.update(cert, other_key)
    with pytest.raises(StoreError, match="no PEM certificate"):
        store.update(b"junk", other_key)
    assert list(tmp_path.iterdir()) == []


def test_store_recovers_an_interrupted_link_update(tmp_path: Path) -> None:
    store = FileStore("kubelet-server", str(tmp_path))
    pair = store.update(*_pair(time.time()))
    current = tmp_path / "kubelet-server-current.pem"
    target = os.readlink(current)
    current.unlink()
    os.symlink(target, tmp_path / "kubelet-server-updated.pem")  # crash between the steps
    assert FileStore("kubelet-server", str(tmp_path)).current().serial == pair.serial
    assert os.readlink(current) == target


def test_store_falls_back_to_configured_then_plain_files(tmp_path: Path) -> None:
    cert, key = _pair(time.time())
    (tmp_path / "kubelet-server.crt").write_bytes(cert)
    (tmp_path / "kubelet-server.key").write_bytes(key)
    plain = FileStore("kubelet-server", str(tmp_path)).current()
    cert2, key2 = _pair(time.time())
    (tmp_path / "tls.crt").write_bytes(cert2)
    (tmp_path / "tls.key").write_bytes(key2)
    configured = FileStore(
        "kubelet-server", str(tmp_path), str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")
    ).current()
    assert plain.cert_file.endswith("kubelet-server.crt")
    assert configured.cert_file.endswith("tls.crt") and configured.serial != plain.serial


def test_store_refuses_a_file_where_the_link_belongs(tmp_path: Path) -> None:
    (tmp_path / "kubelet-client-current.pem").write_text("x")
    with pytest.raises(StoreError, match="to be a symlink but it is a file"):
        FileStore("kubelet-client", str(tmp_path)).update(*_pair(time.time()))


# -- kubeconfigs --------------------------------------------------------------------------


def _bootstrap_kubeconfig(tmp_path: Path, ca: TestCA) -> Path:
    path = tmp_path / "bootstrap-kubelet.conf"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "k",
                        "cluster": {
                            "server": "https://10.0.0.1:6443",
                            "certificate-authority": "ca.crt",
                        },
                    }
                ],
                "users": [
                    {
                        "name": "tls-bootstrap-token-user",
                        "user": {"token": "abcdef.0123456789abcdef"},
                    }
                ],
                "contexts": [
                    {"name": "c", "context": {"cluster": "k", "user": "tls-bootstrap-token-user"}}
                ],
                "current-context": "c",
            }
        )
    )
    return path


def test_written_kubeconfig_points_at_the_current_pair(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    bootstrap = _bootstrap_kubeconfig(tmp_path, ca)
    target = tmp_path / "etc" / "kubelet.conf"
    pem = str(tmp_path / "pki" / "kubelet-client-current.pem")
    write_bootstrapped(str(bootstrap), str(target), pem)
    doc = yaml.safe_load(target.read_text())
    assert target.stat().st_mode & 0o777 == 0o600
    assert doc["current-context"] == "default-context"
    assert doc["clusters"] == [
        {
            "name": "default-cluster",
            "cluster": {
                "server": "https://10.0.0.1:6443",
                "certificate-authority": str(tmp_path / "ca.crt"),
            },
        }
    ]
    assert doc["users"] == [
        {"name": "default-auth", "user": {"client-certificate": pem, "client-key": pem}}
    ]
    assert doc["contexts"][0]["context"] == {
        "cluster": "default-cluster",
        "namespace": "default",
        "user": "default-auth",
    }
    assert "token" not in target.read_text()  # the bootstrap token never leaves its file


def test_still_valid_needs_an_unexpired_client_certificate(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    bootstrap = _bootstrap_kubeconfig(tmp_path, ca)
    kubeconfig = tmp_path / "kubelet.conf"
    assert not still_valid(str(kubeconfig), time.time())
    store = FileStore("kubelet-client", str(tmp_path / "pki"))
    pair = store.update(*_pair(time.time(), lifetime=600))
    write_bootstrapped(str(bootstrap), str(kubeconfig), store.current_path)
    assert still_valid(str(kubeconfig), time.time())
    assert not still_valid(str(kubeconfig), pair.not_after + 1)
    assert not still_valid(str(bootstrap), time.time())  # a token, no certificate
    kubeconfig.write_text("garbage: [")
    assert not still_valid(str(kubeconfig), time.time())


# -- reading a CSR ------------------------------------------------------------------------


def _csr_obj(conditions: list[dict[str, str]], certificate: bytes = b"", uid: str = "u1") -> dict:
    status: dict = {"conditions": conditions}
    if certificate:
        status["certificate"] = base64.b64encode(certificate).decode()
    return {"metadata": {"name": "csr-1", "uid": uid}, "status": status}


def test_csr_status_decisions() -> None:
    approved = {"type": "Approved", "reason": "AutoApproved", "message": "ok"}
    assert csr_certificate(_csr_obj([]), "csr-1", "u1") is None
    assert csr_certificate(_csr_obj([approved]), "csr-1", "u1") is None
    assert csr_certificate(_csr_obj([approved], b"PEM"), "csr-1", "u1") == b"PEM"
    with pytest.raises(RequestDenied, match="denied, reason: NotMine, message: no"):
        csr_certificate(
            _csr_obj([{"type": "Denied", "reason": "NotMine", "message": "no"}]), "csr-1", "u1"
        )
    with pytest.raises(RequestFailed, match="failed, reason: SignerError, message: boom"):
        csr_certificate(
            _csr_obj([approved, {"type": "Failed", "reason": "SignerError", "message": "boom"}]),
            "csr-1",
            "u1",
        )
    with pytest.raises(RequestGone, match="changed UIDs"):
        csr_certificate(_csr_obj([approved], b"PEM", uid="u2"), "csr-1", "u1")


def test_csr_body() -> None:
    named = csr_body(
        b"PEM", "node-csr-x", csrmod.CLIENT_SIGNER, ("digital signature", "client auth")
    )
    assert named["metadata"] == {"name": "node-csr-x"}
    assert named["spec"] == {
        "request": base64.b64encode(b"PEM").decode(),
        "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
        "usages": ["digital signature", "client auth"],
    }
    rotated = csr_body(b"PEM", "", csrmod.SERVING_SIGNER, ("server auth",), 3600)
    assert rotated["metadata"] == {"generateName": "csr-"}
    assert rotated["spec"]["expirationSeconds"] == 3600
    assert rotated["apiVersion"] == "certificates.k8s.io/v1"


def test_an_existing_csr_is_reused_only_when_compatible() -> None:
    key = csrmod.generate_key()
    template = csrmod.client_template("n1")
    ours = csrmod.make_csr(key, template)
    same_key_again = csrmod.make_csr(key, template)  # a fresh signature, same key
    existing = {
        "spec": {
            "request": base64.b64encode(same_key_again).decode(),
            "signerName": csrmod.CLIENT_SIGNER,
        }
    }
    assert incompatibility(existing, ours, csrmod.CLIENT_SIGNER, key, time.time()) == ""
    other_key = csrmod.make_csr(csrmod.generate_key(), template)
    existing["spec"]["request"] = base64.b64encode(other_key).decode()
    assert "against old key" in incompatibility(
        existing, ours, csrmod.CLIENT_SIGNER, key, time.time()
    )
    other_node = csrmod.make_csr(key, csrmod.client_template("n2"))
    existing["spec"]["request"] = base64.b64encode(other_node).decode()
    assert "subjects differ" in incompatibility(
        existing, ours, csrmod.CLIENT_SIGNER, key, time.time()
    )
    existing["spec"]["request"] = base64.b64encode(same_key_again).decode()
    assert "signerNames differ" in incompatibility(
        existing, ours, csrmod.SERVING_SIGNER, key, time.time()
    )
    expired = _cert(
        key, "system:node:n1", not_before=time.time() - 7200, not_after=time.time() - 60
    )
    existing["status"] = {
        "certificate": base64.b64encode(expired.public_bytes(serialization.Encoding.PEM)).decode()
    }
    assert "has expired" in incompatibility(existing, ours, csrmod.CLIENT_SIGNER, key, time.time())
