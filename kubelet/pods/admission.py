"""Pod admission: whether this node takes a new pod, decided before anything runs.

One pure function over the pod, the pods already admitted and the node's facts. The
handlers run in upstream's order (``NewMainKubelet``: eviction, sysctls, resource
allocation, the predicates, AppArmor, declared features, node shutdown — the ones not built yet are
marked where they go); the first refusal wins. ``HANDLERS`` is that list: a new handler
is one function of (pod, others, facts) put in its place. The predicates are
``fit.py``'s: the pod's OS, the supplemental groups policy, then the general filter
(resources including the pod count, node affinity and selector, node name, host ports,
NoExecute taints). A refused pod is never started: the
caller records a Warning event with the reason and reports the pod ``Failed`` with
reason and message "Pod was rejected: <message>", as upstream's ``rejectPod`` does.

A pod already finished (Succeeded or Failed) is not admitted again, and checks about
starting (AppArmor) skip pods that already run, so a kubelet restart never rejects a
running pod for a check it passed before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from kubelet.api import Pod
from kubelet.decisions import (
    APPARMOR_REASON,
    SysctlAllowlist,
    apparmor_admission_error,
    is_critical_pod,
    pod_qos,
)
from kubelet.decisions import sysctls as sysctl_admission
from kubelet.eviction import admission as eviction_admission
from kubelet.node import declared

from . import fit
from .fit import NodeInfo
from .rejection import Rejection, rejection_message

__all__ = [
    "HANDLERS",
    "OUT_OF_PODS",
    "RUNTIME_CLASS_UNAVAILABLE",
    "SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED",
    "AdmissionFacts",
    "Handler",
    "NodeInfo",
    "Rejection",
    "ResizeAdmission",
    "ResourceAdmission",
    "admit",
    "rejection_message",
]

OUT_OF_PODS = "OutOfpods"  # reported by fit.py's resource check (allocatable pods)
SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED = "SupplementalGroupsPolicyNotSupported"
RUNTIME_CLASS_UNAVAILABLE = "RuntimeClassUnavailable"
TERMINAL_PHASES = ("Succeeded", "Failed")


ResourceAdmission = Callable[[Pod, Sequence[Pod]], "tuple[str, str] | None"]
ResizeAdmission = Callable[[Pod, Pod], "tuple[str, str] | None"]
"""(pod, as it runs) → (reason detail, message) of a resize the node can never apply"""
"""(pod, others) → None, or the (reason, message) of a resource manager's refusal"""


@attrs.frozen
class AdmissionFacts:
    """What admission knows of the node; gathered by the caller, no I/O here."""

    max_pods: int = 110
    """the pod count when ``node`` does not say (its allocatable ``pods`` wins)"""
    node: NodeInfo | None = None
    """the Node as the predicates read it (name, labels, taints, allocatable); None:
    only the pod count is checked"""
    pod_level_resources: bool = True
    """the PodLevelResources gate: pod-level requests count when set"""
    dra_extended_resource: bool = True
    """the DRAExtendedResource gate"""
    taint_comparison_operators: bool = False
    """the TaintTolerationComparisonOperators gate"""
    sysctls: SysctlAllowlist = attrs.field(factory=SysctlAllowlist.for_node)
    apparmor_error: str | None = None
    """why the host cannot enforce AppArmor (None: it can)"""
    supplemental_groups_policy: bool = False
    """whether the runtime supports ``supplementalGroupsPolicy: Strict``"""
    runtime_classes: bool = True
    """whether RuntimeClasses can be looked up (False: no API server, standalone)"""
    node_shutdown: tuple[str, str] | None = None
    """(reason, message) while the node shuts down: new pods are refused"""
    declared_features: tuple[str, ...] | None = None
    """``status.declaredFeatures`` (None: the NodeDeclaredFeatures gate is off)"""
    pressure: tuple[str, ...] = ()
    """the node's pressure conditions (the eviction manager's MemoryPressure, ...)"""
    resource_allocation: ResourceAdmission | None = None
    """the container manager's resource managers (``cm.ContainerManager.admit``)"""
    resize_admission: ResizeAdmission | None = None
    """the container manager's side of a resize (``cm.ContainerManager.admit_resize``)"""


