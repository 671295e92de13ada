"""The pod's resolver configuration (CRI ``DNSConfig``) from its dnsPolicy and dnsConfig.

Follows upstream's ``pkg/kubelet/network/dns``: the node's resolv.conf (``--resolv-conf``)
is the base, ``ClusterFirst`` replaces its nameservers with ``clusterDNS`` and puts the
cluster search domains in front, ``spec.dnsConfig`` is merged on top, and the result is
cut to what resolvers accept (3 nameservers, 32 search paths / 2048 characters). The
runtime writes the sandbox's ``/etc/resolv.conf`` from it.

Everything here is pure except ``load_host_resolv``, which reads a small file (callers in
Trio run it in a thread). Warnings come back as values so that the caller decides where
to record them; their reasons and messages are upstream's, so users see the same events.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterable, Sequence

import attrs

from kubelet.api import Pod, PodDNSConfig, PodDNSConfigOption
from kubelet.cri import api

__all__ = [
    "DEFAULT_DNS_OPTIONS",
    "DNS_CLUSTER_FIRST",
    "DNS_CLUSTER_FIRST_WITH_HOST_NET",
    "DNS_DEFAULT",
    "DNS_NONE",
    "MAX_DNS_NAMESERVERS",
    "MAX_DNS_SEARCH_LIST_CHARS",
    "MAX_DNS_SEARCH_PATHS",
    "MAX_RESOLV_CONF_BYTES",
    "MAX_SEARCH_PATH_LENGTH",
    "REASON_DNS_CONFIG_FORMING",
    "REASON_MISSING_CLUSTER_DNS",
    "DNSWarning",
    "ResolvConf",
    "load_host_resolv",
    "parse_resolv_conf",
    "pod_dns_config",
]

log = logging.getLogger(__name__)

DNS_CLUSTER_FIRST = "ClusterFirst"
DNS_CLUSTER_FIRST_WITH_HOST_NET = "ClusterFirstWithHostNet"
DNS_DEFAULT = "Default"
DNS_NONE = "None"

DEFAULT_DNS_OPTIONS = ("ndots:5",)
MAX_DNS_NAMESERVERS = 3  # glibc reads no more than three
MAX_DNS_SEARCH_PATHS = 32
MAX_DNS_SEARCH_LIST_CHARS = 2048
MAX_SEARCH_PATH_LENGTH = 253  # longer ones make some resolvers (glibc 2.28) abort()
MAX_RESOLV_CONF_BYTES = 10 << 20

REASON_DNS_CONFIG_FORMING = "DNSConfigForming"
REASON_MISSING_CLUSTER_DNS = "MissingClusterDNS"


@attrs.frozen
class ResolvConf:
    """What the kubelet takes from a resolv.conf: nameservers, search domains, options."""

    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@attrs.frozen
class DNSWarning:
    """A Warning event to record: about the pod, or about the node when ``on_node``."""

    reason: str
    message: str
    on_node: bool = False


def parse_resolv_conf(text: str) -> ResolvConf:
    """Parse resolv.conf as upstream does; ValueError for a ``nameserver`` without address.

    Nameserver lines accumulate; the last ``search`` and ``options`` lines win. A
    trailing dot is dropped from search domains so that ``a.`` and ``a`` count once.
    """
    nameservers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    errors: list[str] = []
    for line in text.split("\n"):
        trimmed = line.strip()
        if trimmed.startswith("#"):
            continue
        fields = trimmed.split()
        if not fields:
            continue
        if fields[0] == "nameserver":
            if len(fields) >= 2:
                nameservers.append(fields[1])
            else:
                errors.append("nameserver list is empty ")
        elif fields[0] == "search":
            searches = [s.removesuffix(".") for s in fields[1:]]
        elif fields[0] == "options":
            options = fields[1:]
    if errors:
        # Upstream fails the pod's DNS (and so its sandbox) on a broken resolv.conf.
        raise ValueError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return ResolvConf(tuple(nameservers), tuple(searches), tuple(options))


def load_host_resolv(path: str) -> ResolvConf | None:
    """Read ``--resolv-conf``; None when the flag is empty (no host DNS at all).

    None is not the same as an empty file: with it, ``Default`` pods get a localhost
    nameserver and the search list ``.`` (see ``pod_dns_config``). OSError and
    ValueError propagate: upstream fails the sandbox when the file cannot be read.
    """
    if not path:
        return None
    with open(path, "rb") as f:
        data = f.read(MAX_RESOLV_CONF_BYTES + 1)
    if len(data) > MAX_RESOLV_CONF_BYTES:
        raise ValueError(f"{path}: the read limit is reached")
    return parse_resolv_conf(data.decode("utf-8", errors="replace"))


def pod_dns_config(
    pod: Pod,
    *,
    cluster_dns: Sequence[str],
    cluster_domain: str,
    host_resolv: ResolvConf | None,
    node_ips: Sequence[str] = (),
) -> tuple[api.DNSConfig, list[DNSWarning]]:
    """The sandbox's DNS config, and the Warning events upstream records while forming it.

    ``host_resolv`` is ``load_host_resolv(config.resolv_conf)``; ``node_ips`` only
    matter when it is None (localhost nameserver per node IP family).
    """
    warnings: list[DNSWarning] = []
    base = host_resolv if host_resolv is not None else ResolvConf()
    servers = list(base.nameservers)
    searches = list(base.searches)
    options = list(base.options)

    kind = _dns_type(pod)
    if kind == DNS_NONE:
        servers, searches, options = [], [], []
    elif kind == DNS_CLUSTER_FIRST and cluster_dns:
        # The cluster DNS is the only nameserver: it forwards what it cannot answer.
        servers = [_canonical_ip(ip) for ip in cluster_dns]
        searches = _cluster_searches(pod, cluster_domain, searches)
        options = list(DEFAULT_DNS_OPTIONS)
    else:
        if kind == DNS_CLUSTER_FIRST:
            warnings.extend(_missing_cluster_dns(pod))
        if host_resolv is None:
            # No resolv.conf: point at the local machine, as a resolver without
            # nameservers would, instead of letting the runtime copy the node's file.
            servers = ["::1" if _is_ipv6(ip) else "127.0.0.1" for ip in node_ips]
            if not servers:
                servers = ["127.0.0.1"]
            searches = ["."]

    if pod.spec.dns_config is not None:
        servers, searches, options = _append_pod_dns_config(
            servers, searches, options, pod.spec.dns_config
        )

    servers = _fit_nameservers(servers, warnings)
    searches = _fit_searches(searches, warnings)
    return api.DNSConfig(servers=servers, searches=searches, options=options), warnings


def _dns_type(pod: Pod) -> str:
    """ClusterFirst, Default or None: what the policy means for this pod."""
    policy = pod.spec.dns_policy
    if policy == DNS_NONE:
        return DNS_NONE
    if policy == DNS_CLUSTER_FIRST_WITH_HOST_NET:
        return DNS_CLUSTER_FIRST
    if policy == DNS_CLUSTER_FIRST:
        # A hostNetwork pod cannot reach the cluster DNS by default: use the node's.
        return DNS_DEFAULT if pod.spec.host_network else DNS_CLUSTER_FIRST
    if policy == DNS_DEFAULT:
        return DNS_DEFAULT
    # The API server rejects these; upstream logs and treats them as ClusterFirst.
    log.error(
        "Failed to get DNS type for pod %s: invalid DNSPolicy=%s. "
        "Falling back to DNSClusterFirst policy.",
        pod.metadata.name,
        policy,
    )
    return DNS_CLUSTER_FIRST


def _missing_cluster_dns(pod: Pod) -> list[DNSWarning]:
    """Upstream's pair of events when ClusterFirst has no clusterDNS to use."""
    message = (
        "kubelet does not have ClusterDNS IP configured and cannot create Pod using "
        f'"{DNS_CLUSTER_FIRST}" policy. Falling back to "{DNS_DEFAULT}" policy.'
    )
    meta = pod.metadata
    pod_desc = json.dumps(f"{meta.name}_{meta.namespace}({meta.uid})", ensure_ascii=False)
    return [
        DNSWarning(REASON_MISSING_CLUSTER_DNS, message, on_node=True),
        DNSWarning(REASON_MISSING_CLUSTER_DNS, f"pod: {pod_desc}. {message}"),
    ]


