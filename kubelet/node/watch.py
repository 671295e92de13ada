"""The kubelet's own Node, listed and watched (upstream's Node informer, a reflector with
``fieldSelector=metadata.name=<node>``), so that labels and taints someone else sets reach
admission as soon as the API server sends them, not at the next status report.

``NodeWatch.node`` is the last object seen (None before the first list, and after the
Node's deletion); ``newest`` picks between it and the status reporter's copy (the one the
kubelet itself last wrote), by resourceVersion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from kubelet.api import NODES, ListWatch, UidStore, reflect

if TYPE_CHECKING:
    from kubelet.api import ApiClient

__all__ = ["NodeWatch", "newest"]


def _version(node: dict[str, Any]) -> int:
    text = str((node.get("metadata") or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else -1


def newest(*nodes: dict[str, Any] | None) -> dict[str, Any] | None:
    """The copy with the highest resourceVersion (the first on a tie or when they are
    not numbers); None when there is none."""
    best: dict[str, Any] | None = None
    for node in nodes:
        if node is not None and (best is None or _version(node) > _version(best)):
            best = node
    return best


class NodeWatch:
    """One reflector over this node's Node object."""

    def __init__(self, client: ApiClient, name: str) -> None:
        self._client = client
        self.name = name
        self.node: dict[str, Any] | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Reflect the Node until cancelled (retrying through API outages)."""

        async def on_change(items: list[dict[str, Any]]) -> None:
            self.node = next((n for n in items if _name(n) == self.name), None)

        task_status.started()
        target = ListWatch(NODES.path(), field_selector=f"metadata.name={self.name}")
        await reflect(self._client, target, UidStore(on_change))


def _name(node: dict[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")
