"""Parsers for flag values, spelled the way upstream's pflag/cliflag types accept them.

Each takes the raw string and returns the value or raises ``ValueError`` with a short
reason; the caller names the flag.
"""

from __future__ import annotations

import ipaddress
import re

from kubelet.api import QuantityError, is_qualified_name, parse_quantity

from .duration import parse_duration
from .kubeletconfig import MemoryReservation, Taint, VModuleItem
from .validation import UINT32_MAX, is_ip

_TRUE = frozenset(["1", "t", "T", "true", "TRUE", "True"])
_FALSE = frozenset(["0", "f", "F", "false", "FALSE", "False"])
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

_KUBELET_LABELS = frozenset(
    [
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
    ]
)
_KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def go_bool(text: str) -> bool:
    """Go's strconv.ParseBool: 1/t/true/TRUE/True and their false counterparts."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("expected true or false")


def version_mode(text: str) -> str:
    """``--version``: a Go boolean, or ``raw`` (upstream's verflag)."""
    if text == "raw":
        return text
    return "true" if go_bool(text) else "false"


def _integer(text: str, bounds: tuple[int, int]) -> int:
    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise ValueError("expected an integer") from None
    low, high = bounds
    if not low <= value <= high:
        raise ValueError(f"out of range [{low}, {high}]")
    return value


def int32(text: str) -> int:
    """A decimal int32, as most kubelet numeric flags are."""
    return _integer(text, _INT32)


def uint32(text: str) -> int:
    """A decimal uint32, as Go's ParseUint reads it (no sign): klog's verbosity levels."""
    digits = text.strip()
    if not digits.isascii() or not digits.isdigit() or int(digits) > UINT32_MAX:
        raise ValueError(f"must be an unsigned integer (0 to {UINT32_MAX})")
    return int(digits)


def int64(text: str) -> int:
    """A decimal int64 (``--pod-max-pids``)."""
    return _integer(text, _INT64)


def duration(text: str) -> float:
    """A Go duration ("20s", "1m30s") in seconds."""
    return parse_duration(text)


def ip(text: str) -> str:
    """One IPv4 or IPv6 address."""
    if not is_ip(text):
        raise ValueError("expected an IP address")
    return text


def node_ips(text: str) -> str:
    """One address, or two comma-separated ones of different families (dual-stack).

    The messages are upstream's (component-helpers' ParseNodeIPArgument); an address
    that does not parse is refused here, where upstream logs it and carries on without it.
    """
    parts = [p.strip() for p in text.split(",")] if text else []
    addresses = []
    for part in parts:
        try:
            addresses.append(ipaddress.ip_address(part))
        except ValueError:
            raise ValueError(f"could not parse {part!r} as an IP address") from None
    if len(addresses) > 2 or (len(addresses) == 2 and addresses[0].version == addresses[1].version):
        raise ValueError("must contain either a single IP or a dual-stack pair of IPs")
    if len(addresses) == 2 and any(a.is_unspecified for a in addresses):
        raise ValueError("dual-stack node IP cannot include '0.0.0.0' or '::'")
    return ",".join(parts)


def string_list(text: str) -> tuple[str, ...]:
    """pflag's StringSlice: comma-separated; an empty value is an empty list."""
    return tuple(p.strip() for p in text.split(",")) if text else ()


def ip_list(text: str) -> tuple[str, ...]:
    """A comma-separated list of IP addresses (``--cluster-dns``)."""
    return tuple(ip(p) for p in string_list(text))


def key_value_map(text: str) -> dict[str, str]:
    """cliflag's MapStringString: ``k1=v1,k2=v2``."""
    return _pairs(text, "=")


def langle_map(text: str) -> dict[str, str]:
    """cliflag's LangleSeparatedMapStringString: ``memory.available<100Mi,nodefs.available<10%``."""
    return _pairs(text, "<")


def _pairs(text: str, sep: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in text.split(","):
        if not pair.strip():
            continue
        k, found, v = pair.partition(sep)
        if not found:
            raise ValueError(f"malformed pair {pair!r}, expected key{sep}value")
        out[k.strip()] = v.strip()
    return out


def bool_map(text: str) -> dict[str, bool]:
    """cliflag's MapStringBool (``--feature-gates A=true,B=false``)."""
    out: dict[str, bool] = {}
    for k, v in _pairs(text, "=").items():
        try:
            out[k] = go_bool(v)
        except ValueError:
            raise ValueError(f"invalid value of {k}: {v!r}, expected true or false") from None
    return out


def header_multimap(text: str) -> dict[str, tuple[str, ...]]:
    """cliflag's ColonSeparatedMultimapStringString: ``a:hello,b:again,b:beautiful``.

    The value is split at the first colon only, so ``Authorization:Basic x:y`` keeps its
    colon; values for one header name accumulate in order.
    """
    out: dict[str, tuple[str, ...]] = {}
    for pair in text.split(","):
        if not pair:
            continue
        k, found, v = pair.partition(":")
        if not found:
            raise ValueError(f"malformed pair {pair!r}, expected key:value")
        name = k.strip()
        out[name] = (*out.get(name, ()), v.strip())
    return out


def taints(text: str) -> tuple[Taint, ...]:
    """``key=value:Effect`` or ``key:Effect``, comma-separated (``--register-with-taints``)."""
    out = []
    for spec in string_list(text):
        rest, found, effect = spec.rpartition(":")
        if not found or not rest:
            raise ValueError(f"invalid taint spec {spec!r}, expected key=value:effect")
        k, _, v = rest.partition("=")
        if not is_qualified_name(k):
            raise ValueError(f"invalid taint key {k!r}")
        if not _LABEL_VALUE.match(v) or len(v) > 63:
            raise ValueError(f"invalid taint value {v!r}")
        out.append(Taint(key=k, value=v, effect=effect))
    return tuple(out)


def vmodule(text: str) -> tuple[VModuleItem, ...]:
    """klog's ``-vmodule``: ``pattern=N,pattern2=M``."""
    items = []
    for pattern, level in _pairs(text, "=").items():
        try:
            items.append(VModuleItem(file_pattern=pattern, verbosity=uint32(level)))
        except ValueError:
            raise ValueError(f"invalid verbosity {level!r} for {pattern!r}") from None
    return tuple(items)


def node_labels(text: str) -> dict[str, str]:
    """``--node-labels``: label syntax, and only the kubernetes.io labels a kubelet may set."""
    labels = key_value_map(text)
    for k, v in labels.items():
        if not is_qualified_name(k):
            raise ValueError(f"invalid label key {k!r}")
        if not _LABEL_VALUE.match(v) or len(v) > 63:
            raise ValueError(f"invalid label value {v!r} for {k!r}")
        if _is_kubernetes_label(k) and not _is_kubelet_label(k):
            allowed = ", ".join(_KUBELET_LABEL_NAMESPACES)
            raise ValueError(
                f"label {k!r} is in the kubernetes.io namespace; a kubelet may only set "
                f"labels under {allowed} or the well-known node labels"
            )
    return labels


def _namespace(label: str) -> str:
    prefix, slash, _ = label.partition("/")
    return prefix if slash else ""


def _is_kubernetes_label(label: str) -> bool:
    ns = _namespace(label)
    return any(ns == d or ns.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


def _is_kubelet_label(label: str) -> bool:
    if label in _KUBELET_LABELS:
        return True
    ns = _namespace(label)
    return any(ns == d or ns.endswith("." + d) for d in _KUBELET_LABEL_NAMESPACES)


def one_pair(text: str) -> dict[str, str]:
    """cliflag's MapStringStringNoSplit: one ``key=value`` per use (the value may hold
    commas); repeat the flag for more (``--cpu-manager-policy-options``)."""
    k, found, v = text.partition("=")
    if not found:
        raise ValueError(f"malformed pair {text!r}, expected key=value")
    return {k.strip(): v.strip()}


def quantity(text: str) -> str:
    """A resource quantity (``512``, ``1K``, ``2Ki``)."""
    try:
        parse_quantity(text)
    except (QuantityError, ValueError) as exc:
        raise ValueError(f"invalid quantity: {exc}") from None
    return text


def reserved_memory(text: str) -> tuple[MemoryReservation, ...]:
    """``--reserved-memory``: ``NUMA:type=qty[,type=qty...]``, entries separated by ';'
    (upstream's ReservedMemoryVar); repeat the flag for more NUMA nodes."""
    out = []
    for entry in (e for e in text.split(";") if e.strip()):
        node, found, limits = entry.partition(":")
        if not found or ":" in limits:
            raise ValueError(
                "the reserved memory has incorrect format, expected "
                f"numaNodeID:type=quantity[,type=quantity...], got {entry}"
            )
        try:
            numa = int(node.strip(), 10)
        except ValueError:
            raise ValueError(f"failed to convert the NUMA node ID {node!r}") from None
        pairs: dict[str, str] = {}
        for item in limits.split(","):
            name, ok, qty = item.partition("=")
            if not ok:
                raise ValueError(
                    f"the reserved limit has incorrect value, expected type=quantity, got {item}"
                )
            pairs[name.strip()] = quantity(qty.strip())
        out.append(MemoryReservation(numa_node=numa, limits=pairs))
    return tuple(out)
