"""The sysctl allowlist: names, patterns, namespaces, the safe set and the admission message."""

from __future__ import annotations

import pytest

from kubelet.api import Container, Pod, sysctl
from kubelet.api.pod import PodSecurityContext
from kubelet.config import ConfigError, resolve
from kubelet.decisions import SysctlAllowlist, kernel_version
from kubelet.decisions.sysctls import LEGACY_SAFE_SYSCTLS, safe_sysctls
from kubelet.testing.builders import make_pod

KERNEL = (6, 1)


@pytest.mark.parametrize(
    ("name", "dotted"),
    [
        ("net.ipv4.ip_forward", "net.ipv4.ip_forward"),
        ("net/ipv4/ip_forward", "net.ipv4.ip_forward"),
        ("net/ipv4/conf/eth0.100/rp_filter", "net.ipv4.conf.eth0/100.rp_filter"),
        ("net.ipv4.conf.eth0/100.rp_filter", "net.ipv4.conf.eth0/100.rp_filter"),
        ("kernel", "kernel"),
        ("", ""),
    ],
)
def test_normalize(name: str, dotted: str) -> None:
    assert sysctl.normalize(name) == dotted


@pytest.mark.parametrize(
    ("name", "namespace"),
    [
        ("kernel.sem", "IPC"),
        ("kernel.shm_rmid_forced", "IPC"),
        ("kernel.shmmax", "IPC"),
        ("kernel.msgmnb", "IPC"),
        ("fs.mqueue.msg_max", "IPC"),
        ("net.core.somaxconn", "Net"),
        ("net.ipv4.tcp_syncookies", "Net"),
        ("kernel.panic", ""),
        ("kernel.shmfoo", ""),  # only the names the kernel namespaces, not a prefix
        ("vm.swappiness", ""),
        ("network.x", ""),
        ("fs.mqueuex", ""),
    ],
)
def test_namespace_of(name: str, namespace: str) -> None:
    assert sysctl.namespace_of(name) == namespace


def test_safe_set_follows_the_kernel() -> None:
    assert safe_sysctls(None) == LEGACY_SAFE_SYSCTLS
    assert "net.ipv4.ip_local_reserved_ports" in safe_sysctls((3, 16))
    assert "net.ipv4.tcp_rmem" not in safe_sysctls((4, 14))
    new = safe_sysctls((4, 15))
    assert {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"} <= set(new)
    assert len(safe_sysctls((6, 18))) == 12
    assert kernel_version("6.18.44-fc-v669") == (6, 18)
    assert kernel_version("4.19.0-25-amd64") == (4, 19)
    assert kernel_version("weird") is None


def pod(*sysctls: str, host_network: bool = False, host_ipc: bool = False) -> Pod:
    return make_pod(
        Container(name="c"),
        name="p",
        uid="u1",
        host_network=host_network,
        host_ipc=host_ipc,
        security_context=PodSecurityContext(
            sysctls=tuple({"name": s, "value": "1"} for s in sysctls)
        ),
    )


SAFE = SysctlAllowlist.for_node((), KERNEL)


@pytest.mark.parametrize(
    ("allowed", "the_pod", "expected"),
    [
        ((), pod(), None),
        ((), pod("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range"), None),
        ((), pod("net/ipv4/tcp_syncookies"), None),  # slashes as upstream converts them
        ((), pod("net.core.somaxconn"), 'forbidden sysctl: "net.core.somaxconn" not allowlisted'),
        ((), pod("kernel.panic"), 'forbidden sysctl: "kernel.panic" not allowlisted'),
        (
            (),
            pod("net.ipv4.tcp_syncookies", host_network=True),
            'forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled',
        ),
        (
            (),
            pod("kernel.shm_rmid_forced", host_ipc=True),
            'forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled',
        ),
        ((), pod("kernel.shm_rmid_forced", host_network=True), None),
        (("net.core.somaxconn",), pod("net.core.somaxconn"), None),
        (("net.core.*",), pod("net.core.somaxconn", "net.core.rmem_max"), None),
        (("net.core.*",), pod("net/core/somaxconn"), None),
        (
            ("net.core.*",),
            pod("net.core.somaxconn", host_network=True),
            'forbidden sysctl: "net.core.somaxconn" not allowed with host Net enabled',
        ),
        (("kernel.msg*",), pod("kernel.msgmax"), None),
        (("kernel.msg*",), pod("kernel.msgmax", host_ipc=True), "with host IPC enabled"),
        (
            ("net.core.somaxconn",),
            pod("net.core.somaxconn", "net.ipv4.ip_forward"),
            'forbidden sysctl: "net.ipv4.ip_forward" not allowlisted',
        ),
    ],
)
def test_admission(allowed: tuple[str, ...], the_pod: Pod, expected: str | None) -> None:
    allowlist = SysctlAllowlist.for_node(allowed, KERNEL)
    got = allowlist.forbidden(the_pod)
    if expected is None:
        assert got is None
    else:
        assert got is not None and (got == expected or expected in got)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("kernel.panic", 'the sysctls "kernel.panic" are not known to be namespaced'),
        ("vm.*", 'the sysctls "vm." are not known to be namespaced'),
        ("*", 'the sysctls "" are not known to be namespaced'),
        ("Net.Core", 'sysctl "Net.Core" must have at most 253 characters and match regex'),
        ("net..core", 'sysctl "net..core" must have at most 253 characters'),
        ("net." + "a" * 260, "must have at most 253 characters"),
    ],
)
def test_bad_patterns(pattern: str, message: str) -> None:
    problem = sysctl.pattern_error(pattern)
    assert problem is not None and message in problem
    with pytest.raises(ValueError, match=r"namespaced|must have"):
        SysctlAllowlist.build([pattern])


@pytest.mark.parametrize("pattern", ["net.core.somaxconn", "net.*", "kernel.shm*", "net/ipv4/*"])
def test_good_patterns(pattern: str) -> None:
    assert sysctl.pattern_error(pattern) is None


def test_flag_and_field_are_checked_at_start() -> None:
    options = resolve(["--allowed-unsafe-sysctls=net.core.*,kernel.msgmax", "--seccomp-default"])
    assert options.config.allowed_unsafe_sysctls == ("net.core.*", "kernel.msgmax")
    assert options.config.seccomp_default is True
    with pytest.raises(ConfigError) as info:
        resolve(["--allowed-unsafe-sysctls=net.core.*,kernel.panic"])
    assert 'allowedUnsafeSysctls[1]: the sysctls "kernel.panic" are not known to be namespaced' in (
        str(info.value)
    )
