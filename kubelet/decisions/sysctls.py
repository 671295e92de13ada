"""Which of a pod's ``securityContext.sysctls`` the node lets it set (upstream's allowlist).

A pod may set a sysctl when it is in the safe set (namespaced and isolated: it changes
nothing for other pods) or matches ``--allowed-unsafe-sysctls`` (exact names and
``prefix*`` patterns, each known to be namespaced). A pod sharing the host's network
namespace may set no ``net.*`` sysctl, one sharing the host's IPC namespace no IPC
sysctl: either would change the node. Anything else rejects the pod at admission
(reason ``SysctlForbidden``), before it is started.

The safe set is upstream's ``SafeSysctlAllowlist``: the names every release allowed,
plus newer ones when the running kernel namespaces them.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence

import attrs

from kubelet.api import Pod
from kubelet.api import sysctl as names

__all__ = [
    "FORBIDDEN_REASON",
    "LEGACY_SAFE_SYSCTLS",
    "SysctlAllowlist",
    "kernel_version",
    "pod_sysctls",
    "safe_sysctls",
]

log = logging.getLogger(__name__)

FORBIDDEN_REASON = "SysctlForbidden"

LEGACY_SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
)
"""Always safe, whatever the kernel (upstream keeps them to avoid regressions)."""

NEWER_SAFE_SYSCTLS: tuple[tuple[str, tuple[int, int]], ...] = (
    ("net.ipv4.ip_local_reserved_ports", (3, 16)),
    ("net.ipv4.tcp_rmem", (4, 15)),
    ("net.ipv4.tcp_wmem", (4, 15)),
)
"""Safe from the kernel version that made them per network namespace."""

_VERSION = re.compile(r"(\d+)\.(\d+)")


def kernel_version(release: str | None = None) -> tuple[int, int] | None:
    """(major, minor) of the running kernel (``uname -r``), None when unreadable."""
    text = release if release is not None else os.uname().release
    match = _VERSION.match(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def safe_sysctls(kernel: tuple[int, int] | None) -> tuple[str, ...]:
    """The safe set for ``kernel``; an unknown kernel gets the legacy names only."""
    out = list(LEGACY_SAFE_SYSCTLS)
    for name, since in NEWER_SAFE_SYSCTLS:
        if kernel is not None and kernel >= since:
            out.append(name)
        else:
            log.info("kernel version %s is too old for safe sysctl %s", kernel, name)
    return tuple(out)


@attrs.frozen
class SysctlAllowlist:
    """Names and ``prefix*`` patterns a pod may set, each with its kernel namespace."""

    exact: Mapping[str, str] = attrs.field(factory=dict)
    prefixes: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def build(cls, patterns: Iterable[str]) -> SysctlAllowlist:
        """The allowlist of ``patterns``; ``ValueError`` (upstream's message) for a bad one."""
        exact: dict[str, str] = {}
        prefixes: dict[str, str] = {}
        for pattern in patterns:
            problem = names.pattern_error(pattern)
            if problem is not None:
                raise ValueError(problem)
            namespace, text, prefixed = names.split_pattern(pattern)
            (prefixes if prefixed else exact)[text] = namespace
        return cls(exact, prefixes)

    @classmethod
    def for_node(
        cls, allowed_unsafe: Sequence[str] = (), kernel: tuple[int, int] | None = None
    ) -> SysctlAllowlist:
        """Upstream's list: the safe set for ``kernel`` plus the allowed unsafe patterns."""
        return cls.build((*safe_sysctls(kernel), *allowed_unsafe))

    def check(self, name: str, *, host_network: bool, host_ipc: bool) -> str | None:
        """Why ``name`` may not be set (upstream's words), None when it may."""
        name = names.normalize(name)
        namespace = self.exact.get(name)
        if namespace is None:
            namespace = next(
                (ns for prefix, ns in self.prefixes.items() if name.startswith(prefix)), None
            )
        if namespace is None:
            return f"{names.quote(name)} not allowlisted"
        if (namespace == names.IPC and host_ipc) or (namespace == names.NET and host_network):
            return f"{names.quote(name)} not allowed with host {namespace} enabled"
        return None

    def forbidden(self, pod: Pod) -> str | None:
        """The admission message for the first sysctl ``pod`` may not set, else None."""
        spec = pod.spec
        for name, _ in pod_sysctls(pod):
            problem = self.check(
                name, host_network=bool(spec.host_network), host_ipc=bool(spec.host_ipc)
            )
            if problem is not None:
                return f"forbidden sysctl: {problem}"
        return None


def pod_sysctls(pod: Pod) -> list[tuple[str, str]]:
    """The pod's sysctls as (name as written, value), in spec order."""
    sc = pod.spec.security_context
    if sc is None:
        return []
    return [(str(s.get("name", "")), str(s.get("value", ""))) for s in sc.sysctls]
