"""What a kubelet asks the certificates API for: keys, CSRs, usages, names (pure).

Facts kept from upstream (client-go util/certificate, pkg/kubelet/certificate):

* keys are ECDSA P-256, written as a SEC1 ``EC PRIVATE KEY`` PEM block;
* the client certificate's subject is ``CN=system:node:<node>, O=system:nodes``, signer
  ``kubernetes.io/kube-apiserver-client-kubelet``, usages ``digital signature`` and
  ``client auth`` (``key encipherment`` too, only for an RSA key);
* the serving certificate has the same subject, signer ``kubernetes.io/kubelet-serving``,
  usages ``digital signature``, ``server auth`` (and ``key encipherment`` for RSA), and
  SANs from the node's addresses: Hostname/InternalDNS/ExternalDNS as DNS names (a
  Hostname that parses as an IP counts as an IP), InternalIP/ExternalIP as IPs, sorted,
  without duplicates. No IP, no template (upstream waits for one before asking), unless
  ``AllowDNSOnlyNodeCSR`` is on and a DNS name exists;
* the bootstrap CSR is named ``node-csr-`` + the base64url (unpadded) SHA-512/256 of the
  public key, CN, organizations and usages, each base64url-encoded and followed by ``|``:
  the same key asks under the same name, so a restarted kubelet finds its pending CSR.
  Rotation CSRs use ``generateName: csr-``.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from collections.abc import Iterable, Sequence

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from kubelet.api import NodeAddress

__all__ = [
    "CLIENT_SIGNER",
    "NODES_GROUP",
    "SERVING_SIGNER",
    "CertificateTemplate",
    "PrivateKey",
    "bootstrap_csr_name",
    "client_template",
    "client_usages",
    "generate_key",
    "key_pem",
    "load_key",
    "make_csr",
    "satisfies",
    "serving_template",
    "serving_usages",
    "split_addresses",
]

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
SERVING_SIGNER = "kubernetes.io/kubelet-serving"
NODES_GROUP = "system:nodes"

DIGITAL_SIGNATURE = "digital signature"
KEY_ENCIPHERMENT = "key encipherment"
CLIENT_AUTH = "client auth"
SERVER_AUTH = "server auth"

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@attrs.frozen
class CertificateTemplate:
    """The subject and SANs a certificate must carry (Go's x509.CertificateRequest)."""

    common_name: str
    organizations: tuple[str, ...] = ()
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()


def node_common_name(node_name: str) -> str:
    return f"system:node:{node_name}"


def client_template(node_name: str) -> CertificateTemplate:
    return CertificateTemplate(node_common_name(node_name), (NODES_GROUP,))


def split_addresses(addresses: Iterable[NodeAddress]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(DNS names, IPs) for a serving certificate, each sorted, duplicates dropped."""
    dns: set[str] = set()
    ips: set[str] = set()
    for address in addresses:
        value = address.address
        if not value:
            continue
        ip = _ip(value)
        if address.type == "Hostname":
            (ips if ip is not None else dns).add(ip or value)
        elif address.type in ("InternalIP", "ExternalIP"):
            if ip is not None:
                ips.add(ip)
        elif address.type in ("InternalDNS", "ExternalDNS"):
            dns.add(value)
    return tuple(sorted(dns)), tuple(sorted(ips))


def serving_template(
    node_name: str, addresses: Iterable[NodeAddress], *, allow_dns_only: bool = False
) -> CertificateTemplate | None:
    """The serving certificate's template, None until the node has an address to certify."""
    dns, ips = split_addresses(addresses)
    if not ips and not (allow_dns_only and dns):
        return None
    return CertificateTemplate(node_common_name(node_name), (NODES_GROUP,), dns, ips)


def client_usages(key: PrivateKey) -> tuple[str, ...]:
    if isinstance(key, rsa.RSAPrivateKey):
        return (DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, CLIENT_AUTH)
    return (DIGITAL_SIGNATURE, CLIENT_AUTH)


def bootstrap_usages(key: PrivateKey) -> tuple[str, ...]:
    """The bootstrap request lists key encipherment last (the order enters its name)."""
    if isinstance(key, rsa.RSAPrivateKey):
        return (DIGITAL_SIGNATURE, CLIENT_AUTH, KEY_ENCIPHERMENT)
    return (DIGITAL_SIGNATURE, CLIENT_AUTH)


def serving_usages(key: PrivateKey) -> tuple[str, ...]:
    if isinstance(key, rsa.RSAPrivateKey):
        return (DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, SERVER_AUTH)
    return (DIGITAL_SIGNATURE, SERVER_AUTH)


def generate_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: PrivateKey) -> bytes:
    """``EC PRIVATE KEY`` (SEC1) for EC keys, ``RSA PRIVATE KEY`` for RSA: what Go writes."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def load_key(data: bytes) -> PrivateKey:
    """A PEM private key (SEC1, PKCS#1 or PKCS#8); ValueError if it is none we can use."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a usable PEM private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"unsupported private key type {type(key).__name__}")
    return key


def make_csr(key: PrivateKey, template: CertificateTemplate) -> bytes:
    """A PEM ``CERTIFICATE REQUEST`` for ``template``, signed by ``key``."""
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in template.organizations]
    names.append(x509.NameAttribute(NameOID.COMMON_NAME, template.common_name))
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names))
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in template.dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in template.ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def bootstrap_csr_name(
    key: PrivateKey, common_name: str, organizations: Sequence[str], usages: Sequence[str]
) -> str:
    """``node-csr-<digest>``: the same key, subject and usages always give the same name."""
    digest = hashlib.new("sha512_256")
    spki = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for part in (spki, common_name.encode(), *(o.encode() for o in organizations)):
        digest.update(_b64(part).encode() + b"|")
    for usage in usages:
        digest.update(_b64(usage.encode()).encode() + b"|")
    return "node-csr-" + _b64(digest.digest())


def satisfies(certificate: x509.Certificate, template: CertificateTemplate) -> bool:
    """Does the certificate carry the template's CN and at least its DNS names, IPs and
    organizations (extras do not matter)?"""
    subject = certificate.subject
    cns = [a.value for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if (cns[0] if cns else "") != template.common_name:
        return False
    orgs = {str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)}
    if not set(template.organizations) <= orgs:
        return False
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = set(san.get_values_for_type(x509.DNSName))
        ips = {str(i) for i in san.get_values_for_type(x509.IPAddress)}
    except x509.ExtensionNotFound:
        dns, ips = set(), set()
    return set(template.dns_names) <= dns and set(template.ip_addresses) <= ips


def _ip(value: str) -> str | None:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")
