"""The :10250 listener's certificate, kept at the serving certificate manager's pair.

Upstream's TLS listener asks the manager for a certificate on every handshake
(``GetCertificate``) and refuses the handshake while there is none ("no serving
certificate available for the kubelet"). Here the listener's one ``ssl.SSLContext`` is
given each new pair (``load_cert_chain``): OpenSSL copies the context's certificate into
every new connection, so new handshakes present the new certificate and open ones keep
theirs. Until the first pair exists, an SNI callback refuses handshakes with an alert.
"""

from __future__ import annotations

import logging
import ssl

import trio

from .sslload import load_cert_chain_pem
from .store import CertKeyPair

__all__ = ["ServingCertificate"]

log = logging.getLogger(__name__)


class ServingCertificate:
    """Feeds a serving SSLContext from a certificate manager."""

    def __init__(self, context: ssl.SSLContext, current: CertKeyPair | None) -> None:
        self.context = context
        self.loaded: CertKeyPair | None = None
        if current is not None:
            self.load(current)
        else:
            context.sni_callback = self._refuse

    def _refuse(self, sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> int | None:
        if self.loaded is None:
            log.info("TLS handshake refused: no serving certificate available for the kubelet")
            return ssl.ALERT_DESCRIPTION_HANDSHAKE_FAILURE
        return None

    def load(self, pair: CertKeyPair) -> None:
        load_cert_chain_pem(self.context, pair.chain_pem, pair.key_pem)
        self.loaded = pair
        log.info("serving certificate loaded (serial %x)", pair.serial)

    async def follow(self, updates: trio.MemoryReceiveChannel[CertKeyPair]) -> None:
        """Load every new pair from ``updates`` (``CertificateManager.subscribe()``)."""
        async for pair in updates:
            self.load(pair)
