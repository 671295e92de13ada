"""``SSLContext.load_cert_chain`` and ``load_verify_locations`` from bytes already read.

Python's ``ssl`` loads a certificate and key only from files, which OpenSSL opens and
reads itself, without a bound and on whatever thread calls it: a path replaced by a FIFO
or a link to ``/dev/zero`` between our bounded read and OpenSSL's would block it for
good. Handing OpenSSL anonymous in-memory files (``memfd``) holding the bytes we read
makes it load exactly what was checked. An encrypted key is refused (an empty password)
instead of OpenSSL asking for a passphrase on the terminal.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from collections.abc import Iterator

PAIR_FILE_LIMIT = 4 * 1024 * 1024
"""Bytes a certificate chain or key file may hold (a chain with its intermediates is a
few KiB; a longer file is refused, never read to its end)."""


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    fd = os.memfd_create("kubelet-tls", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _no_password() -> bytes:
    return b""


def load_cert_chain_pem(context: ssl.SSLContext, chain_pem: bytes, key_pem: bytes) -> None:
    """``context.load_cert_chain`` with the certificate chain and key given as PEM bytes;
    raises ``ssl.SSLError`` when they do not load as a matching pair."""
    with _memory_file(chain_pem) as cert_path, _memory_file(key_pem) as key_path:
        context.load_cert_chain(cert_path, key_path, password=_no_password)


def load_verify_pem(context: ssl.SSLContext, pem: bytes) -> None:
    """``context.load_verify_locations`` with the CA bundle given as PEM bytes.

    Through a file, not ``cadata``: OpenSSL parses ``cadata`` holding the interpreter
    lock, so a large bundle stopped the event loop even from a worker thread; a file is
    read and parsed with the lock released.
    """
    with _memory_file(pem) as path:
        context.load_verify_locations(cafile=path)
