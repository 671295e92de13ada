"""Admission predicates, restated from upstream's lifecycle/predicate_test.go and the
scheduler plugin tests (noderesources fit, nodeaffinity, nodeports, tainttoleration)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from kubelet.api import (
    Container,
    ContainerPort,
    ObjectMeta,
    Pod,
    PodSpec,
    Quantity,
    ResourceRequirements,
    Taint,
    Toleration,
)
from kubelet.decisions import tolerates, untolerated_taint
from kubelet.pods import NodeInfo
from kubelet.pods.admission import Rejection
from kubelet.pods.fit import (
    InsufficientResource,
    PredicateFailure,
    Resources,
    filter_rejection,
    fits_request,
    general_filter,
    node_affinity_matches,
    os_rejection,
    ports_fit,
    remove_missing_extended_resources,
)

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_A = "kubernetes.io/something"
K8S_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"


def container(
    requests: dict[str, str | int] | None = None,
    *,
    limits: dict[str, str] | None = None,
    ports: tuple[ContainerPort, ...] = (),
    sidecar: bool = False,
    name: str = "c",
) -> Container:
    return Container(
        name=name,
        ports=ports,
        restart_policy="Always" if sidecar else None,
        resources=ResourceRequirements(
            requests={k: Quantity(str(v)) for k, v in (requests or {}).items()},
            limits={k: Quantity(v) for k, v in (limits or {}).items()},
        ),
    )


def pod(
    *containers: Container,
    init: tuple[Container, ...] = (),
    overhead: dict[str, str] | None = None,
    node_name: str = "",
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: tuple[Toleration, ...] = (),
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    os: str | None = None,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name="p", namespace="ns", uid="u", labels=labels or {}, annotations=annotations or {}
        ),
        spec=PodSpec(
            containers=containers,
            init_containers=init,
            overhead={k: Quantity(v) for k, v in (overhead or {}).items()},
            node_name=node_name,
            node_selector=node_selector or {},
            affinity=affinity,
            tolerations=tolerations,
            os={"name": os} if os else None,
        ),
    )


def usage(milli_cpu: int = 0, memory: int = 0, **scalar: int) -> Pod:
    """A pod requesting cpu in millicores, memory in bytes and scalar resources."""
    requests: dict[str, str | int] = {"cpu": f"{milli_cpu}m", "memory": memory}
    requests.update({_name(k): v for k, v in scalar.items()})
    return pod(container(requests))


def _name(short: str) -> str:
    return {"ext_a": EXT_A, "ext_b": EXT_B, "k8s_a": K8S_A, "k8s_b": K8S_B, "huge_a": HUGE_A}[short]


def init_pod(base: Pod, *inits: Pod) -> Pod:
    return Pod(
        metadata=base.metadata,
        spec=PodSpec(
            containers=base.spec.containers,
            init_containers=tuple(i.spec.containers[0] for i in inits),
            overhead=base.spec.overhead,
        ),
    )


# The scheduler test's node: 10 millicores, 20 bytes, 32 pods, 5 example.com/aaa,
# 20 bytes of ephemeral storage, 5 bytes of 2Mi hugepages.
ALLOCATABLE = {
    "cpu": "10m",
    "memory": "20",
    "pods": "32",
    EXT_A: "5",
    "ephemeral-storage": "20",
    HUGE_A: "5",
}


def fit(pod_: Pod, existing: Pod) -> list[InsufficientResource]:
    """fitsRequest as the scheduler runs it (no DRA delegation)."""
    from kubelet.api import parse_quantity
    from kubelet.cgroups import pod_requests

    allocatable = Resources.of({k: parse_quantity(v).amount for k, v in ALLOCATABLE.items()})
    return fits_request(
        Resources.of(pod_requests(pod_)),
        Resources.of(pod_requests(existing)),
        allocatable,
        1,
        dra_extended_resource=False,
    )


def insufficient(name: str, requested: int, used: int, capacity: int) -> InsufficientResource:
    return InsufficientResource(name, requested, used, capacity)


@pytest.mark.parametrize(
    ("label", "pod_", "existing", "expected"),
    [
        ("no resources requested always fits", pod(), usage(10, 20), []),
        (
            "too many resources fails",
            usage(1, 1),
            usage(10, 20),
            [insufficient("cpu", 1, 10, 10), insufficient("memory", 1, 20, 20)],
        ),
        (
            "too many resources fails due to init container cpu",
            init_pod(usage(1, 1), usage(3, 1)),
            usage(8, 19),
            [insufficient("cpu", 3, 8, 10)],
        ),
        (
            "too many resources fails due to highest init container cpu",
            init_pod(usage(1, 1), usage(3, 1), usage(2, 1)),
            usage(8, 19),
            [insufficient("cpu", 3, 8, 10)],
        ),
        (
            "too many resources fails due to init container memory",
            init_pod(usage(1, 1), usage(1, 3)),
            usage(9, 19),
            [insufficient("memory", 3, 19, 20)],
        ),
        (
            "init container fits because it's the max, not sum",
            init_pod(usage(1, 1), usage(1, 1)),
            usage(9, 19),
            [],
        ),
        (
            "multiple init containers fit",
            init_pod(usage(1, 1), usage(1, 1), usage(1, 1)),
            usage(9, 19),
            [],
        ),
        ("both resources fit", usage(1, 1), usage(5, 5), []),
        ("one resource memory fits", usage(2, 1), usage(9, 5), [insufficient("cpu", 2, 9, 10)]),
        ("one resource cpu fits", usage(1, 2), usage(5, 19), [insufficient("memory", 2, 19, 20)]),
        ("equal edge case", usage(5, 1), usage(5, 19), []),
        (
            "equal edge case for init container",
            init_pod(usage(4, 1), usage(5, 1)),
            usage(5, 19),
            [],
        ),
        ("extended resource fits", usage(ext_a=1), usage(), []),
        ("extended resource fits for init container", init_pod(pod(), usage(ext_a=1)), usage(), []),
        (
            "extended resource capacity enforced",
            usage(1, 1, ext_a=10),
            usage(ext_a=0),
            [insufficient(EXT_A, 10, 0, 5)],
        ),
        (
            "extended resource capacity enforced for init container",
            init_pod(pod(), usage(1, 1, ext_a=10)),
            usage(ext_a=0),
            [insufficient(EXT_A, 10, 0, 5)],
        ),
        (
            "extended resource allocatable enforced",
            usage(1, 1, ext_a=1),
            usage(ext_a=5),
            [insufficient(EXT_A, 1, 5, 5)],
        ),
        (
            "extended resource allocatable enforced for multiple containers",
            pod(
                container({"cpu": "1m", "memory": 1, EXT_A: 3}),
                container({"cpu": "1m", "memory": 1, EXT_A: 3}),
            ),
            usage(ext_a=2),
            [insufficient(EXT_A, 6, 2, 5)],
        ),
        (
            "extended resource allocatable admits multiple init containers",
            init_pod(pod(), usage(1, 1, ext_a=3), usage(1, 1, ext_a=3)),
            usage(ext_a=2),
            [],
        ),
        (
            "extended resource allocatable enforced for multiple init containers",
            init_pod(pod(), usage(1, 1, ext_a=6), usage(1, 1, ext_a=3)),
            usage(ext_a=2),
            [insufficient(EXT_A, 6, 2, 5)],
        ),
        (
            "extended resource allocatable enforced for unknown resource",
            usage(1, 1, ext_b=1),
            usage(),
            [insufficient(EXT_B, 1, 0, 0)],
        ),
        (
            "kubernetes.io resource capacity enforced",
            usage(1, 1, k8s_a=10),
            usage(),
            [insufficient(K8S_A, 10, 0, 0)],
        ),
        (
            "kubernetes.io resource capacity enforced for init container",
            init_pod(pod(), usage(1, 1, k8s_b=10)),
            usage(),
            [insufficient(K8S_B, 10, 0, 0)],
        ),
        (
            "hugepages resource capacity enforced",
            usage(1, 1, huge_a=10),
            usage(huge_a=0),
            [insufficient(HUGE_A, 10, 0, 5)],
        ),
        (
            "hugepages resource allocatable enforced for multiple containers",
            pod(
                container({"cpu": "1m", "memory": 1, HUGE_A: 3}),
                container({"cpu": "1m", "memory": 1, HUGE_A: 3}),
            ),
            usage(huge_a=2),
            [insufficient(HUGE_A, 6, 2, 5)],
        ),
        (
            "resources + pod overhead fits",
            pod(container({"cpu": "1m", "memory": 1}), overhead={"cpu": "3m", "memory": "13"}),
            usage(5, 5),
            [],
        ),
        (
            "requests + overhead does not fit for memory",
            pod(container({"cpu": "1m", "memory": 1}), overhead={"cpu": "1m", "memory": "15"}),
            usage(5, 5),
            [insufficient("memory", 16, 5, 20)],
        ),
        (
            "skip checking extended resource request with quantity zero",
            usage(1, 1, ext_a=0),
            usage(ext_a=6),
            [],
        ),
        (
            "a sidecar counts beside the regular containers",
            pod(container({"cpu": "4m"}), init=(container({"cpu": "2m"}, sidecar=True),)),
            usage(5),
            [insufficient("cpu", 6, 5, 10)],
        ),
    ],
)
def test_enough_requests(
    label: str, pod_: Pod, existing: Pod, expected: list[InsufficientResource]
) -> None:
    assert fit(pod_, existing) == expected, label


def predicate_admit(pod: Pod, others: Sequence[Pod], node: NodeInfo, **gates: bool) -> Any:
    """The predicate steps of the live admission chain (pods/admission.py), without the
    supplemental-groups check it puts between them."""
    return os_rejection(pod, node) or filter_rejection(pod, others, node, **gates)


def test_too_many_pods() -> None:
    got = fits_request(Resources(), Resources(), Resources(pods=3), 3)
    assert got == [insufficient("pods", 1, 3, 3)]
    assert got[0].reason == "OutOfpods"
    assert (
        got[0].message
        == "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"
    )


def test_dra_extended_resources_skip_what_the_node_lacks() -> None:
    # DRAExtendedResource (beta, on): without a device plugin offering it, a scalar
    # resource is DRA's to allocate; one the node offers is still counted.
    request = Resources(scalar={EXT_B: 1, EXT_A: 9})
    allocatable = Resources(pods=10, scalar={EXT_A: 5})
    assert fits_request(request, Resources(), allocatable, 0) == [insufficient(EXT_A, 9, 0, 5)]


def test_dra_leaves_alone_only_what_the_node_does_not_list() -> None:
    # The node lists every hugepage size it has, 0 when none are reserved: a request for
    # one is counted (OutOfhugepages-2Mi), never handed to DRA as if the node lacked it.
    request = Resources(scalar={HUGE_A: 20 << 20})
    allocatable = Resources(pods=10, scalar={HUGE_A: 0})
    got = fits_request(request, Resources(), allocatable, 0)
    assert got == [insufficient(HUGE_A, 20 << 20, 0, 0)]
    assert got[0].reason == f"OutOf{HUGE_A}"


@pytest.mark.parametrize(
    ("requests", "limits", "allocatable", "kept_requests"),
    [
        ({}, {"foo.com/bar": "1"}, {"foo.com/baz": "1"}, {}),  # limits are left alone
        ({"foo.com/bar": "1"}, {}, {"foo.com/bar": "1"}, {"foo.com/bar": "1"}),
        ({"foo.com/bar": "1"}, {}, {"foo.com/baz": "1"}, {}),
        ({"foo.com/bar": "1", "cpu": "1"}, {}, {}, {"cpu": "1"}),
    ],
)
def test_remove_missing_extended_resources(
    requests: dict[str, str],
    limits: dict[str, str],
    allocatable: dict[str, str],
    kept_requests: dict[str, str],
) -> None:
    c = container(dict(requests), limits=limits)
    got = remove_missing_extended_resources(pod(c, init=(c,)), allocatable)
    for each in (*got.spec.containers, *got.spec.init_containers):
        assert each.resources is not None
        assert dict(each.resources.requests) == kept_requests
        assert dict(each.resources.limits) == limits


# -- the general filter (TestGeneralPredicates) ---------------------------------------------

NODE = NodeInfo(name="machine1", allocatable={"cpu": "10m", "memory": "20", "pods": "32"})
STATIC = {"kubernetes.io/config.source": "file"}


def test_general_predicates() -> None:
    assert general_filter(pod(), [usage(9, 19)], NODE) == []
    assert general_filter(usage(8, 10), [usage(5, 19)], NODE) == [
        insufficient("cpu", 8, 5, 10),
        insufficient("memory", 10, 19, 20),
    ]
    assert general_filter(pod(node_name="machine2"), [], NODE) == [
        PredicateFailure("NodeName", "node(s) didn't match the requested node name")
    ]
    with_port = pod(container(ports=(ContainerPort(container_port=80, host_port=123),)))
    assert general_filter(with_port, [with_port], NODE) == [
        PredicateFailure("NodePorts", "node(s) didn't have free ports for the requested pod ports")
    ]


def test_taints_in_the_general_filter() -> None:
    tainted = NodeInfo(
        name="machine1",
        allocatable=NODE.allocatable,
        taints=(Taint(key="foo", effect="NoSchedule"), Taint(key="bar", effect="NoExecute")),
    )
    tolerant = pod(tolerations=(Toleration(key="foo"), Toleration(key="bar")))
    assert general_filter(tolerant, [], tainted) == []  # taint/toleration match
    no_schedule_only = NodeInfo(
        name="m", allocatable=NODE.allocatable, taints=(Taint(key="foo", effect="NoSchedule"),)
    )
    assert general_filter(pod(), [], no_schedule_only) == []  # the kubelet minds NoExecute only
    prefer = NodeInfo(
        name="m",
        allocatable=NODE.allocatable,
        taints=(Taint(key="baz", effect="PreferNoSchedule"),),
    )
    assert general_filter(pod(), [], prefer) == []
    assert general_filter(pod(), [], tainted) == [
        PredicateFailure("TaintToleration", "node(s) had taints that the pod didn't tolerate")
    ]
    assert general_filter(pod(annotations=STATIC), [], tainted) == []  # static pods ignore taints


# -- OS (TestRejectPodAdmissionBasedOnOSSelector / OSField) --------------------------------


@pytest.mark.parametrize(
    ("pod_label", "node_label", "rejected"),
    [
        ("linux", "linux", False),
        ("linux", "dummyOS", False),  # the node's label is put right: the OS is linux
        ("dummyOS", "dummyOS", True),
        (None, "dummyOS", False),
    ],
)
def test_os_label(pod_label: str | None, node_label: str, rejected: bool) -> None:
    node = NodeInfo(name="n", labels={"kubernetes.io/os": node_label}, allocatable={"pods": "10"})
    labels = {"kubernetes.io/os": pod_label} if pod_label else {}
    got = predicate_admit(pod(labels=labels), [], node)
    expected = Rejection(
        "PodOSSelectorNodeLabelDoesNotMatch",
        "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
    )
    assert got == (expected if rejected else None)


@pytest.mark.parametrize(("os", "rejected"), [("linux", False), ("dummyOS", True), (None, False)])
def test_os_field(os: str | None, rejected: bool) -> None:
    node = NodeInfo(name="n", allocatable={"pods": "10"})
    got = predicate_admit(pod(os=os), [], node)
    expected = Rejection(
        "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"
    )
    assert got == (expected if rejected else None)


def test_node_selector_on_the_os_label_is_node_affinity() -> None:
    # A selector on kubernetes.io/os the node does not match is refused.
    node = NodeInfo(name="n", labels={"kubernetes.io/os": "linux"}, allocatable={"pods": "10"})
    got = predicate_admit(pod(node_selector={"kubernetes.io/os": "windows"}), [], node)
    assert got == Rejection(
        "NodeAffinity",
        "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
    )
    assert predicate_admit(pod(node_selector={"kubernetes.io/os": "linux"}), [], node) is None


# -- the handler's reasons and messages -------------------------------------------------------


def test_out_of_cpu_message() -> None:
    node = NodeInfo(name="n", allocatable={"cpu": "2", "memory": "4Gi", "pods": "110"})
    got = predicate_admit(pod(container({"cpu": "2"})), [pod(container({"cpu": "500m"}))], node)
    assert got == Rejection(
        "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 2000, used: 500, capacity: 2000",
    )


@pytest.mark.parametrize(
    ("requests", "reason", "message"),
    [
        (
            {"memory": "5Gi"},
            "OutOfmemory",
            "Node didn't have enough resource: memory, requested: 5368709120, used: 0, "
            "capacity: 4294967296",
        ),
        (
            {"ephemeral-storage": "20Gi"},
            "OutOfephemeral-storage",
            "Node didn't have enough resource: ephemeral-storage, requested: 21474836480, "
            "used: 0, capacity: 10737418240",
        ),
        (
            {"hugepages-2Mi": "4Mi"},
            "OutOfhugepages-2Mi",
            "Node didn't have enough resource: hugepages-2Mi, requested: 4194304, used: 0, "
            "capacity: 2097152",
        ),
        (
            {"example.com/gpu": "2"},
            "OutOfexample.com/gpu",
            "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1",
        ),
    ],
)
def test_out_of_resource_reasons(requests: dict[str, str | int], reason: str, message: str) -> None:
    node = NodeInfo(
        name="n",
        allocatable={
            "cpu": "2",
            "memory": "4Gi",
            "pods": "110",
            "ephemeral-storage": "10Gi",
            "hugepages-2Mi": "2Mi",
            "example.com/gpu": "1",
        },
    )
    assert predicate_admit(pod(container(requests)), [], node) == Rejection(reason, message)


def test_out_of_pods_first() -> None:
    node = NodeInfo(name="n", allocatable={"cpu": "1", "pods": "1"})
    got = predicate_admit(pod(container({"cpu": "2"})), [pod()], node)
    assert got is not None and got.reason == "OutOfpods"


def test_unknown_extended_resource_is_admitted() -> None:
    # A cluster-level extended resource the node does not list is not the kubelet's to refuse.
    node = NodeInfo(name="n", allocatable={"cpu": "1", "pods": "10"})
    assert predicate_admit(pod(container({"example.com/license": "1"})), [], node) is None


def test_bad_quantity_is_an_unexpected_admission_error() -> None:
    node = NodeInfo(name="n", allocatable={"cpu": "1", "pods": "10"})
    got = predicate_admit(pod(container({"cpu": "lots"})), [], node)
    assert got is not None and got.reason == "UnexpectedAdmissionError"
    assert "lots" in got.message


# -- node affinity (nodeaffinity plugin tests) ------------------------------------------------


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


@pytest.mark.parametrize(
    ("label", "selector", "affinity", "labels", "node_name", "matches"),
    [
        ("missing labels", {"foo": "bar"}, None, {}, "n", False),
        ("same labels", {"foo": "bar"}, None, {"foo": "bar"}, "n", True),
        (
            "node labels are superset",
            {"foo": "bar"},
            None,
            {"foo": "bar", "baz": "blah"},
            "n",
            True,
        ),
        ("node labels are subset", {"foo": "bar", "baz": "blah"}, None, {"foo": "bar"}, "n", False),
        (
            "In that matches",
            {},
            required({"matchExpressions": [expr("foo", "In", "bar", "value2")]}),
            {"foo": "bar"},
            "n",
            True,
        ),
        (
            "Gt that matches",
            {},
            required({"matchExpressions": [expr("kernel-version", "Gt", "0204")]}),
            {"kernel-version": "0206"},
            "n",
            True,
        ),
        (
            "Lt that does not match",
            {},
            required({"matchExpressions": [expr("kernel-version", "Lt", "0204")]}),
            {"kernel-version": "0206"},
            "n",
            False,
        ),
        (
            "Gt on a label that is not a number",
            {},
            required({"matchExpressions": [expr("v", "Gt", "1")]}),
            {"v": "abc"},
            "n",
            False,
        ),
        (
            "NotIn that matches",
            {},
            required({"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]}),
            {"mem-type": "DDR3"},
            "n",
            True,
        ),
        (
            "NotIn on a missing label",
            {},
            required({"matchExpressions": [expr("mem-type", "NotIn", "DDR")]}),
            {},
            "n",
            True,
        ),
        (
            "Exists",
            {},
            required({"matchExpressions": [expr("GPU", "Exists")]}),
            {"GPU": "NVIDIA-GRID-K1"},
            "n",
            True,
        ),
        (
            "DoesNotExist",
            {},
            required({"matchExpressions": [expr("GPU", "DoesNotExist")]}),
            {"GPU": "x"},
            "n",
            False,
        ),
        (
            "In that does not match",
            {},
            required({"matchExpressions": [expr("foo", "In", "value1", "value2")]}),
            {"foo": "bar"},
            "n",
            False,
        ),
        ("empty nodeSelectorTerms match nothing", {}, required(), {"foo": "bar"}, "n", False),
        (
            "an empty term matches nothing",
            {},
            required({"matchExpressions": []}),
            {"foo": "bar"},
            "n",
            False,
        ),
        ("no affinity", {}, None, {"foo": "bar"}, "n", True),
        ("affinity without a node selector", {}, {"nodeAffinity": {}}, {"foo": "bar"}, "n", True),
        (
            "expressions ANDed, matching",
            {},
            required(
                {"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]}
            ),
            {"GPU": "NVIDIA-GRID-K1"},
            "n",
            True,
        ),
        (
            "expressions ANDed, not matching",
            {},
            required(
                {"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")]}
            ),
            {"GPU": "NVIDIA-GRID-K1"},
            "n",
            False,
        ),
        (
            "terms ORed",
            {},
            required(
                {"matchExpressions": [expr("foo", "In", "bar", "value2")]},
                {"matchExpressions": [expr("diffkey", "In", "wrong", "value2")]},
            ),
            {"foo": "bar"},
            "n",
            True,
        ),
        (
            "affinity and nodeSelector both satisfied",
            {"foo": "bar"},
            required({"matchExpressions": [expr("foo", "Exists")]}),
            {"foo": "bar"},
            "n",
            True,
        ),
        (
            "nodeSelector not satisfied",
            {"foo": "bar"},
            required({"matchExpressions": [expr("foo", "Exists")]}),
            {"foo": "barrrrrr"},
            "n",
            False,
        ),
        (
            "an invalid value matches nothing",
            {},
            required({"matchExpressions": [expr("foo", "NotIn", "invalid value: ___@#$%^")]}),
            {"foo": "bar"},
            "n",
            False,
        ),
        (
            "an unknown operator matches nothing",
            {},
            required({"matchExpressions": [expr("foo", "Near", "bar")]}),
            {"foo": "bar"},
            "n",
            False,
        ),
        (
            "Gt needs one integer",
            {},
            required({"matchExpressions": [expr("v", "Gt", "1", "2")]}),
            {"v": "5"},
            "n",
            False,
        ),
        (
            "matchFields on the node name",
            {},
            required({"matchFields": [expr("metadata.name", "In", "node_1")]}),
            {},
            "node_1",
            True,
        ),
        (
            "matchFields on another node",
            {},
            required({"matchFields": [expr("metadata.name", "In", "node_1")]}),
            {},
            "node_2",
            False,
        ),
        (
            "matchFields and matchExpressions ANDed",
            {},
            required(
                {
                    "matchFields": [expr("metadata.name", "In", "node_1")],
                    "matchExpressions": [expr("foo", "In", "bar")],
                }
            ),
            {"foo": "bar"},
            "node_2",
            False,
        ),
        (
            "matchFields and matchExpressions ORed",
            {},
            required(
                {"matchFields": [expr("metadata.name", "In", "node_1")]},
                {"matchExpressions": [expr("foo", "In", "bar")]},
            ),
            {"foo": "bar"},
            "node_2",
            True,
        ),
        (
            "matchFields NotIn",
            {},
            required({"matchFields": [expr("metadata.name", "NotIn", "node_1")]}),
            {},
            "node_2",
            True,
        ),
        (
            "matchFields needs one value",
            {},
            required({"matchFields": [expr("metadata.name", "In", "node_1", "node_2")]}),
            {},
            "node_1",
            False,
        ),
    ],
)
def test_node_affinity(
    label: str,
    selector: dict[str, str],
    affinity: dict[str, Any] | None,
    labels: dict[str, str],
    node_name: str,
    matches: bool,
) -> None:
    node = NodeInfo(name=node_name, labels=labels)
    assert node_affinity_matches(pod(node_selector=selector, affinity=affinity), node) is matches, (
        label
    )


# -- host ports (nodeports plugin tests) ------------------------------------------------------


def ports(*specs: str) -> Pod:
    """``"UDP/127.0.0.1/8080"`` → a pod holding that host port."""
    out = []
    for spec in specs:
        protocol, ip, port = spec.split("/")
        out.append(
            ContainerPort(
                container_port=int(port), host_port=int(port), protocol=protocol, host_ip=ip
            )
        )
    return pod(container(ports=tuple(out)))


@pytest.mark.parametrize(
    ("want", "existing", "fits"),
    [
        ((), (), True),
        (("UDP/127.0.0.1/8080",), ("UDP/127.0.0.1/9090",), True),
        (("UDP/127.0.0.1/8080",), ("UDP/127.0.0.1/8080",), False),
        (("TCP/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), False),
        (("TCP/127.0.0.1/8080",), ("TCP/127.0.0.2/8080",), True),
        (("UDP/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), True),
        (("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/8080",), False),
        (
            ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
            ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"),
            False,
        ),
        (("TCP/0.0.0.0/8001",), ("TCP/127.0.0.1/8001",), False),
        (("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"), ("TCP/127.0.0.1/8001",), False),
        (("TCP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001",), False),
        (("UDP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001",), True),
        (("UDP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"), False),
    ],
)
def test_node_ports(want: tuple[str, ...], existing: tuple[str, ...], fits: bool) -> None:
    assert ports_fit(ports(*want), [ports(*existing)]) is fits


def test_sidecar_host_ports_count_and_plain_init_ones_do_not() -> None:
    port = (ContainerPort(container_port=80, host_port=8080),)
    sidecar = pod(container(), init=(container(ports=port, sidecar=True, name="s"),))
    plain_init = pod(container(), init=(container(ports=port, name="i"),))
    regular = pod(container(ports=port))
    assert not ports_fit(regular, [sidecar])
    assert ports_fit(regular, [plain_init])
    assert ports_fit(
        pod(container(ports=(ContainerPort(container_port=80),))), [regular]
    )  # no hostPort


def test_a_pod_without_host_ports_does_not_look_at_the_others() -> None:
    """Admitting each pod of a ramp must not walk every other pod's ports."""

    def others() -> Iterator[Pod]:
        raise AssertionError("the others' ports were read")
        yield  # pragma: no cover

    assert ports_fit(pod(container()), others())