Handler = Callable[[Pod, Sequence[Pod], AdmissionFacts], Rejection | None]


def _eviction(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    refusal = eviction_admission.admit(
        pod, facts.pressure, is_critical=is_critical_pod, qos=pod_qos
    )
    return None if refusal is None else Rejection(refusal.reason, refusal.message)


def _sysctls(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    message = facts.sysctls.forbidden(pod)
    return None if message is None else Rejection(sysctl_admission.FORBIDDEN_REASON, message)


def _resource_allocation(
    pod: Pod, others: Sequence[Pod], facts: AdmissionFacts
) -> Rejection | None:
    """Upstream's resource allocation handler: the container manager's resource managers
    (devices, CPU, memory, topology) allocate for the pod or refuse it."""
    if facts.resource_allocation is None:
        return None
    refusal = facts.resource_allocation(pod, others)
    return None if refusal is None else Rejection(*refusal)


def _supplemental_groups_policy(pod: Pod, facts: AdmissionFacts) -> Rejection | None:
    sc = pod.spec.security_context
    if sc is None or sc.supplemental_groups_policy != "Strict":
        return None
    if facts.supplemental_groups_policy:
        return None
    return Rejection(
        SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED,
        "SupplementalGroupsPolicy=Strict is not supported in this node",
    )


def _pod_count(others: Sequence[Pod], max_pods: int) -> Rejection | None:
    if len(others) + 1 <= max_pods:
        return None
    short = fit.InsufficientResource("pods", 1, len(others), max_pods)
    return Rejection(short.reason, short.message)


def _predicates(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    """Upstream's predicate handler: the OS checks, the supplemental groups policy, then
    the general filter (resources, affinity, node name, ports, taints). Without a node
    (tests of other parts) only the pod count is checked after the first two."""
    node = facts.node or NodeInfo(name=pod.spec.node_name)
    first = fit.os_rejection(pod, node) or _supplemental_groups_policy(pod, facts)
    if first is not None or facts.node is None:
        return first or _pod_count(others, facts.max_pods)
    return fit.filter_rejection(
        pod,
        others,
        node,
        pod_level_resources=facts.pod_level_resources,
        dra_extended_resource=facts.dra_extended_resource,
        comparison_operators=facts.taint_comparison_operators,
    )


def _apparmor(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    message = apparmor_admission_error(pod, facts.apparmor_error)
    return None if message is None else Rejection(APPARMOR_REASON, message)


def _runtime_class(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    """Not upstream's: a standalone upstream kubelet silently runs such a pod with the
    default handler. Here the pod is refused, since its isolation cannot be honoured."""
    name = pod.spec.runtime_class_name
    if not name or facts.runtime_classes:
        return None
    return Rejection(
        RUNTIME_CLASS_UNAVAILABLE,
        f'runtimeClassName "{name}" cannot be resolved: the kubelet runs without an API '
        "server (standalone), where RuntimeClass objects live",
    )


def _declared_features(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    message = declared.unsatisfied(pod, facts.declared_features)
    return None if message is None else Rejection(declared.UNSUPPORTED, message)


def _node_shutdown(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    return None if facts.node_shutdown is None else Rejection(*facts.node_shutdown)


HANDLERS: tuple[Handler, ...] = (
    _eviction,
    _sysctls,
    _resource_allocation,
    _predicates,
    _apparmor,
    _runtime_class,
    _declared_features,
    _node_shutdown,  # last, as upstream
)


def admit(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    """None when ``pod`` may run beside ``others`` (the pods admitted and still active),
    else the first handler's refusal."""
    if pod.status.phase in TERMINAL_PHASES:
        return None
    for handler in HANDLERS:
        rejection = handler(pod, others, facts)
        if rejection is not None:
            return rejection
    return None
