"""Whether a pod fits this node: upstream's predicate admit handler, as pure functions.

The order is upstream's (``lifecycle/predicate.go`` and the scheduler's
``AdmissionCheck``), and so is every reason and message:

1. the pod's ``kubernetes.io/os`` *label* against the node's OS:
   ``PodOSSelectorNodeLabelDoesNotMatch``;
2. ``spec.os.name`` against the node's OS: ``PodOSNotSupported``;
3. (``SupplementalGroupsPolicy``, kept in admission.py);
4. the general filter, whose first failure is the reason:
   resource fit (pods, cpu, memory, ephemeral-storage, then each scalar resource —
   hugepages, extended, ``*kubernetes.io/*``) → ``OutOfpods``, ``OutOfcpu``, …,
   ``OutOf<resource>`` with "Node didn't have enough resource: cpu, requested: 2000,
   used: 500, capacity: 2000" (cpu in millicores, the rest in units or bytes);
   the node selector and required node affinity → ``NodeAffinity``;
   ``spec.nodeName`` → ``NodeName``; host ports → ``NodePorts``;
   an untolerated ``NoExecute`` taint (not for static pods) → ``TaintToleration``;
   each as "Predicate <Name> failed: <why>".

A node selector or affinity on ``kubernetes.io/os`` that the node does not match fails
as ``NodeAffinity`` (the node carries the label). Requests of extended resources the
node does not list are dropped first (cluster-level resources); with the
``DRAExtendedResource`` gate (beta, on) a scalar resource of which the node has none is
left to DRA, as upstream's kubelet does. Upstream walks scalar resources in Go map
order; here they come in the order the pod names them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any, overload

import attrs

from kubelet.api import (
    Container,
    PerObject,
    Pod,
    Taint,
    is_qualified_name,
    is_restartable_init_container,
    parse_quantity,
)
from kubelet.cgroups import (
    ResourceList,
    is_extended_resource,
    is_scalar_resource,
    milli,
    pod_requests,
    whole,
)
from kubelet.decisions import untolerated_taint

from .rejection import Rejection

__all__ = [
    "NODE_AFFINITY",
    "NODE_NAME",
    "NODE_PORTS",
    "POD_OS_NOT_SUPPORTED",
    "POD_OS_SELECTOR_MISMATCH",
    "TAINT_TOLERATION",
    "UNEXPECTED_ADMISSION_ERROR",
    "ActivePods",
    "InsufficientResource",
    "NodeInfo",
    "PredicateFailure",
    "RequestSum",
    "Resources",
    "filter_failures",
    "filter_rejection",
    "general_filter",
    "host_ports",
    "node_affinity_matches",
    "os_rejection",
    "remove_missing_extended_resources",
]

LINUX = "linux"
OS_LABEL = "kubernetes.io/os"

POD_OS_SELECTOR_MISMATCH = "PodOSSelectorNodeLabelDoesNotMatch"
POD_OS_NOT_SUPPORTED = "PodOSNotSupported"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
NODE_AFFINITY = "NodeAffinity"
NODE_NAME = "NodeName"
NODE_PORTS = "NodePorts"
TAINT_TOLERATION = "TaintToleration"
AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"
NODE_NAME_REASON = "node(s) didn't match the requested node name"
NODE_PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"
TAINT_REASON = "node(s) had taints that the pod didn't tolerate"

_NAMED_OUT_OF = {
    "cpu": "OutOfcpu",
    "memory": "OutOfmemory",
    "ephemeral-storage": "OutOfephemeral-storage",
    "pods": "OutOfpods",
}
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = 1 << 63


# -- the node --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class NodeInfo:
    """What admission reads of the node: the Node object's name, labels, taints and
    allocatable (the kubelet's own when standalone)."""

    name: str
    labels: Mapping[str, str] = attrs.field(factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: Mapping[str, str] = attrs.field(factory=dict)
    os: str = LINUX


@attrs.frozen
class Resources:
    """The scheduler's bookkeeping unit: millicores, bytes, a pod count, scalar units."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pods: int = 0
    scalar: Mapping[str, int] = attrs.field(factory=dict)

    @classmethod
    def of(cls, amounts: Mapping[str, Fraction]) -> Resources:
        scalar: dict[str, int] = {}
        for name, amount in amounts.items():
            if is_scalar_resource(name):
                scalar[name] = scalar.get(name, 0) + whole(amount)
        return cls(
            milli_cpu=milli(amounts.get("cpu", Fraction(0))),
            memory=whole(amounts.get("memory", Fraction(0))),
            ephemeral_storage=whole(amounts.get("ephemeral-storage", Fraction(0))),
            pods=whole(amounts.get("pods", Fraction(0))),
            scalar=scalar,
        )

    def plus(self, other: Resources) -> Resources:
        scalar = dict(self.scalar)
        for name, value in other.scalar.items():
            scalar[name] = scalar.get(name, 0) + value
        return Resources(
            milli_cpu=self.milli_cpu + other.milli_cpu,
            memory=self.memory + other.memory,
            ephemeral_storage=self.ephemeral_storage + other.ephemeral_storage,
            pods=self.pods + other.pods,
            scalar=scalar,
        )


def _total(parts: Iterable[Resources]) -> Resources:
    """The sum of ``parts`` (``plus`` folded, without the objects in between)."""
    cpu = memory = storage = pods = 0
    scalar: dict[str, int] = {}
    for part in parts:
        cpu += part.milli_cpu
        memory += part.memory
        storage += part.ephemeral_storage
        pods += part.pods
        for name, value in part.scalar.items():
            scalar[name] = scalar.get(name, 0) + value
    return Resources(
        milli_cpu=cpu, memory=memory, ephemeral_storage=storage, pods=pods, scalar=scalar
    )


def _requests_counter(pod_level_resources: bool) -> PerObject[Pod, Resources]:
    def of(pod: Pod) -> Resources:
        return Resources.of(pod_requests(pod, pod_level_resources=pod_level_resources))

    return PerObject(of)


_REQUESTS = {flag: _requests_counter(flag) for flag in (False, True)}
"""A pod's requests as admission counts them, by the ``PodLevelResources`` gate: every
admission sums all active pods', so each pod's is computed once (pods are immutable)."""


@attrs.define
class _Sum:
    """One gate setting's running sum; ``holders`` counts the parts naming each scalar
    resource, so a name leaves the sum when its last part does (as ``_total``'s would)."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pods: int = 0
    scalar: dict[str, int] = attrs.field(factory=dict)
    holders: dict[str, int] = attrs.field(factory=dict)
    broken: set[str] = attrs.field(factory=set)
    """UIDs whose requests do not parse: the sum is unknown while any is in."""

    def add(self, part: Resources, sign: int) -> None:
        self.milli_cpu += sign * part.milli_cpu
        self.memory += sign * part.memory
        self.ephemeral_storage += sign * part.ephemeral_storage
        self.pods += sign * part.pods
        for name, value in part.scalar.items():
            held = self.holders.get(name, 0) + sign
            if held:
                self.holders[name] = held
                self.scalar[name] = self.scalar.get(name, 0) + sign * value
            else:
                del self.holders[name]
                del self.scalar[name]

    def resources(self) -> Resources:
        return Resources(
            milli_cpu=self.milli_cpu,
            memory=self.memory,
            ephemeral_storage=self.ephemeral_storage,
            pods=self.pods,
            scalar=dict(self.scalar),
        )


class RequestSum:
    """The requests of a changing set of pods (by UID), summed as pods come, change and
    go: admission needs the sum of all admitted active pods' at every pod start, and
    walking them all made a ramp of N pods O(N²). Equal to ``_total`` over the members'
    requests; a gate setting's sum starts the first time it is asked for."""

    def __init__(self) -> None:
        self._pods: dict[str, Pod] = {}
        self._sums: dict[bool, _Sum] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def put(self, uid: str, pod: Pod) -> None:
        """``uid`` counts with ``pod``'s requests (in place of its previous pod's)."""
        old = self._pods.get(uid)
        if old is pod:
            return
        for flag, total in self._sums.items():
            if old is not None:
                self._account(total, flag, uid, old, -1)
            self._account(total, flag, uid, pod, +1)
        self._pods[uid] = pod

    def discard(self, uid: str) -> None:
        old = self._pods.pop(uid, None)
        if old is not None:
            for flag, total in self._sums.items():
                self._account(total, flag, uid, old, -1)

    def total(self, pod_level_resources: bool) -> Resources | None:
        """The members' summed requests, or None when a member's do not parse (the caller
        then sums them itself, meeting the error where it always did)."""
        total = self._sums.get(pod_level_resources)
        if total is None:
            total = self._sums[pod_level_resources] = _Sum()
            for uid, pod in self._pods.items():
                self._account(total, pod_level_resources, uid, pod, +1)
        return None if total.broken else total.resources()

    @staticmethod
    def _account(total: _Sum, flag: bool, uid: str, pod: Pod, sign: int) -> None:
        try:
            part = _REQUESTS[flag](pod)
        except ValueError:
            if sign > 0:
                total.broken.add(uid)
            else:
                total.broken.discard(uid)
            return
        total.add(part, sign)


class ActivePods(Sequence[Pod]):
    """The pods admitted before and still active, as admission reads them: their count
    and summed requests from a ``RequestSum``; the pods themselves (``listed``, in the
    pod workers' order) only when a check walks them (host ports, preemption)."""

    def __init__(self, requests: RequestSum, listed: Callable[[], list[Pod]]) -> None:
        self.requests = requests
        self._listed = listed
        self._pods: list[Pod] | None = None

    def _all(self) -> list[Pod]:
        if self._pods is None:
            self._pods = self._listed()
        return self._pods

    def __len__(self) -> int:
        return len(self.requests)

    @overload
    def __getitem__(self, index: int) -> Pod: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Pod]: ...

    def __getitem__(self, index: int | slice) -> Pod | Sequence[Pod]:
        return self._all()[index]

    def __iter__(self) -> Iterator[Pod]:
        return iter(self._all())


# -- failures -------------------------------------------------------------------------------


@attrs.frozen
class InsufficientResource:
    resource: str
    requested: int
    used: int
    capacity: int

    @property
    def reason(self) -> str:
        return _NAMED_OUT_OF.get(self.resource, "OutOf" + self.resource)

    @property
    def message(self) -> str:
        return (
            f"Node didn't have enough resource: {self.resource}, requested: {self.requested}, "
            f"used: {self.used}, capacity: {self.capacity}"
        )


@attrs.frozen
class PredicateFailure:
    name: str
    description: str

    @property
    def reason(self) -> str:
        return self.name

    @property
    def message(self) -> str:
        return f"Predicate {self.name} failed: {self.description}"


Failure = InsufficientResource | PredicateFailure


# -- resource fit ---------------------------------------------------------------------------


def _filter_container(container: Container, allocatable: Mapping[str, str]) -> Container:
    resources = container.resources
    if resources is None:
        return container
    kept = {
        name: value
        for name, value in resources.requests.items()
        if not is_extended_resource(name) or name in allocatable
    }
    if len(kept) == len(resources.requests):
        return container
    return attrs.evolve(container, resources=attrs.evolve(resources, requests=kept))


def remove_missing_extended_resources(pod: Pod, allocatable: Mapping[str, str]) -> Pod:
    """The pod without its requests of extended resources the node does not list
    (cluster-level resources the scheduler accounted for); limits are left alone."""
    spec = pod.spec
    return attrs.evolve(
        pod,
        spec=attrs.evolve(
            spec,
            containers=tuple(_filter_container(c, allocatable) for c in spec.containers),
            init_containers=tuple(_filter_container(c, allocatable) for c in spec.init_containers),
        ),
    )


def fits_request(
    request: Resources,
    requested: Resources,
    allocatable: Resources,
    pod_count: int,
    *,
    dra_extended_resource: bool = True,
) -> list[InsufficientResource]:
    """Upstream ``fitsRequest``: every resource that does not fit, pods first."""
    out = []
    if pod_count + 1 > allocatable.pods:
        out.append(InsufficientResource("pods", 1, pod_count, allocatable.pods))
    if not (request.milli_cpu or request.memory or request.ephemeral_storage or request.scalar):
        return out
    for name, want, used, cap in (
        ("cpu", request.milli_cpu, requested.milli_cpu, allocatable.milli_cpu),
        ("memory", request.memory, requested.memory, allocatable.memory),
        (
            "ephemeral-storage",
            request.ephemeral_storage,
            requested.ephemeral_storage,
            allocatable.ephemeral_storage,
        ),
    ):
        if want > 0 and want > cap - used:
            out.append(InsufficientResource(name, want, used, cap))
    for name, want in request.scalar.items():
        if want == 0:
            continue
        if dra_extended_resource and name not in allocatable.scalar:
            continue  # the node does not list it: DRA's to allocate, not ours to refuse
        cap = allocatable.scalar.get(name, 0)
        used = requested.scalar.get(name, 0)
        if want > cap - used:
            out.append(InsufficientResource(name, want, used, cap))
    return out


# -- node affinity --------------------------------------------------------------------------


class _ParseError(ValueError):
    """A node selector term the API would refuse: it matches no node."""


def _label_value_ok(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


def _go_int64(text: str) -> int | None:
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -_INT64 <= value < _INT64 else None


def _requirement(expr: Any) -> tuple[str, str, list[str]]:
    if not isinstance(expr, Mapping):
        raise _ParseError("not a requirement")
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if not isinstance(key, str) or not is_qualified_name(key):
        raise _ParseError(f"invalid key {key!r}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _ParseError("values must be strings")
    if op in ("In", "NotIn"):
        if not values:
            raise _ParseError("for 'in', 'notin' operators, values set can't be empty")
    elif op in ("Exists", "DoesNotExist"):
        if values:
            raise _ParseError("values set must be empty for exists and does not exist")
    elif op in ("Gt", "Lt"):
        if len(values) != 1 or _go_int64(values[0]) is None:
            raise _ParseError("for 'Gt', 'Lt' operators, exactly one integer value is required")
    else:
        raise _ParseError(f"unsupported operator {op!r}")
    if not all(_label_value_ok(v) for v in values):
        raise _ParseError("invalid label value")
    return key, str(op), list(values)


def _label_match(key: str, op: str, values: list[str], labels: Mapping[str, str]) -> bool:
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if not present:
        return False
    have, bound = _go_int64(labels[key]), _go_int64(values[0])
    if have is None or bound is None:
        return False
    return have > bound if op == "Gt" else have < bound


def _field_match(expr: Any, fields: Mapping[str, str]) -> bool:
    if not isinstance(expr, Mapping):
        raise _ParseError("not a requirement")
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op not in ("In", "NotIn"):
        raise _ParseError(f"unsupported operator {op!r}")
    if not isinstance(values, list) or len(values) != 1:
        raise _ParseError("must have one element")
    equal = fields.get(str(key), "") == values[0]
    return equal if op == "In" else not equal


def _term_matches(term: Any, labels: Mapping[str, str], node_name: str) -> bool:
    """One ``nodeSelectorTerm``: its label expressions and field expressions, ANDed; a
    term that does not parse matches nothing."""
    if not isinstance(term, Mapping):
        return False
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        return False
    try:
        requirements = [_requirement(e) for e in expressions]
        field_results = [_field_match(f, {"metadata.name": node_name}) for f in fields]
    except _ParseError:
        return False
    if not all(_label_match(k, op, v, labels) for k, op, v in requirements):
        return False
    # Fields are only judged when the node has a name to judge them by.
    return not node_name or all(field_results)


def node_affinity_matches(pod: Pod, node: NodeInfo) -> bool:
    """``spec.nodeSelector`` (every label equal) and the required node affinity (one of
    its terms; none, or only empty ones, match nothing)."""
    labels = node.labels
    for key, value in pod.spec.node_selector.items():
        if labels.get(key) != value or key not in labels:
            return False
    affinity = pod.spec.affinity or {}
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    if not isinstance(node_affinity, Mapping):
        return True
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(terms, list):
        return False
    return any(
        _term_matches(term, labels, node.name)
        for term in terms
        if isinstance(term, Mapping) and (term.get("matchExpressions") or term.get("matchFields"))
    )


# -- ports and taints -----------------------------------------------------------------------


def host_ports(pod: Pod) -> list[tuple[str, str, int]]:
    """(ip, protocol, port) of every host port the pod holds for its whole life: its
    containers' and its sidecars' ("" ip is 0.0.0.0, "" protocol is TCP)."""
    containers = [c for c in pod.spec.init_containers if is_restartable_init_container(c)]
    containers += pod.spec.containers
    out = []
    for container in containers:
        for port in container.ports:
            if port.host_port and port.host_port > 0:
                out.append((port.host_ip or "0.0.0.0", port.protocol or "TCP", port.host_port))
    return out


def _port_conflict(wanted: tuple[str, str, int], used: Mapping[str, set[tuple[str, int]]]) -> bool:
    ip, protocol, port = wanted
    key = (protocol, port)
    if ip == "0.0.0.0":
        return any(key in pairs for pairs in used.values())
    return any(key in used.get(candidate, set()) for candidate in ("0.0.0.0", ip))


def ports_fit(pod: Pod, others: Iterable[Pod]) -> bool:
    """A pod without host ports fits without looking at the others (the scheduler's
    NodePorts plugin skips it too): admission runs for every pod of a ramp."""
    wanted = host_ports(pod)
    if not wanted:
        return True
    used: dict[str, set[tuple[str, int]]] = {}
    for other in others:
        for ip, protocol, port in host_ports(other):
            used.setdefault(ip, set()).add((protocol, port))
    return not any(_port_conflict(one, used) for one in wanted)


# -- the handler ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _allocatable(items: tuple[tuple[str, str], ...]) -> Resources:
    """The node's allocatable, parsed once per distinct value (every admission reads it;
    a value that does not parse raises each time: errors are not cached)."""
    amounts: ResourceList = {name: parse_quantity(value).amount for name, value in items}
    return Resources.of(amounts)


def general_filter(
    pod: Pod,
    others: Sequence[Pod],
    node: NodeInfo,
    *,
    pod_level_resources: bool = True,
    dra_extended_resource: bool = True,
    comparison_operators: bool = False,
) -> list[Failure]:
    """Every failure, in upstream's order (the kubelet reports the first). ``others``:
    the pods already admitted and active."""
    allocatable = _allocatable(tuple(node.allocatable.items()))
    requests_of = _REQUESTS[pod_level_resources]
    requested = None
    if isinstance(others, ActivePods):
        requested = others.requests.total(pod_level_resources)
    if requested is None:
        requested = _total(requests_of(other) for other in others)
    request = requests_of(pod)
    failures: list[Failure] = list(
        fits_request(
            request,
            requested,
            allocatable,
            len(others),
            dra_extended_resource=dra_extended_resource,
        )
    )
    if not node_affinity_matches(pod, node):
        failures.append(PredicateFailure(NODE_AFFINITY, AFFINITY_REASON))
    if pod.spec.node_name and pod.spec.node_name != node.name:
        failures.append(PredicateFailure(NODE_NAME, NODE_NAME_REASON))
    if not ports_fit(pod, others):
        failures.append(PredicateFailure(NODE_PORTS, NODE_PORTS_REASON))
    if not pod.is_static and untolerated_taint(
        node.taints, pod.spec.tolerations, comparison_operators=comparison_operators
    ):
        failures.append(PredicateFailure(TAINT_TOLERATION, TAINT_REASON))
    return failures


def os_rejection(pod: Pod, node: NodeInfo) -> Rejection | None:
    """The first two checks of upstream's predicate handler: the pod's
    ``kubernetes.io/os`` label, then ``spec.os.name``, against the node's OS."""
    if pod.metadata.labels.get(OS_LABEL, node.os) != node.os:
        return Rejection(
            POD_OS_SELECTOR_MISMATCH,
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        )
    if pod.spec.os is not None and pod.spec.os.get("name") != node.os:
        return Rejection(
            POD_OS_NOT_SUPPORTED, "Failed to admit pod as the OS field doesn't match node OS"
        )
    return None


def filter_failures(
    pod: Pod,
    others: Sequence[Pod],
    node: NodeInfo,
    *,
    pod_level_resources: bool = True,
    dra_extended_resource: bool = True,
    comparison_operators: bool = False,
) -> list[Failure]:
    """Every failure of the general filter as the kubelet runs it (critical pod
    preemption reads them all); ``ValueError`` for a quantity that does not parse."""
    if node.labels and node.labels.get(OS_LABEL) != node.os:
        # Upstream sets the label right in its copy of the node (the status loop puts it
        # right on the API object within seconds); an unlabelled node stays unlabelled.
        node = attrs.evolve(node, labels={**node.labels, OS_LABEL: node.os})
    trimmed = remove_missing_extended_resources(pod, node.allocatable)
    return general_filter(
        trimmed,
        others,
        node,
        pod_level_resources=pod_level_resources,
        dra_extended_resource=dra_extended_resource,
        comparison_operators=comparison_operators,
    )


def filter_rejection(
    pod: Pod,
    others: Sequence[Pod],
    node: NodeInfo,
    *,
    pod_level_resources: bool = True,
    dra_extended_resource: bool = True,
    comparison_operators: bool = False,
) -> Rejection | None:
    """The general filter's first failure (after the OS checks, in upstream's order).
    A quantity that does not parse (a manifest the API server would have refused) is an
    ``UnexpectedAdmissionError`` naming it, not a crash."""
    try:
        failures = filter_failures(
            pod,
            others,
            node,
            pod_level_resources=pod_level_resources,
            dra_extended_resource=dra_extended_resource,
            comparison_operators=comparison_operators,
        )
    except ValueError as err:
        return Rejection(
            UNEXPECTED_ADMISSION_ERROR,
            f"Unexpected error while computing the pod's resources: {err}",
        )
    if not failures:
        return None
    first = failures[0]
    return Rejection(first.reason, first.message)


