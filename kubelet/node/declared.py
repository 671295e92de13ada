"""``status.declaredFeatures`` (KEP-5328, gate ``NodeDeclaredFeatures``, beta and on in 1.36).

Upstream's kubelet asks the shared registry (component-helpers ``nodedeclaredfeatures``)
which features its gates and configuration give it, once at start-up, and reports the
sorted names; kube-apiserver and the scheduler read them (kube-apiserver passes a
WebSocket exec/attach/port-forward through to a node that declares
``ExtendWebSocketsToKubelet``, and translates it itself otherwise).

With its defaults a 1.36 kubelet declares ``ExtendWebSocketsToKubelet`` (its gate),
``GuaranteedQoSPodCPUResize`` (``cpuManagerPolicy: none``, or ``static`` with
``InPlacePodVerticalScalingExclusiveCPUs``), ``InPlacePodLevelResourcesVerticalScaling``
and ``RestartAllContainersOnContainerExits`` (their gates). This kubelet declares a
feature only when it does what the name promises: ``ExtendWebSocketsToKubelet`` when
the gate is on and its support entry says it is implemented (the port-forward tunnel
and the v5 exec/attach translation both); ``GuaranteedQoSPodCPUResize`` with
``InPlacePodVerticalScaling`` and ``cpuManagerPolicy: none`` (the static policy refuses
a Guaranteed pod's CPU resize: ``InPlacePodVerticalScalingExclusiveCPUs`` is not
implemented here); ``InPlacePodLevelResourcesVerticalScaling`` with its gate (the pod
cgroup is resized in place and the status reports the pod-level resources). The restart
rules' ``RestartAllContainers`` action is not implemented, so that one is never declared
(a scheduler then keeps pods that need it away, which is the point of the feature).

At admission, as upstream's kubelet, a pod that needs a feature the node does not declare
is refused: ``PodFeatureUnsupported``, ``Pod requires node features that are not
available: RestartAllContainersOnContainerExits`` (a restart rule with the
``RestartAllContainers`` action, which this kubelet would otherwise ignore).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubelet.api import Pod
from kubelet.config import (
    EXTEND_WEBSOCKETS_TO_KUBELET,
    GATE_SUPPORT,
    IMPLEMENTED,
    IN_PLACE_POD_VERTICAL_SCALING,
    NODE_DECLARED_FEATURES,
    RESTART_ALL_CONTAINERS,
    FeatureGates,
    Support,
)

EXTEND_WEBSOCKETS = EXTEND_WEBSOCKETS_TO_KUBELET
"""The declared feature of that name: the gate and the feature share it."""
RESTART_ALL = RESTART_ALL_CONTAINERS
RESTART_ALL_ACTION = "RestartAllContainers"
UNSUPPORTED = "PodFeatureUnsupported"
"""The admission reason for a pod that needs a feature the node does not declare."""

GUARANTEED_CPU_RESIZE = "GuaranteedQoSPodCPUResize"
IN_PLACE_RESIZE_GATE = IN_PLACE_POD_VERTICAL_SCALING

POD_LEVEL_RESIZE = "InPlacePodLevelResourcesVerticalScaling"
"""The declared feature of that name: the gate and the feature share it."""

NOT_DECLARED: Mapping[str, str] = {
    "RestartAllContainersOnContainerExits": "the RestartAllContainers action is not implemented",
}
"""What upstream's 1.36 kubelet declares by default and this one does not, and why."""


def declared_features(
    features: FeatureGates,
    support: Mapping[str, Support] = GATE_SUPPORT,
    *,
    cpu_manager_policy: str = "none",
) -> tuple[str, ...]:
    """The sorted feature names this kubelet declares (none with the gate off)."""
    if not features.enabled(NODE_DECLARED_FEATURES):
        return ()
    found: list[str] = []
    websockets = support.get(EXTEND_WEBSOCKETS)
    if features.enabled(EXTEND_WEBSOCKETS) and websockets and websockets.status == IMPLEMENTED:
        found.append(EXTEND_WEBSOCKETS)
    if features.enabled(IN_PLACE_RESIZE_GATE) and cpu_manager_policy != "static":
        found.append(GUARANTEED_CPU_RESIZE)
    if features.enabled(POD_LEVEL_RESIZE):
        found.append(POD_LEVEL_RESIZE)
    return tuple(sorted(found))


def required_features(pod: Pod) -> tuple[str, ...]:
    """The declared features ``pod`` needs to run (upstream's ``InferForScheduling``): a
    container or init container rule with the ``RestartAllContainers`` action needs
    ``RestartAllContainersOnContainerExits``; nothing else in 1.36 is needed to start."""
    containers = (*pod.spec.init_containers, *pod.spec.containers)
    for container in containers:
        for rule in container.restart_policy_rules:
            if rule.action == RESTART_ALL_ACTION:
                return (RESTART_ALL,)
    return ()


def unsatisfied(pod: Pod, declared: tuple[str, ...] | None) -> str | None:
    """The admission message for a pod needing undeclared features; None when it may run.
    With the gate off (``declared`` None) upstream has no such check, but it implements
    every feature a pod may need; this kubelet does not, so a pod needing one is refused
    all the same rather than run with its rules ignored."""
    if declared is None:
        declared = ()
    missing = sorted(set(required_features(pod)) - set(declared))
    if not missing:
        return None
    return f"Pod requires node features that are not available: {', '.join(missing)}"