def _cluster_searches(pod: Pod, cluster_domain: str, host_searches: list[str]) -> list[str]:
    """``<ns>.svc.<domain> svc.<domain> <domain>`` before the node's search domains."""
    if not cluster_domain:
        return host_searches
    cluster = [
        f"{pod.metadata.namespace}.svc.{cluster_domain}",
        f"svc.{cluster_domain}",
        cluster_domain,
    ]
    return _omit_duplicates([*cluster, *host_searches])


def _append_pod_dns_config(
    servers: list[str], searches: list[str], options: list[str], extra: PodDNSConfig
) -> tuple[list[str], list[str], list[str]]:
    """Merge ``spec.dnsConfig``: lists appended without repeats, options by name."""
    return (
        _omit_duplicates([*servers, *extra.nameservers]),
        _omit_duplicates([*searches, *extra.searches]),
        _merge_options(options, extra.options),
    )


def _merge_options(existing: Iterable[str], pod_options: Iterable[PodDNSConfigOption]) -> list[str]:
    """Options by name, the pod's value winning; ``name`` alone when the value is empty.

    Upstream goes through a Go map, so its order is random; this keeps first-seen order.
    """
    merged: dict[str, str] = {}
    for option in existing:
        name, _, value = option.partition(":")
        merged[name] = value
    for pod_option in pod_options:
        merged[pod_option.name] = pod_option.value or ""
    return [f"{name}:{value}" if value else name for name, value in merged.items()]


