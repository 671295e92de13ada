"""Growing a mounted claim's filesystem on the node, as upstream's kubelet decides it.

The external resizer grows the volume (the PersistentVolume's ``spec.capacity``) and,
when the driver also expands on the node, marks the claim's
``status.allocatedResourceStatuses.storage`` NodeResizePending. The kubelet then:

* expands when the claim's ``status.capacity`` is below the volume's capacity and the
  resize status is NodeResizePending or NodeResizeInProgress (an empty status means a
  resizer that finishes on its own: nothing to do), or when the volume grew past what
  this kubelet published although the claim already shows the size (a volume several
  nodes use, expanded on another node first: expanded, the claim left as it is);
* marks the claim NodeResizeInProgress, calls NodeExpandVolume with the volume's
  capacity, and on success patches ``status.capacity`` to it, drops the resize status
  and the FileSystemResizePending (and Resizing) conditions.

Pure functions over the API objects as JSON; ``CsiVolumes.expand_claim`` does the I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from kubelet.api import parse_quantity

NODE_RESIZE_PENDING = "NodeResizePending"
NODE_RESIZE_IN_PROGRESS = "NodeResizeInProgress"
RESIZE_CONDITIONS = ("Resizing", "FileSystemResizePending")

Json = Mapping[str, Any]


def _map(value: object) -> Json:
    return value if isinstance(value, Mapping) else {}


def storage_bytes(resources: object) -> int | None:
    """``storage`` of a resource list, in bytes (None: missing or not a quantity)."""
    value = _map(resources).get("storage")
    if value is None:
        return None
    try:
        return math.ceil(parse_quantity(str(value)).amount)
    except (ValueError, TypeError):
        return None


@attrs.frozen
class Expansion:
    """NodeExpandVolume to ``size`` bytes; ``update_claim``: the claim's status follows."""

    size: int
    quantity: str
    """the volume's capacity as the PersistentVolume gives it (the claim's new capacity)"""
    update_claim: bool


def expansion(pvc: Json, pv: Json, published: int | None) -> Expansion | None:
    """Whether the mounted volume of ``pvc`` (bound to ``pv``) is to be expanded on the
    node (``published``: the volume's capacity when this kubelet published it)."""
    capacity = _map(_map(pv.get("spec")).get("capacity"))
    size = storage_bytes(capacity)
    if size is None:
        return None
    status = _map(pvc.get("status"))
    current = storage_bytes(status.get("capacity")) or 0
    resize = str(_map(status.get("allocatedResourceStatuses")).get("storage") or "")
    if current >= size:
        if not resize and published is not None and published < size:
            return Expansion(size, str(capacity["storage"]), update_claim=False)
        return None
    if resize in (NODE_RESIZE_PENDING, NODE_RESIZE_IN_PROGRESS):
        return Expansion(size, str(capacity["storage"]), update_claim=True)
    return None


def in_progress_patch() -> dict[str, Any]:
    """The claim's status while the node expands it (a merge patch)."""
    return {"status": {"allocatedResourceStatuses": {"storage": NODE_RESIZE_IN_PROGRESS}}}


def finished_patch(pvc: Json, quantity: str) -> dict[str, Any]:
    """The claim's status once the node expanded it to ``quantity`` (a merge patch):
    the new capacity, no resize status, no resize conditions."""
    status = _map(pvc.get("status"))
    conditions = [
        c
        for c in status.get("conditions") or []
        if isinstance(c, Mapping) and c.get("type") not in RESIZE_CONDITIONS
    ]
    capacity = dict(_map(status.get("capacity")))
    capacity["storage"] = quantity
    return {
        "status": {
            "capacity": capacity,
            "conditions": conditions,
            "allocatedResourceStatuses": {"storage": None},
        }
    }
