"""The self-signed serving certificate, as upstream makes it when none is configured.

A one-year serving certificate for the node's hostname (``<host>@<unix time>``), signed by
a throwaway CA (``<host>-ca@<unix time>``) whose certificate follows it in the chain.

The kubelet runs this module as a child process (``servingcert``), once, when
``<cert-dir>/kubelet.crt`` is absent: cryptography and its 6 MiB of native code then never
load into the long-lived kubelet, which serves the pair with ``ssl`` alone.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)
BACKDATE = dt.timedelta(hours=1)
"""Valid from an hour ago, so small clock skew between hosts does not matter."""


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def self_signed_pair(host: str, now: dt.datetime | None = None) -> tuple[bytes, bytes]:
    """(certificate chain PEM, private key PEM) for ``host``."""
    now = now or dt.datetime.now(dt.UTC)
    stamp = int(now.timestamp())
    not_before, not_after = now - BACKDATE, now - BACKDATE + VALIDITY
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = _name(f"{host}-ca@{stamp}")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=True,
                key_cert_sign=True,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{host}@{stamp}"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_san(host)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(
        serialization.Encoding.PEM
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return chain, key_pem


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write atomically (a crash never leaves half a key behind)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def write_self_signed(host: str, crt: Path, key: Path) -> None:
    """Create ``crt`` and ``key`` for ``host`` (the key first: the pair is complete once
    ``crt`` exists)."""
    crt.parent.mkdir(parents=True, exist_ok=True)
    chain, key_pem = self_signed_pair(host)
    _write(key, key_pem, 0o600)
    _write(crt, chain, 0o644)


def main(argv: list[str]) -> int:
    """``python -m kubelet.server.certs HOST CERT KEY``: what ``servingcert`` runs."""
    if len(argv) != 3:
        print("usage: python -m kubelet.server.certs HOST CERT KEY", file=sys.stderr)
        return 2
    host, crt, key = argv
    try:
        write_self_signed(host, Path(crt), Path(key))
    except OSError as exc:
        print(f"unable to write the self-signed serving certificate: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
