"""Pod DNS config: resolv.conf parsing, dnsPolicy, dnsConfig merging and resolver limits.

Cases follow upstream's pkg/kubelet/network/dns tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet.api import Pod, PodDNSConfig, PodDNSConfigOption
from kubelet.cri import api
from kubelet.decisions import sandbox_config
from kubelet.env import DNSWarning
from kubelet.env.dns import (
    MAX_RESOLV_CONF_BYTES,
    REASON_DNS_CONFIG_FORMING,
    REASON_MISSING_CLUSTER_DNS,
    ResolvConf,
    load_host_resolv,
    parse_resolv_conf,
    pod_dns_config,
)
from kubelet.testing import builders

HOST = ResolvConf(
    nameservers=("192.0.2.53", "192.0.2.54"),
    searches=("corp.example", "example"),
    options=("ndots:2", "timeout:1"),
)
CLUSTER_SEARCHES = ["testNS.svc.cluster.local", "svc.cluster.local", "cluster.local"]


def make_pod(
    policy: str = "ClusterFirst",
    *,
    host_network: bool = False,
    dns_config: PodDNSConfig | None = None,
) -> Pod:
    return builders.make_pod(
        namespace="testNS", dns_policy=policy, host_network=host_network, dns_config=dns_config
    )


def as_tuple(config: api.DNSConfig) -> tuple[list[str], list[str], list[str]]:
    return list(config.servers), list(config.searches), list(config.options)


# -- parse_resolv_conf ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "nameservers", "searches", "options"),
    [
        ("", [], [], []),
        (" ", [], [], []),
        ("\t\n\t", [], [], []),
        ("#comment\n#comment", [], [], []),
        (" #comment\n", [], [], []),
        ("#comment\nnameserver 1.2.3.4\nsearch", ["1.2.3.4"], [], []),
        ("\tnameserver 1.2.3.4", ["1.2.3.4"], [], []),
        ("nameserver \t 1.2.3.4", ["1.2.3.4"], [], []),
        ("nameserver 1.2.3.4 #comment", ["1.2.3.4"], [], []),
        ("nameserver 1.2.3.4\nnameserver 5.6.7.8", ["1.2.3.4", "5.6.7.8"], [], []),
        ("search ", [], [], []),
        ("search foo bar", [], ["foo", "bar"], []),
        ("search foo. bar", [], ["foo", "bar"], []),
        ("search foo\nsearch bar", [], ["bar"], []),
        (
            "nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar",
            ["1.2.3.4", "5.6.7.8"],
            ["bar"],
            [],
        ),
        ("#c\nnameserver 1.2.3.4\n#c\nsearch foo\ncomment", ["1.2.3.4"], ["foo"], []),
        ("options ", [], [], []),
        ("options ndots:5 attempts:2", [], [], ["ndots:5", "attempts:2"]),
        ("options ndots:1\noptions ndots:5 attempts:3", [], [], ["ndots:5", "attempts:3"]),
    ],
)
def test_parse_resolv_conf(
    text: str, nameservers: list[str], searches: list[str], options: list[str]
) -> None:
    assert parse_resolv_conf(text) == ResolvConf(
        tuple(nameservers), tuple(searches), tuple(options)
    )


@pytest.mark.parametrize("text", ["#comment\nnameserver", "nameserver\nsearch"])
def test_parse_resolv_conf_empty_nameserver_is_an_error(text: str) -> None:
    with pytest.raises(ValueError, match="nameserver list is empty"):
        parse_resolv_conf(text)


def test_load_host_resolv(tmp_path: Path) -> None:
    path = tmp_path / "resolv.conf"
    path.write_text("nameserver 10.0.0.1\nsearch a.example.\noptions rotate\n")
    assert load_host_resolv(str(path)) == ResolvConf(("10.0.0.1",), ("a.example",), ("rotate",))
    assert load_host_resolv("") is None
    with pytest.raises(FileNotFoundError):
        load_host_resolv(str(tmp_path / "missing"))
    path.write_bytes(b"#" * (MAX_RESOLV_CONF_BYTES + 1))
    with pytest.raises(ValueError, match="limit"):
        load_host_resolv(str(path))


# -- policies ---------------------------------------------------------------------------------

CLUSTER = (["10.96.0.10"], [*CLUSTER_SEARCHES, "corp.example", "example"], ["ndots:5"])
HOST_DNS = (["192.0.2.53", "192.0.2.54"], ["corp.example", "example"], ["ndots:2", "timeout:1"])


@pytest.mark.parametrize(
    ("policy", "host_network", "expected"),
    [
        ("ClusterFirst", False, CLUSTER),
        ("ClusterFirst", True, HOST_DNS),  # hostNetwork cannot use the cluster DNS
        ("ClusterFirstWithHostNet", True, CLUSTER),
        ("ClusterFirstWithHostNet", False, CLUSTER),
        ("Default", False, HOST_DNS),
        ("Default", True, HOST_DNS),
        ("None", False, ([], [], [])),
        ("bogus", True, CLUSTER),  # unknown policies fall back to ClusterFirst
    ],
)
def test_policies(
    policy: str, host_network: bool, expected: tuple[list[str], list[str], list[str]]
) -> None:
    config, warnings = pod_dns_config(
        make_pod(policy, host_network=host_network),
        cluster_dns=["10.96.0.10"],
        cluster_domain="cluster.local",
        host_resolv=HOST,
    )
    assert as_tuple(config) == expected
    assert warnings == []


def test_cluster_first_dedups_host_searches_and_canonicalises_ips() -> None:
    host = ResolvConf(("8.8.8.8",), ("svc.cluster.local", "cluster.local", "corp"), ())
    config, _ = pod_dns_config(
        make_pod(),
        cluster_dns=["10.96.0.10", "FD00::000A"],
        cluster_domain="cluster.local",
        host_resolv=host,
    )
    assert as_tuple(config) == (["10.96.0.10", "fd00::a"], [*CLUSTER_SEARCHES, "corp"], ["ndots:5"])


def test_cluster_first_without_cluster_domain_keeps_host_searches() -> None:
    config, _ = pod_dns_config(
        make_pod(), cluster_dns=["10.96.0.10"], cluster_domain="", host_resolv=HOST
    )
    assert as_tuple(config) == (["10.96.0.10"], ["corp.example", "example"], ["ndots:5"])


@pytest.mark.parametrize("policy", ["ClusterFirst", "ClusterFirstWithHostNet"])
def test_missing_cluster_dns_falls_back_to_default_with_warnings(policy: str) -> None:
    config, warnings = pod_dns_config(
        make_pod(policy, host_network=True),
        cluster_dns=[],
        cluster_domain="cluster.local",
        host_resolv=HOST,
    )
    assert as_tuple(config) == HOST_DNS
    if policy == "ClusterFirst":  # hostNetwork: it was Default already, no warning
        assert warnings == []
        return
    message = (
        "kubelet does not have ClusterDNS IP configured and cannot create Pod using "
        '"ClusterFirst" policy. Falling back to "Default" policy.'
    )
    assert warnings == [
        DNSWarning(REASON_MISSING_CLUSTER_DNS, message, on_node=True),
        DNSWarning(REASON_MISSING_CLUSTER_DNS, f'pod: "web_testNS(uid-1)". {message}'),
    ]


def test_missing_cluster_dns_warns_for_cluster_first() -> None:
    _, warnings = pod_dns_config(
        make_pod(), cluster_dns=[], cluster_domain="cluster.local", host_resolv=HOST
    )
    assert [w.reason for w in warnings] == [REASON_MISSING_CLUSTER_DNS] * 2
    assert [w.on_node for w in warnings] == [True, False]


@pytest.mark.parametrize(
    ("node_ips", "servers"),
    [
        ([], ["127.0.0.1"]),
        (["192.0.2.10"], ["127.0.0.1"]),
        (["2001:db8::10"], ["::1"]),
        (["192.0.2.10", "2001:db8::10"], ["127.0.0.1", "::1"]),
    ],
)
def test_default_without_resolv_conf_uses_localhost(
    node_ips: list[str], servers: list[str]
) -> None:
    config, _ = pod_dns_config(
        make_pod("Default"),
        cluster_dns=["10.96.0.10"],
        cluster_domain="cluster.local",
        host_resolv=None,
        node_ips=node_ips,
    )
    assert as_tuple(config) == (servers, ["."], [])


def test_cluster_first_without_resolv_conf() -> None:
    config, _ = pod_dns_config(
        make_pod(), cluster_dns=["10.96.0.10"], cluster_domain="cluster.local", host_resolv=None
    )
    assert as_tuple(config) == (["10.96.0.10"], CLUSTER_SEARCHES, ["ndots:5"])


# -- spec.dnsConfig -----------------------------------------------------------------------------

POD_DNS = PodDNSConfig(
    nameservers=("203.0.113.1", "10.96.0.10"),
    searches=("my.dns.search.suffix", "cluster.local"),
    options=(
        PodDNSConfigOption(name="ndots", value="2"),
        PodDNSConfigOption(name="edns0"),
        PodDNSConfigOption(name="timeout", value=""),
    ),
)


@pytest.mark.parametrize(
    ("policy", "host_network", "expected"),
    [
        (
            "None",
            False,
            (
                ["203.0.113.1", "10.96.0.10"],
                ["my.dns.search.suffix", "cluster.local"],
                ["ndots:2", "edns0", "timeout"],
            ),
        ),
        (
            "ClusterFirst",
            False,
            (
                ["10.96.0.10", "203.0.113.1"],
                [*CLUSTER_SEARCHES, "corp.example", "example", "my.dns.search.suffix"],
                ["ndots:2", "edns0", "timeout"],
            ),
        ),
        (
            "ClusterFirstWithHostNet",
            True,
            (
                ["10.96.0.10", "203.0.113.1"],
                [*CLUSTER_SEARCHES, "corp.example", "example", "my.dns.search.suffix"],
                ["ndots:2", "edns0", "timeout"],
            ),
        ),
        (
            "Default",
            False,
            (
                ["192.0.2.53", "192.0.2.54", "203.0.113.1"],  # 4th cut: limit 3
                ["corp.example", "example", "my.dns.search.suffix", "cluster.local"],
                ["ndots:2", "timeout", "edns0"],
            ),
        ),
    ],
)
def test_pod_dns_config_is_merged(
    policy: str, host_network: bool, expected: tuple[list[str], list[str], list[str]]
) -> None:
    config, warnings = pod_dns_config(
        make_pod(policy, host_network=host_network, dns_config=POD_DNS),
        cluster_dns=["10.96.0.10"],
        cluster_domain="cluster.local",
        host_resolv=HOST,
    )
    assert as_tuple(config) == expected
    if policy == "Default":
        assert warnings == [
            DNSWarning(
                REASON_DNS_CONFIG_FORMING,
                "Nameserver limits were exceeded, some nameservers have been omitted, "
                "the applied nameserver line is: 192.0.2.53 192.0.2.54 203.0.113.1",
            )
        ]
    else:
        assert warnings == []


def test_merged_options_keep_order_and_pod_wins() -> None:
    host = ResolvConf((), (), ("ndots:5", "debug"))
    extra = PodDNSConfig(
        options=(
            PodDNSConfigOption(name="ndots", value="3"),
            PodDNSConfigOption(name="single-request"),
            PodDNSConfigOption(name="attempts", value="3"),
        )
    )
    config, _ = pod_dns_config(
        make_pod("Default", dns_config=extra), cluster_dns=[], cluster_domain="", host_resolv=host
    )
    assert list(config.options) == ["ndots:3", "debug", "single-request", "attempts:3"]


# -- limits ---------------------------------------------------------------------------------------

# 128 + 15 * 127 + 15 spaces == 2048; distinct, as dnsConfig searches are deduplicated
SEARCH_2048 = ["A" * 128, *("A" * 125 + f"{i:02}" for i in range(15))]


def search_warning(applied: list[str]) -> DNSWarning:
    return DNSWarning(
        REASON_DNS_CONFIG_FORMING,
        "Search Line limits were exceeded, some search paths have been omitted, "
        f"the applied search line is: {' '.join(applied)}",
    )


@pytest.mark.parametrize(
    ("searches", "applied", "exceeded"),
    [
        (["a", "b", "c", "AAA", "BBB"], ["a", "b", "c", "AAA", "BBB"], False),
        (["a", "AAA", "B" * 254, "BBB"], ["a", "AAA", "BBB"], True),
        (["a", "B" * 253], ["a", "B" * 253], False),
        (SEARCH_2048, SEARCH_2048, False),
        ([*SEARCH_2048, "B"], SEARCH_2048, True),
        ([str(i) for i in range(32)], [str(i) for i in range(32)], False),
        ([str(i) for i in range(33)], [str(i) for i in range(32)], True),
    ],
)
def test_search_limits(searches: list[str], applied: list[str], exceeded: bool) -> None:
    config, warnings = pod_dns_config(
        make_pod("None", dns_config=PodDNSConfig(searches=tuple(searches))),
        cluster_dns=[],
        cluster_domain="",
        host_resolv=None,
    )
    assert list(config.searches) == applied
    assert warnings == ([search_warning(applied)] if exceeded else [])


def test_long_search_line_is_cut_from_the_end() -> None:
    searches = ["x" * 200] * 11  # distinct after suffixing, 11 * 201 - 1 = 2210 chars
    searches = [f"{s}{i}" for i, s in enumerate(searches)]
    config, warnings = pod_dns_config(
        make_pod("None", dns_config=PodDNSConfig(searches=tuple(searches))),
        cluster_dns=[],
        cluster_domain="",
        host_resolv=None,
    )
    assert list(config.searches) == searches[:10]
    assert len(" ".join(config.searches)) <= 2048
    assert warnings == [search_warning(searches[:10])]


def test_result_goes_into_sandbox_config() -> None:
    pod = make_pod()
    dns, _ = pod_dns_config(
        pod, cluster_dns=["10.96.0.10"], cluster_domain="cluster.local", host_resolv=HOST
    )
    config = sandbox_config(pod, 0, dns=dns)
    assert list(config.dns_config.servers) == ["10.96.0.10"]
    assert list(config.dns_config.options) == ["ndots:5"]
