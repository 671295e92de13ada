"""Pod admission: whether this node takes a new pod, decided before anything runs.

One pure function over the pod, the pods already admitted and the node's facts. The
handlers run in upstream's order (``NewMainKubelet``: eviction, sysctls, resource
allocation, the general predicates, AppArmor, node shutdown — the ones not built yet are
marked where they go); the first refusal wins. A refused pod is never started: the
caller records a Warning event with the reason and reports the pod ``Failed`` with
reason and message "Pod was rejected: <message>", as upstream's ``rejectPod`` does.

A pod already finished (Succeeded or Failed) is not admitted again, and checks about
starting (AppArmor) skip pods that already run, so a kubelet restart never rejects a
running pod for a check it passed before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from kubelet.api.pod import Pod
from kubelet.decisions import sysctls as sysctl_admission
from kubelet.decisions.qos import is_critical_pod, pod_qos
from kubelet.decisions.security import APPARMOR_REASON, apparmor_admission_error
from kubelet.decisions.sysctls import SysctlAllowlist
from kubelet.eviction import admission as eviction_admission

__all__ = [
    "OUT_OF_PODS",
    "RUNTIME_CLASS_UNAVAILABLE",
    "SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED",
    "AdmissionFacts",
    "Rejection",
    "admit",
    "rejection_message",
]

OUT_OF_PODS = "OutOfpods"
SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED = "SupplementalGroupsPolicyNotSupported"
RUNTIME_CLASS_UNAVAILABLE = "RuntimeClassUnavailable"
TERMINAL_PHASES = ("Succeeded", "Failed")


@attrs.frozen
class Rejection:
    """Why a pod was refused: a one-word reason and a message (upstream's words)."""

    reason: str
    message: str


@attrs.frozen
class AdmissionFacts:
    """What admission knows of the node; gathered by the caller, no I/O here."""

    max_pods: int = 110
    sysctls: SysctlAllowlist = attrs.field(factory=SysctlAllowlist.for_node)
    apparmor_error: str | None = None
    """why the host cannot enforce AppArmor (None: it can)"""
    supplemental_groups_policy: bool = False
    """whether the runtime supports ``supplementalGroupsPolicy: Strict``"""
    runtime_classes: bool = True
    """whether RuntimeClasses can be looked up (False: no API server, standalone)"""
    pressure: tuple[str, ...] = ()
    """the node's pressure conditions (the eviction manager's MemoryPressure, ...)"""


Handler = Callable[[Pod, Sequence[Pod], AdmissionFacts], Rejection | None]


def _eviction(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    refusal = eviction_admission.admit(
        pod, facts.pressure, is_critical=is_critical_pod, qos=pod_qos
    )
    return None if refusal is None else Rejection(refusal.reason, refusal.message)


def _sysctls(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    message = facts.sysctls.forbidden(pod)
    return None if message is None else Rejection(sysctl_admission.FORBIDDEN_REASON, message)


def _supplemental_groups_policy(
    pod: Pod, others: Sequence[Pod], facts: AdmissionFacts
) -> Rejection | None:
    sc = pod.spec.security_context
    if sc is None or sc.supplemental_groups_policy != "Strict":
        return None
    if facts.supplemental_groups_policy:
        return None
    return Rejection(
        SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED,
        "SupplementalGroupsPolicy=Strict is not supported in this node",
    )


def _pods_fit(pod: Pod, others: Sequence[Pod], facts: AdmissionFacts) -> Rejection | None:
    """The pod-count part of upstream's resource fit (cpu and memory join it later)."""
    used = len(others)
    if used + 1 > facts.max_pods:
        return Rejection(
            OUT_OF_PODS,
            f"Node didn't have enough resource: pods, requested: 1, used: {used}, "
            f"capacity: {facts.max_pods}",
        )
    return None


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


HANDLERS: tuple[Handler, ...] = (
    _eviction,
    _sysctls,
    # resource allocation (CPU, memory, devices managers) goes here
    # the general predicates, in upstream's order:
    _supplemental_groups_policy,
    _pods_fit,
    _apparmor,
    _runtime_class,
    # node shutdown goes last
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


def rejection_message(rejection: Rejection) -> str:
    """The pod status message of a rejected pod."""
    return f"Pod was rejected: {rejection.message}"
