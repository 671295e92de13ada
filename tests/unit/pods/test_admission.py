"""Pod admission: each handler, and their order (upstream's NewMainKubelet order)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kubelet.api import (
    Container,
    ContainerPort,
    ContainerRestartRule,
    Pod,
    PodStatus,
    Quantity,
    ResourceRequirements,
    Taint,
    Toleration,
    from_wire,
    to_wire,
)
from kubelet.api.pod import ContainerRestartRuleOnExitCodes, PodSecurityContext, SecurityContext
from kubelet.decisions import SysctlAllowlist
from kubelet.pods import NodeInfo
from kubelet.pods.admission import AdmissionFacts, Rejection, admit, rejection_message
from kubelet.testing.builders import make_pod

NO_APPARMOR = "AppArmor is not enabled on the host"


def pod(
    uid: str = "u1",
    *,
    sysctls: tuple[str, ...] = (),
    policy: str | None = None,
    apparmor: str | None = None,
    runtime_class: str | None = None,
    phase: str = "",
) -> Pod:
    sc = PodSecurityContext(
        sysctls=tuple({"name": s, "value": "1"} for s in sysctls),
        supplemental_groups_policy=policy,
    )
    container = Container(
        name="c",
        security_context=SecurityContext(app_armor_profile={"type": apparmor})
        if apparmor
        else None,
    )
    return make_pod(
        container,
        name=uid,
        uid=uid,
        security_context=sc,
        runtime_class_name=runtime_class,
        status=PodStatus(phase=phase),
    )


FACTS = AdmissionFacts(
    max_pods=2,
    sysctls=SysctlAllowlist.for_node((), (6, 1)),
    apparmor_error=NO_APPARMOR,
    supplemental_groups_policy=False,
    runtime_classes=False,
)


@pytest.mark.parametrize(
    ("the_pod", "others", "reason", "message"),
    [
        (pod(), 0, None, None),
        (
            pod(sysctls=("kernel.panic",)),
            0,
            "SysctlForbidden",
            'forbidden sysctl: "kernel.panic" not allowlisted',
        ),
        (
            pod(policy="Strict"),
            0,
            "SupplementalGroupsPolicyNotSupported",
            "SupplementalGroupsPolicy=Strict is not supported in this node",
        ),
        (pod(policy="Merge"), 0, None, None),
        (
            pod(),
            2,
            "OutOfpods",
            "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2",
        ),
        (
            pod(apparmor="RuntimeDefault"),
            0,
            "AppArmor",
            "Cannot enforce AppArmor: AppArmor is not enabled on the host",
        ),
        (pod(apparmor="Unconfined"), 0, None, None),
        (
            pod(runtime_class="gvisor"),
            0,
            "RuntimeClassUnavailable",
            'runtimeClassName "gvisor" cannot be resolved: the kubelet runs without an API '
            "server (standalone), where RuntimeClass objects live",
        ),
        # a finished pod is never admitted again (nor rejected again)
        (pod(sysctls=("kernel.panic",), phase="Failed"), 0, None, None),
    ],
)
def test_each_handler(the_pod: Pod, others: int, reason: str | None, message: str | None) -> None:
    admitted = [pod(f"other-{i}") for i in range(others)]
    expected = None if reason is None else Rejection(reason, message or "")
    assert admit(the_pod, admitted, FACTS) == expected


def test_handlers_run_in_upstreams_order() -> None:
    """sysctls, then supplementalGroupsPolicy, pod count, AppArmor, RuntimeClass."""
    everything = pod(
        sysctls=("kernel.panic",), policy="Strict", apparmor="RuntimeDefault", runtime_class="x"
    )
    full = [pod("a"), pod("b")]
    order = []
    facts = FACTS
    candidate = everything
    for _ in range(5):
        rejection = admit(candidate, full, facts)
        assert rejection is not None
        order.append(rejection.reason)
        if rejection.reason == "SysctlForbidden":
            candidate = attrs.evolve(
                candidate,
                spec=attrs.evolve(
                    candidate.spec,
                    security_context=attrs.evolve(candidate.spec.security_context, sysctls=()),
                ),
            )
        elif rejection.reason == "SupplementalGroupsPolicyNotSupported":
            facts = attrs.evolve(facts, supplemental_groups_policy=True)
        elif rejection.reason == "OutOfpods":
            full = []
        elif rejection.reason == "AppArmor":
            facts = attrs.evolve(facts, apparmor_error=None)
    assert order == [
        "SysctlForbidden",
        "SupplementalGroupsPolicyNotSupported",
        "OutOfpods",
        "AppArmor",
        "RuntimeClassUnavailable",
    ]
    assert admit(candidate, full, attrs.evolve(facts, runtime_classes=True)) is None


def test_rejection_message() -> None:
    assert rejection_message(Rejection("SysctlForbidden", "forbidden sysctl: x")) == (
        "Pod was rejected: forbidden sysctl: x"
    )


# -- the predicates against a node ----------------------------------------------------------

NODE = NodeInfo(
    name="node1",
    labels={"kubernetes.io/os": "linux", "kubernetes.io/hostname": "node1", "zone": "a"},
    taints=(Taint(key="dedicated", value="db", effect="NoExecute"),),
    allocatable={"cpu": "2", "memory": "1Gi", "pods": "3", "ephemeral-storage": "10Gi"},
)
NODE_FACTS = attrs.evolve(FACTS, node=NODE, supplemental_groups_policy=True, apparmor_error=None)
TOLERATES = (Toleration(key="dedicated", operator="Exists", effect="NoExecute"),)


def sized(uid: str, cpu: str = "", memory: str = "", **spec: Any) -> Pod:
    requests = {k: Quantity(v) for k, v in (("cpu", cpu), ("memory", memory)) if v}
    container = Container(name="c", resources=ResourceRequirements(requests=requests))
    built = make_pod(container, name=uid, uid=uid)
    fields = {"node_name": "node1", "tolerations": TOLERATES, **spec}
    return attrs.evolve(built, spec=attrs.evolve(built.spec, **fields))


@pytest.mark.parametrize(
    ("the_pod", "reason", "message"),
    [
        (sized("p", "500m", "256Mi"), None, None),
        (
            sized("p", "1600m"),
            "OutOfcpu",
            "Node didn't have enough resource: cpu, requested: 1600, used: 500, capacity: 2000",
        ),
        (
            sized("p", memory="900Mi"),
            "OutOfmemory",
            "Node didn't have enough resource: memory, requested: 943718400, used: 134217728, "
            "capacity: 1073741824",
        ),
        (
            sized("p", node_selector={"zone": "b"}),
            "NodeAffinity",
            "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
        ),
        (
            sized("p", node_name="node2"),
            "NodeName",
            "Predicate NodeName failed: node(s) didn't match the requested node name",
        ),
        (
            sized("p", tolerations=()),
            "TaintToleration",
            "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
        ),
        (
            sized("p", os={"name": "windows"}),
            "PodOSNotSupported",
            "Failed to admit pod as the OS field doesn't match node OS",
        ),
    ],
)
def test_predicates_against_the_node(the_pod: Pod, reason: str | None, message: str | None) -> None:
    admitted = [sized("other", "500m", "128Mi")]
    expected = None if reason is None else Rejection(reason, message or "")
    assert admit(the_pod, admitted, NODE_FACTS) == expected


def test_the_node_allocatable_pods_is_the_pod_count() -> None:
    admitted = [sized(f"o{i}") for i in range(3)]
    assert admit(sized("p"), admitted, NODE_FACTS) == Rejection(
        "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"
    )


def test_host_port_conflict_is_node_ports() -> None:
    port = ContainerPort(container_port=80, host_port=8080, protocol="TCP")
    web = sized("web")
    web = attrs.evolve(
        web,
        spec=attrs.evolve(
            web.spec, containers=(attrs.evolve(web.spec.containers[0], ports=(port,)),)
        ),
    )
    other = attrs.evolve(web, metadata=attrs.evolve(web.metadata, uid="other", name="other"))
    rejection = admit(web, [other], NODE_FACTS)
    assert rejection is not None and rejection.reason == "NodePorts"


def test_os_then_supplemental_groups_then_resources() -> None:
    """Upstream's predicate handler: pod OS, supplementalGroupsPolicy, the general filter."""
    strict = PodSecurityContext(supplemental_groups_policy="Strict")
    facts = attrs.evolve(NODE_FACTS, supplemental_groups_policy=False)
    everything = sized("p", "3", os={"name": "windows"}, security_context=strict)
    assert admit(everything, [], facts).reason == "PodOSNotSupported"  # type: ignore[union-attr]
    no_os = attrs.evolve(everything, spec=attrs.evolve(everything.spec, os=None))
    assert admit(no_os, [], facts).reason == "SupplementalGroupsPolicyNotSupported"  # type: ignore[union-attr]
    assert admit(no_os, [], NODE_FACTS).reason == "OutOfcpu"  # type: ignore[union-attr]
    # sysctls come before the predicates
    labelled = attrs.evolve(
        no_os,
        metadata=attrs.evolve(no_os.metadata, labels={"kubernetes.io/os": "windows"}),
        spec=attrs.evolve(
            no_os.spec,
            security_context=attrs.evolve(
                strict, sysctls=({"name": "kernel.panic", "value": "1"},)
            ),
        ),
    )
    assert admit(labelled, [], facts).reason == "SysctlForbidden"  # type: ignore[union-attr]
    unsysctled = attrs.evolve(labelled, spec=attrs.evolve(labelled.spec, security_context=strict))
    assert admit(unsysctled, [], facts).reason == "PodOSSelectorNodeLabelDoesNotMatch"  # type: ignore[union-attr]


