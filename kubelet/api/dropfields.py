"""Pod fields a disabled feature gate takes away, so the kubelet acts as upstream's would.

Upstream's kubelet with ``PodLevelResources`` off reads no pod-level ``spec.resources``
(its QoS class, cgroups, admission and eviction all go by the containers): dropping the
field gives every one of them that view at once.

Upstream's kubelet with ``ContainerRestartRules`` off reads neither a container's
``restartPolicyRules`` nor the ``restartPolicy`` of a regular container, and treats an
init container as a sidecar only when its ``restartPolicy`` is ``Always``: every restart
then follows the pod's policy. Dropping those fields from the pods the kubelet receives
gives exactly that, with one code path for both settings of the gate (the API server
keeps the fields; the kubelet never writes a pod spec back).
"""

from __future__ import annotations

import attrs

from .pod import Container, Pod

__all__ = ["drop_container_restart_rules", "drop_pod_level_resources"]

_SIDECAR = "Always"


def _regular(container: Container) -> Container:
    if container.restart_policy is None and not container.restart_policy_rules:
        return container
    return attrs.evolve(container, restart_policy=None, restart_policy_rules=())


def _init(container: Container) -> Container:
    policy = container.restart_policy
    if (policy is None or policy == _SIDECAR) and not container.restart_policy_rules:
        return container
    kept = policy if policy == _SIDECAR else None
    return attrs.evolve(container, restart_policy=kept, restart_policy_rules=())


def drop_container_restart_rules(pod: Pod) -> Pod:
    """``pod`` as a kubelet without ``ContainerRestartRules`` reads it (the same object
    when it holds none of those fields)."""
    spec = pod.spec
    containers = tuple(_regular(c) for c in spec.containers)
    inits = tuple(_init(c) for c in spec.init_containers)
    unchanged = all(a is b for a, b in zip(containers, spec.containers, strict=True)) and all(
        a is b for a, b in zip(inits, spec.init_containers, strict=True)
    )
    if unchanged:
        return pod
    return attrs.evolve(pod, spec=attrs.evolve(spec, containers=containers, init_containers=inits))


def drop_pod_level_resources(pod: Pod) -> Pod:
    """``pod`` as a kubelet without ``PodLevelResources`` reads it (the same object when
    it sets no pod-level resources)."""
    if pod.spec.resources is None:
        return pod
    return attrs.evolve(pod, spec=attrs.evolve(pod.spec, resources=None))
