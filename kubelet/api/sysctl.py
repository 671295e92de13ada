"""Sysctl names as the API and the kernel see them: spelling, patterns, namespaces.

Shared by the configuration check of ``allowedUnsafeSysctls`` and the kubelet's sysctl
admission, so both agree on what a name means. Facts restated from upstream's
component-helpers (``node/util/sysctl``) and the policy API's pattern validation:

* ``/`` may separate the parts of a name (``net/ipv4/ip_forward``): when the first
  separator is a slash, dots and slashes swap, as sysctl.d(5) reads them
  (``net/ipv4/conf/eth0.100/rp_filter`` is ``net.ipv4.conf.eth0/100.rp_filter``);
* only sysctls the kernel keeps per IPC or network namespace can be set for a pod;
  anything else (``kernel.panic``, ``vm.*``) would change the whole node.
"""

from __future__ import annotations

import re

__all__ = [
    "IPC",
    "MAX_LENGTH",
    "NET",
    "is_valid_pattern",
    "namespace_of",
    "normalize",
    "pattern_error",
    "quote",
    "split_pattern",
]

IPC = "IPC"
NET = "Net"
MAX_LENGTH = 253

_BY_NAME = {
    "kernel.sem": IPC,
    "kernel.shmall": IPC,
    "kernel.shmmax": IPC,
    "kernel.shmmni": IPC,
    "kernel.shm_rmid_forced": IPC,
    "kernel.shm": IPC,
    "kernel.msgmax": IPC,
    "kernel.msgmnb": IPC,
    "kernel.msgmni": IPC,
    "kernel.msg": IPC,
}
_BY_PREFIX = {"net": NET, "fs.mqueue": IPC}

_SEGMENT = r"[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
PATTERN_FORMAT = rf"({_SEGMENT}[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]"
"""The policy API's sysctl pattern (a name, or a prefix ending in ``*``); upstream quotes it."""
_PATTERN = re.compile(rf"^{PATTERN_FORMAT}$")


def normalize(name: str) -> str:
    """The dotted spelling of ``name``: a name whose first separator is ``/`` has its
    dots and slashes swapped; anything else is returned as written."""
    for char in name:
        if char == ".":
            return name
        if char == "/":
            return name.translate(str.maketrans("./", "/."))
    return name


def namespace_of(name: str) -> str:
    """``IPC`` or ``Net`` for a namespaced sysctl (dotted spelling), "" when not known to be."""
    found = _BY_NAME.get(name)
    if found is not None:
        return found
    for prefix, namespace in _BY_PREFIX.items():
        if name.startswith(prefix + "."):
            return namespace
    return ""


def split_pattern(pattern: str) -> tuple[str, str, bool]:
    """(namespace, name or prefix, whether it is a prefix) of an allowlist entry.

    The prefix is everything before the first ``*``, in dotted spelling.
    """
    text = normalize(pattern)
    star = text.find("*")
    prefixed = star != -1
    if prefixed:
        text = text[:star]
    return namespace_of(text), text, prefixed


def is_valid_pattern(pattern: str) -> bool:
    """Whether ``pattern`` is a sysctl name or a ``prefix*`` the policy API accepts."""
    return len(pattern) <= MAX_LENGTH and _PATTERN.match(pattern) is not None


def pattern_error(pattern: str) -> str | None:
    """Why ``pattern`` cannot be in an allowlist (upstream's words), None when it can."""
    if not is_valid_pattern(pattern):
        return (
            f"sysctl {quote(pattern)} must have at most {MAX_LENGTH} characters "
            f"and match regex {PATTERN_FORMAT}"
        )
    namespace, text, _ = split_pattern(pattern)
    if not namespace:
        return f"the sysctls {quote(text)} are not known to be namespaced"
    return None


def quote(text: str) -> str:
    """Go's ``%q`` for the plain ASCII names sysctls are (backslash and quote escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
