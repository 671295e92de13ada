"""Versions the kubelet reports about itself."""

import platform

from . import __version__

KUBERNETES_VERSION = "v1.36.0"
"""The Kubernetes release whose kubelet behaviour and API this kubelet follows."""


def version_line() -> str:
    """How the kubelet names itself in its start-up log line (ours, with its own version)."""
    return f"Kubernetes {KUBERNETES_VERSION} (trio kubelet {__version__})"


def version_output(mode: str) -> str:
    """What ``kubelet --version`` prints (``mode`` "true") and ``--version=raw`` ("raw").

    Exactly upstream's ``Kubernetes v1.36.0``: kubeadm's preflight matches the whole line
    against ``^\\s*Kubernetes v<semver>\\s*$``, so nothing may follow the version. ``raw``
    is Go's ``%#v`` of the version.Info struct; the fields only a Go build has (commit,
    tree state, build date, Go version, compiler) are empty.
    """
    if mode != "raw":
        return f"Kubernetes {KUBERNETES_VERSION}"
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    fields = (
        ("Major", major), ("Minor", minor), ("EmulationMajor", ""), ("EmulationMinor", ""),
        ("MinCompatibilityMajor", ""), ("MinCompatibilityMinor", ""),
        ("GitVersion", KUBERNETES_VERSION), ("GitCommit", ""), ("GitTreeState", ""),
        ("BuildDate", ""), ("GoVersion", ""), ("Compiler", ""),
        ("Platform", f"linux/{go_arch()}"),
    )  # fmt: skip
    return "version.Info{" + ", ".join(f'{name}:"{value}"' for name, value in fields) + "}"


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
