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
and the v5 exec/attach translation both); in-place resize and restart rules are not
implemented, so those are never declared (a scheduler then keeps pods that need them
away, which is the point of the feature).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubelet.config.features import FeatureGates
from kubelet.config.support import GATE_SUPPORT, IMPLEMENTED, Support

GATE = "NodeDeclaredFeatures"
EXTEND_WEBSOCKETS = "ExtendWebSocketsToKubelet"

NOT_DECLARED: Mapping[str, str] = {
    "GuaranteedQoSPodCPUResize": "in-place pod resize is not implemented",
    "InPlacePodLevelResourcesVerticalScaling": "in-place pod resize is not implemented",
    "RestartAllContainersOnContainerExits": "container restartPolicyRules are not implemented",
}
"""What upstream's 1.36 kubelet declares by default and this one does not, and why."""


def declared_features(
    features: FeatureGates, support: Mapping[str, Support] = GATE_SUPPORT
) -> tuple[str, ...]:
    """The sorted feature names this kubelet declares (none with the gate off)."""
    if not features.enabled(GATE):
        return ()
    found: list[str] = []
    websockets = support.get(EXTEND_WEBSOCKETS)
    if features.enabled(EXTEND_WEBSOCKETS) and websockets and websockets.status == IMPLEMENTED:
        found.append(EXTEND_WEBSOCKETS)
    return tuple(sorted(found))
