"""CRI labels and annotations the kubelet writes, and reads back when it adopts.

They are upstream's keys and formats, so an upstream kubelet could adopt our containers
and we could adopt theirs.
"""

# Pod-level annotations the kubelet keeps on the sandbox (kubernetes.io/config.*): the
# pod's own, defined with the data model.
from kubelet.api import CONFIG_HASH, CONFIG_MIRROR, CONFIG_SEEN, CONFIG_SOURCE

POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_UID = "io.kubernetes.pod.uid"
CONTAINER_NAME = "io.kubernetes.container.name"

CONTAINER_HASH = "io.kubernetes.container.hash"
CONTAINER_RESTART_COUNT = "io.kubernetes.container.restartCount"
CONTAINER_TERMINATION_MESSAGE_PATH = "io.kubernetes.container.terminationMessagePath"
CONTAINER_TERMINATION_MESSAGE_POLICY = "io.kubernetes.container.terminationMessagePolicy"
CONTAINER_PRESTOP_HANDLER = "io.kubernetes.container.preStopHandler"
CONTAINER_PORTS = "io.kubernetes.container.ports"
POD_DELETION_GRACE_PERIOD = "io.kubernetes.pod.deletionGracePeriod"
POD_TERMINATION_GRACE_PERIOD = "io.kubernetes.pod.terminationGracePeriod"

# Ours, not upstream's (an upstream kubelet ignores them): the resources a container was
# created with, and its pod's pod-level ones, so that a restarted kubelet knows what is
# in force after the spec was resized (decisions/resize.py). Container annotations only:
# a pod's own annotations reach the sandbox, never a container.
CONTAINER_RESOURCES = "io.trio-kubelet.container.resources"
POD_RESOURCES = "io.trio-kubelet.pod.resources"


__all__ = [
    "CONFIG_HASH",
    "CONFIG_MIRROR",
    "CONFIG_SEEN",
    "CONFIG_SOURCE",
    "CONTAINER_HASH",
    "CONTAINER_NAME",
    "CONTAINER_PORTS",
    "CONTAINER_PRESTOP_HANDLER",
    "CONTAINER_RESOURCES",
    "CONTAINER_RESTART_COUNT",
    "CONTAINER_TERMINATION_MESSAGE_PATH",
    "CONTAINER_TERMINATION_MESSAGE_POLICY",
    "POD_DELETION_GRACE_PERIOD",
    "POD_NAME",
    "POD_NAMESPACE",
    "POD_RESOURCES",
    "POD_TERMINATION_GRACE_PERIOD",
    "POD_UID",
]
