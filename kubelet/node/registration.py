"""Registering the Node object, and reconciling what the kubelet owns on an existing one.

As upstream: create the Node with its default labels (hostname, os, arch), the
``--node-labels``, ``--register-with-taints`` and an initial status; if it already exists,
make the default labels match and move on (everything else on the object belongs to
someone else). A create refused as Forbidden (an admission policy that lets no node be
created, even one that exists) is answered by reading the Node too, unless the gate
KubeletRegistrationGetOnExistsOnly restores the old rule. Retries forever, 100 ms
doubling to 7 s, without ever holding up pods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import trio

from kubelet.api import (
    NODES,
    AlreadyExists,
    ApiError,
    Forbidden,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    PatchType,
    Taint,
    to_wire,
)

from .startup import NodeStartup

if TYPE_CHECKING:
    from kubelet.api import ApiClient

log = logging.getLogger(__name__)

FIRST_DELAY = 0.1
MAX_DELAY = 7.0
HOSTNAME_LABEL = "kubernetes.io/hostname"
OS_LABEL = "kubernetes.io/os"
ARCH_LABEL = "kubernetes.io/arch"
BETA_OS_LABEL = "beta.kubernetes.io/os"
BETA_ARCH_LABEL = "beta.kubernetes.io/arch"
ATTACH_DETACH_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"


UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
PROVIDED_NODE_IP_ANNOTATION = "alpha.kubernetes.io/provided-node-ip"


def default_labels(hostname: str, operating_system: str, arch: str) -> dict[str, str]:
    return {
        HOSTNAME_LABEL: hostname,
        OS_LABEL: operating_system,
        ARCH_LABEL: arch,
        BETA_OS_LABEL: operating_system,
        BETA_ARCH_LABEL: arch,
    }


def initial_node(
    name: str,
    *,
    labels: Mapping[str, str],
    taints: Sequence[Taint] = (),
    provider_id: str = "",
    status: NodeStatus | None = None,
    external_cloud_provider: bool = False,
    node_ip: str = "",
) -> Node:
    """The Node to create; with an external cloud provider, upstream's uninitialized taint
    (the cloud-controller-manager removes it) and the ``--node-ip`` hint annotation."""
    annotations = {ATTACH_DETACH_ANNOTATION: "true"}
    if external_cloud_provider:
        taints = (*taints, Taint(key=UNINITIALIZED_TAINT, value="true", effect="NoSchedule"))
        if node_ip:
            annotations[PROVIDED_NODE_IP_ANNOTATION] = node_ip
    return Node(
        metadata=ObjectMeta(name=name, labels=dict(labels), annotations=annotations),
        spec=NodeSpec(taints=tuple(taints), provider_id=provider_id),
        status=status or NodeStatus(),
    )


def label_fixes(existing: Mapping[str, Any], wanted: Mapping[str, str]) -> dict[str, str]:
    """Default labels whose value on the existing node differs from ours."""
    labels = (existing.get("metadata") or {}).get("labels") or {}
    return {k: v for k, v in wanted.items() if labels.get(k) != v}


async def register(
    client: ApiClient,
    build: Callable[[], Node],
    default: Mapping[str, str],
    *,
    on_registered: Callable[[dict[str, Any]], None] | None = None,
    startup: NodeStartup | None = None,
    get_on_exists_only: bool = False,
) -> dict[str, Any]:
    """Create (or adopt) the Node; returns it as the API holds it. ``startup`` hears of
    each attempt and of the creation (the node startup figures); ``get_on_exists_only``
    is the gate KubeletRegistrationGetOnExistsOnly (a Forbidden create is then a failure)."""
    adopt_after: tuple[type[ApiError], ...] = (
        (AlreadyExists,) if get_on_exists_only else (AlreadyExists, Forbidden)
    )
    delay = FIRST_DELAY
    while True:
        node = build()
        if startup is not None:
            startup.attempt()
        try:
            created = await client.create(NODES.path(), to_wire(node))
            log.info("successfully registered node %s", node.metadata.name)
            if startup is not None:
                startup.created()
            if on_registered is not None:
                on_registered(created)
            return created
        except adopt_after:
            try:
                existing = await client.get(NODES.path(name=node.metadata.name))
                fixes = label_fixes(existing, default)
                if fixes:
                    existing = await client.patch(
                        NODES.path(name=node.metadata.name),
                        {"metadata": {"labels": fixes}},
                        PatchType.STRATEGIC,
                    )
                log.info("node %s was already registered", node.metadata.name)
                if on_registered is not None:
                    on_registered(existing)
                return existing
            except ApiError as exc:
                log.warning("unable to reconcile existing node %s: %s", node.metadata.name, exc)
        except ApiError as exc:
            log.warning(
                "unable to register node %s with the API server: %s", node.metadata.name, exc
            )
        await trio.sleep(delay)
        delay = min(delay * 2, MAX_DELAY)
