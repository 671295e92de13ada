"""The kubelet-managed ``/etc/hosts`` that every container of a pod gets.

The kubelet writes the file itself (``<podDir>/etc-hosts``) and bind-mounts it, so that
it looks the same whatever the runtime would have written: localhost lines, the pod's
own IPs under its hostname (and FQDN with a subdomain), then ``spec.hostAliases``. A
hostNetwork pod gets the node's hosts file instead, plus its aliases. Content and the
mount rules follow upstream's ``kubelet_pods.go`` byte for byte.

The pod's names come from here too, for the file and for the sandbox's kernel hostname:
``spec.hostnameOverride`` (HostnameOverride gate) replaces hostname and domain alike;
``spec.setHostnameAsFQDN`` makes the kernel hostname the FQDN (upstream's
``GeneratePodHostNameAndDomain`` and ``GetNodenameForKernel``).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import tempfile
from collections.abc import Sequence

from kubelet.api import Container, HostAlias, Pod, label_errors, subdomain_errors
from kubelet.cri import api
from kubelet.goformat import go_quote

__all__ = [
    "ETC_HOSTS_PATH",
    "FQDN_MAX_LENGTH",
    "HOSTNAME_MAX_LENGTH",
    "HOSTS_FILE_MODE",
    "HOSTS_FILE_NAME",
    "MANAGED_HOSTS_HEADER",
    "MANAGED_HOSTS_HEADER_HOST_NETWORK",
    "PodHostnameError",
    "hostname_and_domain",
    "hosts_file_content",
    "hosts_file_path",
    "hosts_mount",
    "kernel_hostname",
    "pod_hostname",
    "should_mount_hosts_file",
    "write_hosts_file",
]

ETC_HOSTS_PATH = "/etc/hosts"
HOSTS_FILE_NAME = "etc-hosts"
HOSTS_FILE_MODE = 0o644
MANAGED_HOSTS_HEADER = "# Kubernetes-managed hosts file.\n"
MANAGED_HOSTS_HEADER_HOST_NETWORK = "# Kubernetes-managed hosts file (host network).\n"
HOSTNAME_MAX_LENGTH = 63
"""a longer hostname is cut (a label's limit)"""
FQDN_MAX_LENGTH = 64
"""the kernel's nodename field (65 bytes with its NUL): a longer FQDN fails the sandbox"""

_LOCALHOST_LINES = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


class PodHostnameError(ValueError):
    """The pod's hostname cannot be made: upstream fails the sandbox (and the container
    start) with this message."""


def hostname_and_domain(
    pod: Pod, cluster_domain: str, *, override_enabled: bool = True
) -> tuple[str, str]:
    """``(hostname, domain)``; domain is ``<subdomain>.<ns>.svc.<clusterDomain>`` or "".

    ``spec.hostnameOverride`` wins when set and ``override_enabled`` (the gate): it is
    the hostname, cut to 63 characters, and there is no domain. Otherwise the hostname
    is ``spec.hostname`` or the pod name cut to 63 characters; the FQDN is
    ``f"{hostname}.{domain}"`` when the domain is set. PodHostnameError for a value that
    is no DNS subdomain (the override) or label (hostname, subdomain).
    """
    override = pod.spec.hostname_override
    if override_enabled and override is not None:
        errors = subdomain_errors(override)
        if errors:
            raise PodHostnameError(
                f"pod HostnameOverride {go_quote(override)} is not a valid DNS subdomain: "
                + ";".join(errors)
            )
        return _truncated(pod.metadata.name, override), ""
    hostname = pod_hostname(pod)
    subdomain = pod.spec.subdomain
    if not subdomain:
        return hostname, ""
    _check_label("Subdomain", subdomain)
    return hostname, f"{subdomain}.{pod.metadata.namespace}.svc.{cluster_domain}"


def kernel_hostname(pod: Pod, cluster_domain: str, *, override_enabled: bool = True) -> str:
    """The sandbox's hostname: ``hostname_and_domain``'s hostname, or with
    ``spec.setHostnameAsFQDN`` and a domain the FQDN, which must fit the kernel's 64
    characters (PodHostnameError, with upstream's message, when it does not)."""
    hostname, domain = hostname_and_domain(pod, cluster_domain, override_enabled=override_enabled)
    if not (domain and pod.spec.set_hostname_as_fqdn):
        return hostname
    fqdn = f"{hostname}.{domain}"
    size = len(fqdn.encode())
    if size > FQDN_MAX_LENGTH:
        raise PodHostnameError(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN "
            f"{fqdn} is too long ({FQDN_MAX_LENGTH} characters is the max, {size} "
            "characters requested)"
        )
    return fqdn


def hosts_file_content(
    pod: Pod,
    *,
    pod_ips: Sequence[str],
    host_network: bool,
    node_hosts: str,
    cluster_domain: str,
    override_enabled: bool = True,
) -> str:
    """The pod's hosts file. ``node_hosts`` (the node's /etc/hosts) is used with hostNetwork.

    Without hostNetwork each pod IP (dual-stack: all of them) maps to
    ``<fqdn>\\t<hostname>`` when the pod has a subdomain, else to ``<hostname>`` (the
    ``spec.hostnameOverride`` value when it applies: see ``hostname_and_domain``).
    """
    aliases = _host_aliases_section(pod.spec.host_aliases)
    if host_network:
        return MANAGED_HOSTS_HEADER_HOST_NETWORK + node_hosts + aliases
    hostname, domain = hostname_and_domain(pod, cluster_domain, override_enabled=override_enabled)
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
    """``spec.hostname`` or the pod name, cut to 63 characters (trailing "-." trimmed);
    the override aside."""
    hostname = pod.metadata.name
    if pod.spec.hostname:
        _check_label("Hostname", pod.spec.hostname)
        hostname = pod.spec.hostname
    return _truncated(pod.metadata.name, hostname)


def _check_label(field: str, value: str) -> None:
    errors = label_errors(value)
    if errors:
        raise PodHostnameError(
            f"pod {field} {go_quote(value)} is not a valid DNS label: " + ";".join(errors)
        )


def _truncated(pod_name: str, hostname: str) -> str:
    """Cut to 63 characters without a trailing "-" or "." (upstream logs the cut)."""
    if len(hostname) <= HOSTNAME_MAX_LENGTH:
        return hostname
    cut = hostname[:HOSTNAME_MAX_LENGTH].rstrip("-.")
    if not cut:
        raise PodHostnameError(
            f"hostname for pod {go_quote(pod_name)} was invalid: {go_quote(hostname)}"
        )
    return cut
