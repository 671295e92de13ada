"""The node's CSI facts in the API: the CSINode object and the Node's annotation/labels.

Upstream's nodeinfomanager: a registered driver is listed in the CSINode named after
the node (owned by the Node, so it goes with it) with its node ID, topology keys and
volume limit; the Node carries ``csi.volume.kubernetes.io/nodeid`` (a JSON map driver →
node ID) and the driver's topology segments as labels. Deregistration takes the driver
out of both (topology labels stay, as upstream's). Every change is a read-modify-write
guarded by resourceVersion, tried again on a conflict.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from kubelet.api import NODES, AlreadyExists, Conflict, NotFound, PatchType, Resource

from .facts import NodeInfo

if TYPE_CHECKING:
    from kubelet.api import ApiClient


log = logging.getLogger(__name__)

CSINODES = Resource("storage.k8s.io/v1", "csinodes", namespaced=False)
NODE_ID_ANNOTATION = "csi.volume.kubernetes.io/nodeid"
ATTEMPTS = 5


class TopologyConflict(Exception):
    """A driver's topology segment names a label the Node has with another value."""


async def _retry(change: Callable[[], Awaitable[None]]) -> None:
    for attempt in range(ATTEMPTS):
        try:
            await change()
            return
        except (Conflict, AlreadyExists):
            if attempt == ATTEMPTS - 1:
                raise


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return dict(meta) if isinstance(meta, Mapping) else {}


class NodeInfoManager:
    """Writes what the registered CSI drivers tell about this node."""

    def __init__(self, api: ApiClient, node_name: str) -> None:
        self.api = api
        self.node_name = node_name

    async def install(self, driver: str, info: NodeInfo) -> None:
        await _retry(lambda: self._update_node(driver, info))
        await _retry(lambda: self._update_csinode(driver, info))

    async def uninstall(self, driver: str) -> None:
        await _retry(lambda: self._update_node(driver, None))
        await _retry(lambda: self._update_csinode(driver, None))

    async def _update_node(self, driver: str, info: NodeInfo | None) -> None:
        node = await self.api.get(NODES.path(name=self.node_name))
        meta = _meta(node)
        annotations = meta.get("annotations") or {}
        try:
            ids = json.loads(annotations.get(NODE_ID_ANNOTATION) or "{}")
        except ValueError:
            ids = {}
        ids = ids if isinstance(ids, dict) else {}
        labels: dict[str, str] = {}
        if info is None:
            if driver not in ids:
                return
            ids.pop(driver)
        else:
            existing = meta.get("labels") or {}
            for key, value in info.topology.items():
                if key in existing and existing[key] != value:
                    raise TopologyConflict(
                        f'topology label "{key}" is "{existing[key]}" on the node, '
                        f'driver {driver} reports "{value}"'
                    )
                if key not in existing:
                    labels[key] = value
            if ids.get(driver) == info.node_id and not labels:
                return
            ids[driver] = info.node_id
        patch_meta: dict[str, Any] = {
            "resourceVersion": meta.get("resourceVersion", ""),
            "annotations": {NODE_ID_ANNOTATION: json.dumps(ids, sort_keys=True) if ids else None},
        }
        if labels:
            patch_meta["labels"] = labels
        await self.api.patch(
            NODES.path(name=self.node_name), {"metadata": patch_meta}, PatchType.MERGE
        )

    async def _update_csinode(self, driver: str, info: NodeInfo | None) -> None:
        path = CSINODES.path(name=self.node_name)
        try:
            current = await self.api.get(path)
        except NotFound:
            if info is None:
                return
            await self.api.create(CSINODES.path(), await self._new_csinode(driver, info))
            return
        spec = current.get("spec") if isinstance(current.get("spec"), Mapping) else {}
        drivers = [
            d
            for d in (spec or {}).get("drivers") or []
            if isinstance(d, Mapping) and d.get("name") != driver
        ]
        if info is not None:
            drivers.append(driver_entry(driver, info))
        body = dict(current)
        body["spec"] = {**(spec or {}), "drivers": drivers}
        await self.api.update(path, body)

    async def _new_csinode(self, driver: str, info: NodeInfo) -> dict[str, Any]:
        node = await self.api.get(NODES.path(name=self.node_name))
        owner = {
            "apiVersion": "v1",
            "kind": "Node",
            "name": self.node_name,
            "uid": _meta(node).get("uid", ""),
        }
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": self.node_name, "ownerReferences": [owner]},
            "spec": {"drivers": [driver_entry(driver, info)]},
        }


def driver_entry(driver: str, info: NodeInfo) -> dict[str, Any]:
    """A CSINode's spec.drivers[] item."""
    entry: dict[str, Any] = {
        "name": driver,
        "nodeID": info.node_id,
        "topologyKeys": sorted(info.topology) or None,
    }
    if info.max_volumes > 0:
        entry["allocatable"] = {"count": info.max_volumes}
    return {k: v for k, v in entry.items() if v is not None}
