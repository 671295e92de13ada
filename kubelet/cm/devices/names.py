"""What a registration may ask for: upstream's version and resource name checks, pure."""

from __future__ import annotations

import os
import re

VERSION = "v1beta1"
SUPPORTED_VERSIONS = (VERSION,)
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _go_quote_list(values: tuple[str, ...]) -> str:
    """Go's ``%q`` of a ``[]string``: ``["v1beta1"]``."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def unsupported_version(version: str) -> str:
    return (
        f'requested API version "{version}" is not supported by kubelet. '
        f"Supported versions are {_go_quote_list(SUPPORTED_VERSIONS)}"
    )


def invalid_resource_name(name: str) -> str:
    return f'the ResourceName "{name}" is invalid'


def _qualified_name(value: str) -> bool:
    """A Kubernetes qualified name: an optional DNS-subdomain prefix, '/', a name."""
    prefix, slash, name = value.rpartition("/")
    if slash:
        if not prefix or len(prefix) > 253:
            return False
        if not all(_LABEL.match(part) for part in prefix.split(".")):
            return False
    return 0 < len(name) <= 63 and _NAME.match(name) is not None


def is_extended_resource_name(name: str) -> bool:
    """Upstream's ``IsExtendedResourceName``: domain-qualified, not in kubernetes.io,
    not ``requests.``-prefixed, and valid as a quota name (``requests.<name>``)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return _qualified_name("requests." + name)


def endpoint_path(directory: str, endpoint: str) -> str | None:
    """The plugin socket a registration names, inside the device-plugins directory
    (None: the name leads out of it)."""
    path = os.path.normpath(os.path.join(directory, endpoint))
    return path if path.startswith(directory.rstrip("/") + "/") else None
