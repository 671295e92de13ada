"""The kubelet-managed /etc/hosts: exact content as upstream writes it, mount rules, writing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kubelet.api import SUBDOMAIN_MSG, Container, HostAlias, Pod, VolumeMount
from kubelet.api.dnsname import LABEL_MSG
from kubelet.cri import api
from kubelet.env import (
    PodHostnameError,
    hosts_file_content,
    hosts_file_path,
    hosts_mount,
    kernel_hostname,
    should_mount_hosts_file,
    write_hosts_file,
)
from kubelet.env.hosts import hostname_and_domain
from kubelet.testing import builders

LOCALHOST = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
ALIASES = (
    HostAlias(ip="123.45.67.89", hostnames=("foo", "bar", "baz")),
    HostAlias(ip="456.78.90.123", hostnames=("park", "doo", "boo")),
)
NODE_HOSTS = "127.0.0.1\tlocalhost\n10.0.0.5\tnode-1\n"


def make_pod(
    name: str = "web-0",
    *,
    hostname: str = "",
    subdomain: str = "",
    host_aliases: tuple[HostAlias, ...] = (),
    override: str | None = None,
    fqdn: bool | None = None,
) -> Pod:
    return builders.make_pod(
        name=name,
        hostname=hostname,
        subdomain=subdomain,
        host_aliases=host_aliases,
        hostname_override=override,
        set_hostname_as_fqdn=fqdn,
    )


@pytest.mark.parametrize(
    ("pod", "pod_ips", "expected"),
    [
        pytest.param(
            make_pod(),
            ["10.244.1.4"],
            "# Kubernetes-managed hosts file.\n" + LOCALHOST + "10.244.1.4\tweb-0\n",
            id="plain",
        ),
        pytest.param(
            make_pod(hostname="pod-hostname", subdomain="pod-subdomain"),
            ["172.17.0.3"],
            "# Kubernetes-managed hosts file.\n"
            + LOCALHOST
            + "172.17.0.3\tpod-hostname.pod-subdomain.default.svc.cluster.local\tpod-hostname\n",
            id="hostname-subdomain",
        ),
        pytest.param(
            make_pod(subdomain="sub"),
            ["10.244.1.4"],
            "# Kubernetes-managed hosts file.\n"
            + LOCALHOST
            + "10.244.1.4\tweb-0.sub.default.svc.cluster.local\tweb-0\n",
            id="subdomain-only",
        ),
        pytest.param(
            make_pod(),
            ["10.244.1.4", "2001:db8::4"],
            "# Kubernetes-managed hosts file.\n"
            + LOCALHOST
            + "10.244.1.4\tweb-0\n2001:db8::4\tweb-0\n",
            id="dual-stack",
        ),
        pytest.param(
            make_pod(hostname="h", subdomain="s"),
            ["10.244.1.4", "2001:db8::4"],
            "# Kubernetes-managed hosts file.\n"
            + LOCALHOST
            + "10.244.1.4\th.s.default.svc.cluster.local\th\n"
            + "2001:db8::4\th.s.default.svc.cluster.local\th\n",
            id="dual-stack-fqdn",
        ),
        pytest.param(
            make_pod(host_aliases=ALIASES),
            ["203.0.113.1"],
            "# Kubernetes-managed hosts file.\n"
            + LOCALHOST
            + "203.0.113.1\tweb-0\n"
            + "\n# Entries added by HostAliases.\n"
            + "123.45.67.89\tfoo\tbar\tbaz\n"
            + "456.78.90.123\tpark\tdoo\tboo\n",
            id="host-aliases",
        ),
        pytest.param(
            make_pod(),
            [],
            "# Kubernetes-managed hosts file.\n" + LOCALHOST,
            id="no-ips",
        ),
    ],
)
def test_managed_content(pod: Pod, pod_ips: list[str], expected: str) -> None:
    content = hosts_file_content(
        pod, pod_ips=pod_ips, host_network=False, node_hosts="", cluster_domain="cluster.local"
    )
    assert content == expected


@pytest.mark.parametrize(
    ("enabled", "own"),
    [
        (True, "10.244.1.4\tbox.example.com\n"),
        (False, "10.244.1.4\th.s.default.svc.cluster.local\th\n"),
    ],
)
def test_managed_content_with_hostname_override(enabled: bool, own: str) -> None:
    """The override is the only name of the pod's IPs (no FQDN from hostname/subdomain);
    with the HostnameOverride gate off it is ignored, as upstream's kubelet ignores it."""
    pod = make_pod(hostname="h", subdomain="s", override="box.example.com")
    content = hosts_file_content(
        pod,
        pod_ips=["10.244.1.4"],
        host_network=False,
        node_hosts="",
        cluster_domain="cluster.local",
        override_enabled=enabled,
    )
    assert content == "# Kubernetes-managed hosts file.\n" + LOCALHOST + own


@pytest.mark.parametrize(
    ("aliases", "expected"),
    [
        ((), "# Kubernetes-managed hosts file (host network).\n" + NODE_HOSTS),
        (
            ALIASES,
            "# Kubernetes-managed hosts file (host network).\n"
            + NODE_HOSTS
            + "\n# Entries added by HostAliases.\n"
            + "123.45.67.89\tfoo\tbar\tbaz\n"
            + "456.78.90.123\tpark\tdoo\tboo\n",
        ),
    ],
)
def test_host_network_content(aliases: tuple[HostAlias, ...], expected: str) -> None:
    content = hosts_file_content(
        make_pod(hostname="ignored", subdomain="ignored", host_aliases=aliases),
        pod_ips=["10.0.0.5"],
        host_network=True,
        node_hosts=NODE_HOSTS,
        cluster_domain="cluster.local",
    )
    assert content == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (make_pod(), ("web-0", "")),
        (make_pod(hostname="h"), ("h", "")),
        (make_pod(hostname="h", subdomain="s"), ("h", "s.default.svc.cluster.local")),
        (make_pod("a" * 62 + "-b"), ("a" * 62, "")),  # cut to 63, trailing "-" trimmed
        (make_pod("p" * 70, subdomain="s"), ("p" * 63, "s.default.svc.cluster.local")),
    ],
)
def test_hostname_and_domain(pod: Pod, expected: tuple[str, str]) -> None:
    assert hostname_and_domain(pod, "cluster.local") == expected