def _fit_nameservers(servers: list[str], warnings: list[DNSWarning]) -> list[str]:
    """At most three nameservers: resolvers ignore the rest anyway."""
    if len(servers) <= MAX_DNS_NAMESERVERS:
        return servers
    servers = servers[:MAX_DNS_NAMESERVERS]
    message = (
        "Nameserver limits were exceeded, some nameservers have been omitted, "
        f"the applied nameserver line is: {' '.join(servers)}"
    )
    log.error("Nameserver limits exceeded: %s", message)
    warnings.append(DNSWarning(REASON_DNS_CONFIG_FORMING, message))
    return servers


def _fit_searches(searches: list[str], warnings: list[DNSWarning]) -> list[str]:
    """At most 32 search paths of at most 253 characters, 2048 characters in all.

    Whole domains are dropped from the end until the line fits.
    """
    exceeded = False
    if len(searches) > MAX_DNS_SEARCH_PATHS:
        searches = searches[:MAX_DNS_SEARCH_PATHS]
        exceeded = True
    kept = [s for s in searches if len(s) <= MAX_SEARCH_PATH_LENGTH]
    if len(kept) != len(searches):
        exceeded = True
    searches = kept
    line_length = len(" ".join(searches))
    if line_length > MAX_DNS_SEARCH_LIST_CHARS:
        while searches and line_length > MAX_DNS_SEARCH_LIST_CHARS:
            line_length -= len(searches.pop()) + 1
        exceeded = True
    if exceeded:
        message = (
            "Search Line limits were exceeded, some search paths have been omitted, "
            f"the applied search line is: {' '.join(searches)}"
        )
        log.error("Search Line limits exceeded: %s", message)
        warnings.append(DNSWarning(REASON_DNS_CONFIG_FORMING, message))
    return searches


def _omit_duplicates(items: Iterable[str]) -> list[str]:
    """The items in order, each once."""
    return list(dict.fromkeys(items))


def _canonical_ip(ip: str) -> str:
    """The address as upstream prints a parsed ``net.IP`` (lower case, compressed v6)."""
    try:
        return str(ipaddress.ip_address(ip.strip()))
    except ValueError:
        return ip


def _is_ipv6(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip.strip()).version == 6
    except ValueError:
        return False


@attrs.define
class DnsSettings:
    """What the sandboxes' resolv.conf, hostname and managed /etc/hosts are made from."""

    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = ""
    resolv_conf: str = ""
    node_ips: tuple[str, ...] = ()
    hosts_file: str = "/etc/hosts"
    hostname_override_enabled: bool = True
    """the HostnameOverride gate: off, ``spec.hostnameOverride`` is ignored as upstream
    ignores it (the API server drops the field)"""
    _host_resolv: ResolvConf | None = None
    _loaded: bool = False

    def host_resolv(self) -> ResolvConf | None:
        """The node's resolv.conf (--resolv-conf), read once."""
        if not self._loaded:
            self._loaded = True
            try:
                self._host_resolv = load_host_resolv(self.resolv_conf)
            except (OSError, ValueError) as exc:
                log.warning("cannot use resolv.conf %s: %s", self.resolv_conf, exc)
        return self._host_resolv

    def for_pod(self, pod: Pod) -> tuple[api.DNSConfig, list[DNSWarning]]:
        return pod_dns_config(
            pod,
            cluster_dns=self.cluster_dns,
            cluster_domain=self.cluster_domain,
            host_resolv=self.host_resolv(),
            node_ips=self.node_ips,
        )

    def node_hosts(self) -> str:
        try:
            with open(self.hosts_file) as fh:
                return fh.read()
        except OSError:
            return ""
