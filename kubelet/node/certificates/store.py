"""The certificate store in ``--cert-dir``: one PEM file per certificate, a ``current`` link.

As client-go's FileStore (names and order of lookup are what users and kubeadm see):

* ``<prefix>-<YYYY-MM-DD-HH-MM-SS>.pem`` (local time) holds the certificate chain then
  the private key, mode 0600;
* ``<prefix>-current.pem`` is a symlink to the newest one; it is replaced by making
  ``<prefix>-updated.pem`` point at the new file and renaming it over ``current``, so a
  reader sees the old pair or the new one, never neither. A crash between the two steps
  is repaired at start-up: an ``updated`` link without a ``current`` one is renamed;
* the current pair is looked for in ``<prefix>-current.pem``, then the configured
  certificate and key files (``tlsCertFile``/``tlsPrivateKeyFile`` for the serving pair),
  then ``<prefix>.crt`` / ``<prefix>.key`` in the directory.

``prefix`` is ``kubelet-client`` or ``kubelet-server``. All I/O is on the local disk and
small; callers in trio run it directly (as the kubelet's other state files are written).
Reads are bounded (``PAIR_FILE_LIMIT``) and only of regular files, so a FIFO or a link to
a device in the directory is refused at once instead of blocking the node agent.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kubelet.boundedio import InputRefused, read_regular_file

from .csr import PrivateKey, load_key
from .sslload import PAIR_FILE_LIMIT

__all__ = ["CertKeyPair", "FileStore", "NoCertificate", "StoreError", "load_pair"]

CLIENT_PREFIX = "kubelet-client"
SERVER_PREFIX = "kubelet-server"


class StoreError(Exception):
    """The store cannot be read or written; the message names the file."""


class NoCertificate(StoreError):
    """No certificate and key were found in any of the places looked at."""


@attrs.frozen
class CertKeyPair:
    """A certificate (with its chain) and its key, as loaded from a file."""

    chain_pem: bytes = attrs.field(repr=False)
    key_pem: bytes = attrs.field(repr=False)
    leaf: x509.Certificate
    key: PrivateKey = attrs.field(repr=False)
    cert_file: str = ""
    key_file: str = ""

    @property
    def not_before(self) -> float:
        return self.leaf.not_valid_before_utc.timestamp()

    @property
    def not_after(self) -> float:
        return self.leaf.not_valid_after_utc.timestamp()

    @property
    def serial(self) -> int:
        return self.leaf.serial_number

    def expired(self, now: float) -> bool:
        return now > self.not_after


def load_pair(cert_file: str, key_file: str | None = None) -> CertKeyPair:
    """Load a pair (``key_file`` None: the key is in ``cert_file`` too); StoreError says why not."""
    key_file = key_file or cert_file
    try:
        chain = read_regular_file(cert_file, PAIR_FILE_LIMIT)
        key_data = chain if key_file == cert_file else read_regular_file(key_file, PAIR_FILE_LIMIT)
    except InputRefused as exc:
        raise StoreError(f"cannot read {exc}") from None
    except OSError as exc:
        raise StoreError(f"cannot read {exc.filename}: {exc.strerror}") from None
    return pair_from_pem(chain, key_data, cert_file, key_file)


def pair_from_pem(
    chain: bytes, key_data: bytes, cert_file: str = "", key_file: str = ""
) -> CertKeyPair:
    where = cert_file or "the certificate data"
    try:
        certs = x509.load_pem_x509_certificates(chain)
    except ValueError:
        raise StoreError(f"{where}: no PEM certificate found") from None
    try:
        key = load_key(key_data)
    except ValueError as exc:
        raise StoreError(f"{key_file or 'the key data'}: {exc}") from None
    leaf = certs[0]
    if _public(key) != _public_of(leaf):
        raise StoreError(f"{where}: the private key does not match the certificate")
    cert_pem = b"".join(_pem(c) for c in certs)
    return CertKeyPair(cert_pem, _key_block(key_data), leaf, key, cert_file, key_file)


class FileStore:
    """The ``<prefix>-*.pem`` files of one certificate kind in ``cert_dir``."""

    def __init__(self, prefix: str, cert_dir: str, cert_file: str = "", key_file: str = "") -> None:
        self.prefix = prefix
        self.cert_dir = Path(cert_dir)
        self.cert_file = cert_file
        self.key_file = key_file
        self._recover()

    @property
    def current_path(self) -> str:
        return str(self.cert_dir / f"{self.prefix}-current.pem")

    @property
    def _updated_path(self) -> Path:
        return self.cert_dir / f"{self.prefix}-updated.pem"

    def _recover(self) -> None:
        current, updated = Path(self.current_path), self._updated_path
        if os.path.exists(current) or not os.path.lexists(updated):
            return
        if not updated.is_symlink():
            raise StoreError(f"expected {updated} to be a symlink but it is a file")
        os.replace(updated, current)

    def current(self) -> CertKeyPair:
        """The current pair, from the first place that has one; NoCertificate if none does."""
        if os.path.exists(self.current_path):
            return load_pair(self.current_path)
        files = (self.cert_file, self.key_file)
        if all(files) and all(os.path.exists(f) for f in files):
            return load_pair(self.cert_file, self.key_file)
        crt = self.cert_dir / f"{self.prefix}.crt"
        key = self.cert_dir / f"{self.prefix}.key"
        if crt.exists() and key.exists():
            return load_pair(str(crt), str(key))
        raise NoCertificate(
            f"no cert/key files read at {self.current_path!r}, ({self.cert_file!r}, "
            f"{self.key_file!r}) or ({str(self.cert_dir)!r}, {str(self.cert_dir)!r})"
        )

    def update(self, chain_pem: bytes, key_pem: bytes, now: float | None = None) -> CertKeyPair:
        """Write a new pair and make it current; StoreError (nothing changed) if the data
        is not a certificate with its key."""
        pair = pair_from_pem(chain_pem, key_pem)
        when = time.localtime(time.time() if now is None else now)
        stamp = time.strftime("%Y-%m-%d-%H-%M-%S", when)
        try:
            self.cert_dir.mkdir(parents=True, exist_ok=True, mode=0o755)
            target = self.cert_dir / f"{self.prefix}-{stamp}.pem"
            _write_private(target, pair.chain_pem + pair.key_pem)
            self._link(target)
        except OSError as exc:
            raise StoreError(f"cannot store the {self.prefix} certificate: {exc}") from None
        return attrs.evolve(pair, cert_file=self.current_path, key_file=self.current_path)

    def _link(self, target: Path) -> None:
        current, updated = Path(self.current_path), self._updated_path
        if os.path.lexists(current) and not current.is_symlink():
            raise StoreError(f"expected {current} to be a symlink but it is a file")
        if os.path.lexists(updated):
            if not updated.is_symlink():
                raise StoreError(f"expected {updated} to be a symlink but it is a file")
            updated.unlink()
        os.symlink(os.path.abspath(target), updated)
        os.replace(updated, current)


def _write_private(path: Path, data: bytes) -> None:
    """Write 0600 through a temporary name, so a crash never leaves half a key."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_block(data: bytes) -> bytes:
    """The first private key block of ``data`` as PEM text (the file may hold certificates)."""
    text = data.decode("ascii", "replace")
    start = text.find("-----BEGIN ")
    while start >= 0:
        line_end = text.find("-----", start + 11)
        label = text[start + 11 : line_end]
        end_marker = f"-----END {label}-----"
        end = text.find(end_marker, line_end)
        if end < 0:
            break
        if "PRIVATE KEY" in label:
            return (text[start : end + len(end_marker)] + "\n").encode("ascii")
        start = text.find("-----BEGIN ", end)
    return data


def _public(key: PrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _public_of(cert: x509.Certificate) -> bytes:
    return cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