def test_overhead_and_sidecars_count_as_upstream() -> None:
    """Requests: max(sum of regular containers + sidecars, any init container + the
    sidecars before it) + overhead."""
    sidecar = Container(
        name="side",
        restart_policy="Always",
        resources=ResourceRequirements(requests={"cpu": Quantity("500m")}),
    )
    init = Container(name="init", resources=ResourceRequirements(requests={"cpu": Quantity("1")}))
    p = sized("p", "600m", overhead={"cpu": Quantity("250m")})
    p = attrs.evolve(p, spec=attrs.evolve(p.spec, init_containers=(sidecar, init)))
    # max(600m + 500m, 500m + 1) + 250m = 1750m; with 500m used, 2 cpus leave 1500m
    assert admit(p, [sized("o", "500m")], NODE_FACTS) == Rejection(
        "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 1750, used: 500, capacity: 2000",
    )


def test_node_pressure_is_checked_first() -> None:
    """Upstream's eviction admit handler comes before every other one."""
    everything = pod(sysctls=("kernel.panic",), policy="Strict")
    facts = attrs.evolve(FACTS, pressure=("DiskPressure",))
    assert admit(everything, [], facts) == Rejection(
        "Evicted", "The node had condition: [DiskPressure]. "
    )
    memory = attrs.evolve(FACTS, pressure=("MemoryPressure",))
    assert admit(pod(), [], memory) == Rejection(  # BestEffort
        "Evicted", "The node had condition: [MemoryPressure]. "
    )
    static = attrs.evolve(
        pod(),
        metadata=attrs.evolve(pod().metadata, annotations={"kubernetes.io/config.source": "file"}),
    )
    assert admit(static, [], facts) is None  # critical pods are always admitted


