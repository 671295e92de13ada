"""Reporting node status: compute every 10 s, PATCH on change or every 5 minutes.

Until the node has been reported Ready once, the loop runs every second so a fresh
node turns Ready quickly (upstream's fast status updates at start-up). Each report is
tried ``nodeStatusUpdateRetry`` (5) times; the first try patches against the last node
we saw, later ones fetch it again. Condition transitions are recorded as node events.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet.api import (
    NODES,
    ApiError,
    Node,
    NodeStatus,
    PatchType,
    from_wire,
    node_status_patch,
    to_wire,
)
from kubelet.events import NORMAL, EventRecorder, node_ref
from kubelet.goformat import rfc3339

from .status import NodeFacts, differs_beyond_heartbeats, is_ready, node_status

if TYPE_CHECKING:
    from kubelet.api import ApiClient

log = logging.getLogger(__name__)

UPDATE_RETRIES = 5
FAST_PERIOD = 1.0

_TRANSITION_EVENTS = {
    ("Ready", "True"): "NodeReady",
    ("Ready", "False"): "NodeNotReady",
    ("MemoryPressure", "True"): "NodeHasInsufficientMemory",
    ("MemoryPressure", "False"): "NodeHasSufficientMemory",
    ("DiskPressure", "True"): "NodeHasDiskPressure",
    ("DiskPressure", "False"): "NodeHasNoDiskPressure",
    ("PIDPressure", "True"): "NodeHasInsufficientPID",
    ("PIDPressure", "False"): "NodeHasSufficientPID",
}


class NodeStatusReporter:
    """Computes the node's status every 10 s and sends it only when it changed (or every
    5 minutes), so a quiet node costs the API almost nothing."""

    def __init__(
        self,
        client: ApiClient,
        node_name: str,
        gather: Callable[[], Awaitable[NodeFacts]],
        *,
        update_frequency: float = 10.0,
        report_frequency: float = 300.0,
        recorder: EventRecorder | None = None,
        wall_clock: Callable[[], float],
        on_reported: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._client = client
        self.node_name = node_name
        self._gather = gather
        self.update_frequency = update_frequency
        self.report_frequency = report_frequency
        self._recorder = recorder
        self._wall = wall_clock
        self.node: dict[str, Any] | None = None
        """The node as the API last answered (raw JSON, unknown fields kept)."""
        self.last_report: float | None = None
        self.reported_ready = False
        self.patches = 0
        self._on_reported = on_reported
        """Called with the node as the API answered each status PATCH."""
        self._wake = trio.Event()

    def poke(self) -> None:
        """Report now (the node is shutting down), not at the next period."""
        self._wake.set()

    def seed(self, node: dict[str, Any]) -> None:
        """Start from the node registration returned."""
        self.node = node

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                await self.update()
            except Exception as exc:  # never stop reporting
                log.warning("error updating node status, will retry: %s", exc)
            with trio.move_on_after(self.update_frequency if self.reported_ready else FAST_PERIOD):
                await self._wake.wait()
            self._wake = trio.Event()

    async def update(self) -> None:
        """One report cycle with upstream's retries."""
        for attempt in range(UPDATE_RETRIES):
            try:
                await self._try_update(refetch=attempt > 0 or self.node is None)
                return
            except ApiError as exc:
                log.warning("error updating node status (attempt %d): %s", attempt + 1, exc)
        log.error("unable to update node status: exceeded %d retries", UPDATE_RETRIES)

    async def _try_update(self, *, refetch: bool) -> None:
        if refetch or self.node is None:
            self.node = await self._client.get(NODES.path(name=self.node_name))
        old = from_wire(Node, self.node)
        facts = await self._gather()
        status = node_status(old.status, facts, rfc3339(self._wall()))
        due = self.last_report is None or (
            trio.current_time() - self.last_report >= self.report_frequency
        )
        if not differs_beyond_heartbeats(old.status, status) and not due:
            return
        new_node = attrs.evolve(old, status=status)
        patch = node_status_patch(self.node, {**self.node, "status": to_wire(new_node)["status"]})
        self.node = await self._client.patch(
            NODES.path(name=self.node_name, subresource="status"), patch, PatchType.STRATEGIC
        )
        self.patches += 1
        self.last_report = trio.current_time()
        if self._on_reported is not None:
            self._on_reported(self.node)
        self._record_transitions(old.status, status)
        if is_ready(status):
            self.reported_ready = True

    def _record_transitions(self, old: NodeStatus, new: NodeStatus) -> None:
        if self._recorder is None:
            return
        before = {c.type: c.status for c in old.conditions}
        for cond in new.conditions:
            if before.get(cond.type) != cond.status:
                reason = _TRANSITION_EVENTS.get((cond.type, cond.status))
                if reason is not None:
                    message = f"Node {self.node_name} status is now: {reason}"
                    self._recorder.record(node_ref(self.node_name), NORMAL, reason, message)
