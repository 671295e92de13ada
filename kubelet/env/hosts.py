"""The kubelet-managed ``/etc/hosts`` that every container of a pod gets.

The kubelet writes the file itself (``<podDir>/etc-hosts``) and bind-mounts it, so that
it looks the same whatever the runtime would have written: localhost lines, the pod's
own IPs under its hostname (and FQDN with a subdomain), then ``spec.hostAliases``. A
hostNetwork pod gets the node's hosts file instead, plus its aliases. Content and the
mount rules follow upstream's ``kubelet_pods.go`` byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import tempfile
from collections.abc import Sequence

from kubelet.api.pod import Container, HostAlias, Pod
from kubelet.cri import api

__all__ = [
    "ETC_HOSTS_PATH",
    "HOSTS_FILE_MODE",
    "HOSTS_FILE_NAME",
    "MANAGED_HOSTS_HEADER",
    "MANAGED_HOSTS_HEADER_HOST_NETWORK",
    "hostname_and_domain",
    "hosts_file_content",
    "hosts_file_path",
    "hosts_mount",
    "should_mount_hosts_file",
    "write_hosts_file",
]

ETC_HOSTS_PATH = "/etc/hosts"
HOSTS_FILE_NAME = "etc-hosts"
HOSTS_FILE_MODE = 0o644
MANAGED_HOSTS_HEADER = "# Kubernetes-managed hosts file.\n"
MANAGED_HOSTS_HEADER_HOST_NETWORK = "# Kubernetes-managed hosts file (host network).\n"

_LOCALHOST_LINES = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def hostname_and_domain(pod: Pod, cluster_domain: str) -> tuple[str, str]:
    """``(hostname, domain)``; domain is ``<subdomain>.<ns>.svc.<clusterDomain>`` or "".

    The hostname is ``spec.hostname`` or the pod name cut to 63 characters; the FQDN
    is ``f"{hostname}.{domain}"`` when the domain is set. ValueError for a hostname or
    subdomain that is not a DNS label (upstream fails the container start).
    """
    hostname = pod_hostname(pod)
    subdomain = pod.spec.subdomain
    if not subdomain:
        return hostname, ""
    if len(subdomain) > 63 or not _DNS1123_LABEL.fullmatch(subdomain):
        raise ValueError(f"pod Subdomain {subdomain!r} is not a valid DNS label")
    return hostname, f"{subdomain}.{pod.metadata.namespace}.svc.{cluster_domain}"


def hosts_file_content(
    pod: Pod,
    *,
    pod_ips: Sequence[str],
    host_network: bool,
    node_hosts: str,
    cluster_domain: str,
) -> str:
    """The pod's hosts file. ``node_hosts`` (the node's /etc/hosts) is used with hostNetwork.

    Without hostNetwork each pod IP (dual-stack: all of them) maps to
    ``<fqdn>\\t<hostname>`` when the pod has a subdomain, else to ``<hostname>``.
    """
    aliases = _host_aliases_section(pod.spec.host_aliases)
    if host_network:
        return MANAGED_HOSTS_HEADER_HOST_NETWORK + node_hosts + aliases
    hostname, domain = hostname_and_domain(pod, cluster_domain)
    names = f"{hostname}.{domain}\t{hostname}" if domain else hostname
    own = "".join(f"{ip}\t{names}\n" for ip in pod_ips)
    return MANAGED_HOSTS_HEADER + _LOCALHOST_LINES + own + aliases


def _host_aliases_section(aliases: Sequence[HostAlias]) -> str:
    """A blank line, a comment, then one tab-separated line per alias IP."""
    if not aliases:
        return ""
    lines = "".join(a.ip + "\t" + "\t".join(a.hostnames) + "\n" for a in aliases)
    return "\n# Entries added by HostAliases.\n" + lines


def should_mount_hosts_file(pod: Pod, container: Container, pod_ips: Sequence[str]) -> bool:
    """Whether ``container`` gets the managed hosts file.

    Not before the sandbox has IPs (there is nothing to write yet), and not over a
    volume the container mounts at ``/etc/hosts`` itself. hostNetwork pods do get it
    (their "pod IPs" are the node's). ``pod`` is kept for the Windows hostProcess rule.
    """
    del pod  # only the Windows rule (hostProcess containers) looks at the pod
    if not pod_ips:
        return False
    return all(m.mount_path != ETC_HOSTS_PATH for m in container.volume_mounts)


def hosts_file_path(pod_dir: str) -> str:
    """Where the pod's hosts file lives on the node: ``<podDir>/etc-hosts``."""
    return posixpath.join(pod_dir, HOSTS_FILE_NAME)


def write_hosts_file(path: str, content: str) -> None:
    """Write the file atomically (temp file, then rename) with mode 0644.

    Unchanged content is left alone: a rename gives the path a new inode, and
    containers that already bind-mount the old one would keep seeing the old file.
    Not fsynced (upstream does not either): the file is written again before every
    container start, and an fsync per start cost the event loop milliseconds.
    """
    data = content.encode()
    with contextlib.suppress(OSError), open(path, "rb") as f:
        if f.read(len(data) + 1) == data:
            os.chmod(path, HOSTS_FILE_MODE)
            return
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), HOSTS_FILE_MODE)  # mkstemp's 0600, whatever the umask
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def hosts_mount(path: str) -> api.Mount:
    """The CRI mount of the pod's hosts file on ``/etc/hosts``: writable, SELinux-relabelled."""
    return api.Mount(
        container_path=ETC_HOSTS_PATH,
        host_path=path,
        readonly=False,
        selinux_relabel=True,
    )


def pod_hostname(pod: Pod) -> str:
    """``spec.hostname`` or the pod name, cut to 63 characters (trailing "-." trimmed)."""
    hostname = pod.metadata.name
    if pod.spec.hostname:
        if len(pod.spec.hostname) > 63 or not _DNS1123_LABEL.fullmatch(pod.spec.hostname):
            raise ValueError(f"pod Hostname {pod.spec.hostname!r} is not a valid DNS label")
        hostname = pod.spec.hostname
    if len(hostname) > 63:
        hostname = hostname[:63].rstrip("-.")
        if not hostname:
            raise ValueError(f"hostname for pod {pod.metadata.name!r} was invalid")
    return hostname
