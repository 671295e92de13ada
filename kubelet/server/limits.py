"""What one server grants a client: connections, time to send a request, header bytes.

Upstream's kubelet (Go's net/http) has ``IdleTimeout`` 90 s and ``MaxHeaderBytes`` 1 MiB,
and neither a connection bound nor a header deadline short of its 4 h ``ReadTimeout``:
20,000 idle connections then exhaust the descriptors. Ours adds a per-listener
connection bound (a share of the open-files limit; connections beyond it wait in the
kernel's listen backlog, not in the kubelet) and kube-apiserver's ``ReadHeaderTimeout``
of 32 s from accept (or from the first byte of a keep-alive request) to the end of the
request headers, TLS handshake included. With a bound, a client that takes nothing of a
response must not keep its slot either: Go's 4 h ``WriteTimeout`` becomes
``send_timeout``, a deadline on each piece of a response.
"""

from __future__ import annotations

import attrs

MAX_CONNECTIONS_CAP = 2048
"""No listener holds more connections than this, however high the descriptor limit."""


@attrs.frozen
class Limits:
    max_connections: int = 1024
    """Open connections per listener; more wait in the listen backlog until one closes."""
    header_timeout: float = 32.0
    """Accept (or a keep-alive request's first byte) → request headers complete."""
    idle_timeout: float = 90.0
    """A keep-alive connection with no request in flight is closed after this long."""
    max_header_bytes: int = 1 << 20
    """Request line and headers (HTTP/1.1), or the header list (HTTP/2)."""
    drain_bytes: int = 256 << 10
    """Request body a handler left unread that is still read (and dropped) to keep the
    connection (HTTP/1.1) or answer the stream cleanly (HTTP/2); beyond it the connection
    is closed or the stream reset (NO_ERROR), as Go's server does."""
    max_streams: int = 250
    """Concurrent HTTP/2 streams per connection (Go's default); a stream counts until its
    handler returned, even after the client reset it."""
    send_timeout: float = 90.0
    """Each piece of a response a handler sends must be taken by the client within this
    long (its HTTP/2 flow-control window, or the socket); else the HTTP/2 stream is reset
    (INTERNAL_ERROR, as Go's ``WriteTimeout``) or the connection closed."""

    @classmethod
    def for_descriptors(cls, limit: int) -> Limits:
        """Per listener: an eighth of the open-files limit, between 16 and 2048."""
        return cls(max_connections=max(16, min(MAX_CONNECTIONS_CAP, limit // 8)))