def test_a_pod_needing_an_undeclared_feature_is_refused() -> None:
    """Upstream's declared-features admission: a ``RestartAllContainers`` rule needs
    RestartAllContainersOnContainerExits, which this node does not declare."""
    rule = ContainerRestartRule(
        action="RestartAllContainers",
        exit_codes=ContainerRestartRuleOnExitCodes(operator="In", values=(42,)),
    )
    restarting = make_pod(
        Container(name="c", restart_policy="Never", restart_policy_rules=(rule,)), uid="r"
    )
    wire = from_wire(Pod, to_wire(restarting))
    assert wire.spec.containers[0].restart_policy_rules == (rule,)
    declaring = attrs.evolve(FACTS, declared_features=())
    rejection = admit(restarting, [], declaring)
    assert rejection == Rejection(
        "PodFeatureUnsupported",
        "Pod requires node features that are not available: RestartAllContainersOnContainerExits",
    )
    as_init = make_pod(Container(name="c"), init=restarting.spec.containers, uid="i")
    assert admit(as_init, [], declaring) == rejection
    # NodeDeclaredFeatures off: upstream would run the rule; this kubelet cannot, so it
    # refuses the pod all the same instead of ignoring the rule
    assert admit(restarting, [], FACTS) == rejection
    done = ("RestartAllContainersOnContainerExits",)
    assert admit(restarting, [], attrs.evolve(FACTS, declared_features=done)) is None
    assert admit(pod("plain"), [], declaring) is None
