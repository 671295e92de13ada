"""CRI endpoint strings in the kubelet's own form (``unix:///run/containerd/containerd.sock``)."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

DEFAULT_RUNTIME_ENDPOINT = "unix:///run/containerd/containerd.sock"


def socket_path(endpoint: str) -> str:
    """Return the unix socket path an endpoint names.

    Like the upstream kubelet on Linux, only ``unix://`` endpoints are served; a bare
    absolute path is accepted with a warning (upstream's deprecated fallback).
    """
    if not endpoint:
        raise ValueError("empty CRI endpoint")
    if endpoint.startswith("/"):
        log.warning(
            "CRI endpoint %r has no URL scheme; assuming unix:// (deprecated form)", endpoint
        )
        return endpoint
    parts = urlsplit(endpoint)
    if parts.scheme != "unix":
        raise ValueError(
            f"CRI endpoint {endpoint!r}: protocol {parts.scheme or '(none)'!r} not supported,"
            " use unix:///path/to/socket"
        )
    path = parts.netloc + parts.path
    if not path.startswith("/"):
        raise ValueError(f"CRI endpoint {endpoint!r}: socket path must be absolute")
    return path
