"""Versions the kubelet reports about itself."""

from . import __version__

KUBERNETES_VERSION = "v1.36.0"
"""The Kubernetes release whose kubelet behaviour and API this kubelet follows."""


def version_line() -> str:
    """What ``kubelet --version`` prints; upstream's form first, so scripts keep working."""
    return f"Kubernetes {KUBERNETES_VERSION} (trio kubelet {__version__})"
