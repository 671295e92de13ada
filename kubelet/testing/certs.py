"""A throwaway certificate authority for TLS and mTLS tests (``cryptography``).

The fake API server presents a certificate for 127.0.0.1/localhost signed by this CA,
and accepts client certificates it signed: the subject's CN is the user name and its
O entries the groups, exactly how the real API server reads a kubelet's client
certificate (``CN=system:node:<name>, O=system:nodes``). EC P-256 keys, so a test that
makes a CA and three certificates spends milliseconds, not seconds on RSA.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertPair", "TestCA", "client_identity", "expired"]

NO_CHECK_TIME = 0x200000
"""OpenSSL's X509_V_FLAG_NO_CHECK_TIME: the fake checks validity with its own clock
(``expired``), which autojump_clock moves far ahead of the host's."""

_VALID = datetime.timedelta(days=365)


@attrs.frozen
class CertPair:
    """PEM files on disk, as ssl and kubeconfigs want them."""

    cert: Path
    key: Path


def _name(cn: str, orgs: Iterable[str] = ()) -> x509.Name:
    attrs_ = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs_, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class TestCA:
    """A self-signed CA that issues server and client certificates into ``directory``."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, directory: Path, name: str = "fakeapiserver-ca") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert_path = self.directory / "ca.crt"
        self.cert_path.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        stem: str,
        cn: str,
        orgs: Sequence[str] = (),
        *,
        hosts: Sequence[str] = (),
        server: bool = False,
    ) -> CertPair:
        """Write ``<stem>.crt``/``<stem>.key``: a leaf for a server (hosts) or a client."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, orgs))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = CertPair(self.directory / f"{stem}.crt", self.directory / f"{stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        pair.key.chmod(0o600)
        return pair

    @property
    def certificate(self) -> x509.Certificate:
        return self._cert

    def sign_csr(
        self,
        csr_pem: bytes,
        not_before: datetime.datetime,
        not_after: datetime.datetime,
        *,
        server: bool = False,
    ) -> bytes:
        """Issue the PEM certificate a CSR asks for (its subject and SANs), as the
        controller manager's csrsigning does; the chain ends with this CA."""
        request = x509.load_pem_x509_csr(csr_pem)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(request.subject)
            .issuer_name(self._cert.subject)
            .public_key(request.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        try:
            san = request.extensions.get_extension_for_class(x509.SubjectAlternativeName)
            builder = builder.add_extension(san.value, critical=False)
        except x509.ExtensionNotFound:
            pass
        cert = builder.sign(self._key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM)

    def server_context(self, pair: CertPair) -> ssl.SSLContext:
        """Server side: present ``pair``; verify client certificates against this CA if sent."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pair.cert, pair.key)
        ctx.load_verify_locations(cafile=self.cert_path)
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.verify_flags = ctx.verify_flags | NO_CHECK_TIME
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    def client_context(self, pair: CertPair | None = None) -> ssl.SSLContext:
        """Client side (pass as httpx ``verify=``): trust this CA, present ``pair`` if given."""
        ctx = ssl.create_default_context(cafile=str(self.cert_path))
        if pair is not None:
            ctx.load_cert_chain(pair.cert, pair.key)
        return ctx


def expired(peer_cert: object, now: float) -> bool:
    """Whether a peer certificate (``ssl.getpeercert()``) is outside its validity at ``now``."""
    if not isinstance(peer_cert, dict):
        return False
    try:
        not_before = ssl.cert_time_to_seconds(peer_cert["notBefore"])
        not_after = ssl.cert_time_to_seconds(peer_cert["notAfter"])
    except (KeyError, ValueError):
        return False
    return not not_before <= now <= not_after


def client_identity(peer_cert: object) -> tuple[str, list[str]] | None:
    """(user, groups) from a verified peer certificate as ``ssl.getpeercert()`` gives it."""
    if not isinstance(peer_cert, dict):
        return None
    user, groups = "", []
    for rdn in peer_cert.get("subject", ()):
        for field, value in rdn:
            if field == "commonName":
                user = value
            elif field == "organizationName":
                groups.append(value)
    return (user, groups) if user else None