@pytest.mark.parametrize(
    "pod",
    [make_pod(hostname="Bad_Name"), make_pod(subdomain="no.dots"), make_pod(subdomain="x" * 64)],
)
def test_hostname_and_domain_rejects_invalid_labels(pod: Pod) -> None:
    with pytest.raises(PodHostnameError, match="not a valid DNS label"):
        hostname_and_domain(pod, "cluster.local")


def test_invalid_label_message_is_upstreams() -> None:
    with pytest.raises(PodHostnameError) as info:
        hostname_and_domain(make_pod(hostname="Bad_Name"), "cluster.local")
    assert str(info.value) == f'pod Hostname "Bad_Name" is not a valid DNS label: {LABEL_MSG}'


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (make_pod(override="box.example.com"), ("box.example.com", "")),
        # hostname and subdomain give way to the override: no domain at all
        (make_pod(hostname="h", subdomain="s", override="box"), ("box", "")),
        # validation allows 64 characters; the hostname is cut to 63 as upstream cuts it
        (make_pod(override="a" * 62 + ".b"), ("a" * 62, "")),
    ],
)
def test_hostname_override(pod: Pod, expected: tuple[str, str]) -> None:
    assert hostname_and_domain(pod, "cluster.local") == expected


def test_hostname_override_is_ignored_with_the_gate_off() -> None:
    pod = make_pod(hostname="h", subdomain="s", override="box")
    assert hostname_and_domain(pod, "cluster.local", override_enabled=False) == (
        "h",
        "s.default.svc.cluster.local",
    )


@pytest.mark.parametrize("override", ["Not-RFC1123", "", "a..b"])
def test_hostname_override_must_be_a_dns_subdomain(override: str) -> None:
    with pytest.raises(PodHostnameError) as info:
        hostname_and_domain(make_pod(override=override), "cluster.local")
    assert str(info.value) == (
        f'pod HostnameOverride "{override}" is not a valid DNS subdomain: {SUBDOMAIN_MSG}'
    )


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (make_pod(), "web-0"),
        (make_pod(fqdn=True), "web-0"),  # no subdomain: no domain to add
        (make_pod(hostname="h", subdomain="s"), "h"),
        (make_pod(hostname="h", subdomain="s", fqdn=False), "h"),
        (make_pod(hostname="h", subdomain="s", fqdn=True), "h.s.default.svc.cluster.local"),
        # 64 characters fit the kernel's nodename
        (make_pod("p" * 36, subdomain="s", fqdn=True), "p" * 36 + ".s.default.svc.cluster.local"),
        (make_pod(subdomain="s", fqdn=True, override="box.example.com"), "box.example.com"),
    ],
)
def test_kernel_hostname(pod: Pod, expected: str) -> None:
    assert kernel_hostname(pod, "cluster.local") == expected


def test_kernel_hostname_fqdn_too_long() -> None:
    """Upstream's GetNodenameForKernel message, which FailedCreatePodSandBox carries."""
    fqdn = "p" * 37 + ".s.default.svc.cluster.local"
    with pytest.raises(PodHostnameError) as info:
        kernel_hostname(make_pod("p" * 37, subdomain="s", fqdn=True), "cluster.local")
    assert str(info.value) == (
        "failed to construct FQDN from pod hostname and cluster domain, FQDN "
        f"{fqdn} is too long (64 characters is the max, 65 characters requested)"
    )


@pytest.mark.parametrize(
    ("mounts", "pod_ips", "expected"),
    [
        ((), ["10.244.1.4"], True),
        ((), [], False),  # sandbox has no IP yet
        ((VolumeMount(name="data", mount_path="/data"),), ["10.244.1.4"], True),
        ((VolumeMount(name="hosts", mount_path="/etc/hosts"),), ["10.244.1.4"], False),
    ],
)
def test_should_mount_hosts_file(
    mounts: tuple[VolumeMount, ...], pod_ips: list[str], expected: bool
) -> None:
    container = Container(name="c", volume_mounts=mounts)
    assert should_mount_hosts_file(make_pod(), container, pod_ips) is expected


def test_hosts_mount() -> None:
    path = hosts_file_path("/var/lib/kubelet/pods/uid-1")
    assert path == "/var/lib/kubelet/pods/uid-1/etc-hosts"
    assert hosts_mount(path) == api.Mount(
        container_path="/etc/hosts", host_path=path, readonly=False, selinux_relabel=True
    )


def test_write_hosts_file(tmp_path: Path) -> None:
    path = tmp_path / "etc-hosts"
    old_umask = os.umask(0o077)
    try:
        write_hosts_file(str(path), "first\n")
    finally:
        os.umask(old_umask)
    assert path.read_text() == "first\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644

    inode = path.stat().st_ino
    write_hosts_file(str(path), "first\n")  # unchanged: same inode for existing mounts
    assert path.stat().st_ino == inode

    write_hosts_file(str(path), "second\n")
    assert path.read_text() == "second\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["etc-hosts"]  # no temp left


def test_write_hosts_file_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_hosts_file(str(tmp_path / "missing" / "etc-hosts"), "x\n")
