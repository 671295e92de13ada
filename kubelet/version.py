"""Versions the kubelet reports about itself."""

import platform

from . import __version__

KUBERNETES_VERSION = "v1.36.0"
"""The Kubernetes release whose kubelet behaviour and API this kubelet follows."""


def version_line() -> str:
    """What ``kubelet --version`` prints; upstream's form first, so scripts keep working."""
    return f"Kubernetes {KUBERNETES_VERSION} (trio kubelet {__version__})"


def go_arch(machine: str | None = None) -> str:
    """The machine's architecture as Go (and so Kubernetes) names it: ``amd64``, ``arm64``."""
    name = machine if machine is not None else platform.machine()
    return _GO_ARCH.get(name, name)


_GO_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "armv6l": "arm",
    "i686": "386",
    "i386": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}
