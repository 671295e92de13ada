"""Pod admission: each handler, and their order (upstream's NewMainKubelet order)."""

from __future__ import annotations

import attrs
import pytest

from kubelet.api.pod import (
    Container,
    Pod,
    PodSecurityContext,
    PodStatus,
    SecurityContext,
)
from kubelet.decisions.sysctls import SysctlAllowlist
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
