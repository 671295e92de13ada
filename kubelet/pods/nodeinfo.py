"""The Node as admission reads it: the API's copy when there is one, else our own.

Upstream's admission asks for the node "any way": the Node object the kubelet last saw
from the API server, or, before registration and on a standalone kubelet, the node it
would register (``initialNode``): its labels (hostname, OS, arch, ``--node-labels``),
``--register-with-taints`` and allocatable (capacity minus ``systemReserved``,
``kubeReserved``, the hard eviction thresholds and hugepages, as node status computes
it). The API's copy is the newer of the one the Node watch last received (so labels
and taints someone else sets count as soon as the API server sends them, as upstream's
Node informer) and the one the node status loop last wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubelet.api import Node, Taint, from_wire
from kubelet.config import Options
from kubelet.node import (
    MachineInfo,
    NodeFacts,
    NodeIdentity,
    allocatable,
    capacity,
    default_labels,
    eviction_bytes,
    filesystem_stats,
    max_pods,
    summed_reservations,
)

from .fit import NodeInfo

__all__ = ["local_node", "node_info_source"]

ApiNode = Callable[[], "dict[str, Any] | None"]


def local_node(options: Options, identity: NodeIdentity, machine: MachineInfo) -> NodeInfo:
    """The node this kubelet would register, as admission reads it (one statfs of
    ``--root-dir`` for the ephemeral-storage capacity)."""
    cfg = options.config
    labels = {
        **default_labels(identity.hostname, machine.operating_system, machine.architecture),
        **options.node_labels,
    }
    try:
        disk: int | None = filesystem_stats(options.root_dir).capacity_bytes
    except OSError:
        disk = None
    facts = NodeFacts(
        machine=machine,
        max_pods=max_pods(cfg, machine.num_cores),
        ephemeral_storage_bytes=disk,
        reserved=summed_reservations(cfg.system_reserved, cfg.kube_reserved),
        eviction_memory_bytes=eviction_bytes(
            cfg.eviction_hard.get("memory.available"), machine.memory_bytes
        ),
        eviction_nodefs_bytes=eviction_bytes(cfg.eviction_hard.get("nodefs.available"), disk or 0),
    )
    return NodeInfo(
        name=identity.name,
        labels=labels,
        taints=tuple(
            Taint(key=t.key, value=t.value, effect=t.effect) for t in cfg.register_with_taints
        ),
        allocatable={
            name: str(value) for name, value in allocatable(facts, capacity(facts)).items()
        },
        os=machine.operating_system,
    )


def _from_api(raw: dict[str, Any], local: NodeInfo) -> NodeInfo:
    node = from_wire(Node, raw)
    return NodeInfo(
        name=node.metadata.name or local.name,
        labels=dict(node.metadata.labels),
        taints=node.spec.taints,
        allocatable={name: str(value) for name, value in node.status.allocatable.items()}
        or local.allocatable,
        os=local.os,
    )


def node_info_source(local: NodeInfo, api_node: ApiNode | None) -> Callable[[], NodeInfo]:
    """``api_node``'s Node when it has one (converted once per object), else ``local``."""
    seen: list[tuple[dict[str, Any], NodeInfo]] = []

    def current() -> NodeInfo:
        raw = api_node() if api_node is not None else None
        if raw is None:
            return local
        if seen and seen[0][0] is raw:
            return seen[0][1]
        info = _from_api(raw, local)
        seen[:] = [(raw, info)]
        return info

    return current