# -- taints and tolerations -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (
            Toleration(key="foo", operator="Equal", value="bar", effect="NoExecute"),
            Taint(key="foo", value="bar", effect="NoExecute"),
            True,
        ),
        (
            Toleration(key="foo", value="bar"),
            Taint(key="foo", value="bar", effect="NoExecute"),
            True,
        ),
        (
            Toleration(key="foo", value="baz"),
            Taint(key="foo", value="bar", effect="NoExecute"),
            False,
        ),
        (
            Toleration(key="foo", operator="Exists"),
            Taint(key="foo", value="any", effect="NoExecute"),
            True,
        ),
        (Toleration(operator="Exists"), Taint(key="anything", effect="NoExecute"), True),
        (
            Toleration(key="foo", operator="Exists", effect="NoSchedule"),
            Taint(key="foo", effect="NoExecute"),
            False,
        ),
        (Toleration(key="other", operator="Exists"), Taint(key="foo", effect="NoExecute"), False),
        (
            Toleration(key="foo", operator="Gt", value="5"),
            Taint(key="foo", value="7", effect="NoExecute"),
            False,
        ),
        (Toleration(key="foo", operator="Bogus"), Taint(key="foo", effect="NoExecute"), False),
    ],
)
def test_tolerates(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    assert tolerates(toleration, taint) is tolerated


@pytest.mark.parametrize(
    ("op", "toleration_value", "taint_value", "tolerated"),
    [
        ("Gt", "5", "7", True),
        ("Gt", "5", "5", False),
        ("Lt", "5", "3", True),
        ("Lt", "5", "05", False),  # no leading zeros
        ("Lt", "x", "3", False),
    ],
)
def test_comparison_operators_with_the_gate(
    op: str, toleration_value: str, taint_value: str, tolerated: bool
) -> None:
    toleration = Toleration(key="k", operator=op, value=toleration_value)
    taint = Taint(key="k", value=taint_value, effect="NoExecute")
    assert tolerates(toleration, taint, comparison_operators=True) is tolerated


def test_untolerated_taint_only_looks_at_the_chosen_effects() -> None:
    taints = (Taint(key="a", effect="NoSchedule"), Taint(key="b", effect="NoExecute"))
    assert untolerated_taint(taints, ()) == taints[1]
    assert untolerated_taint(taints, (Toleration(key="b", operator="Exists"),)) is None
    assert untolerated_taint(taints, (), effects=("NoSchedule",)) == taints[0]


def test_affinity_failures() -> None:
    needs_foo = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "Exists"}]}]
            }
        }
    }
    failures = general_filter(pod(annotations=STATIC, affinity=needs_foo), [], NODE)
    assert failures == [
        PredicateFailure("NodeAffinity", "node(s) didn't match Pod's node affinity/selector")
    ]
    both = general_filter(
        pod(annotations=STATIC, affinity=needs_foo, node_name="some-node-name"), [], NODE
    )
    assert [f.reason for f in both] == ["NodeAffinity", "NodeName"]
    labelled = NodeInfo(name="machine1", labels={"foo": "bar"}, allocatable=NODE.allocatable)
    assert general_filter(pod(annotations=STATIC, affinity=needs_foo), [], labelled) == []
