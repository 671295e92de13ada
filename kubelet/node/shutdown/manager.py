"""The shutdown manager: holds a logind delay lock and, on shutdown, stops pods by priority.

As upstream's nodeshutdown manager (Linux):

1. at start, read logind's InhibitDelayMaxUSec; if it is below the sum of the group
   periods, write the logind drop-in, have logind reload, and read it again (still too
   low: an error naming both values, retried);
2. take a delay lock (``Inhibit``) and watch ``PrepareForShutdown``;
3. on True: record a ``NodeShutdown`` event, mark the node as shutting down (the node
   status turns NotReady, "node is shutting down"; new pods are refused with reason
   ``NodeShutdown``), then terminate the active pods group by group (``plan``), each
   group for at most its period, and release the lock so the shutdown goes on;
4. on False (the shutdown was cancelled): no longer shutting down; take a new lock;
5. a lost bus connection is re-established every second.

Where logind is absent (no system bus, nobody owns org.freedesktop.login1) the manager
logs that once and ends: the node runs, and shuts down without grace, as upstream's
kubelet does when the manager cannot start. With no grace period configured it does
nothing at all.

The manager knows pods only as ``ShutdownPod`` (priority, own grace); the pod workers
do the terminating through ``PodTerminator``, so this module needs nothing above the
node layer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import attrs
import trio

from .logindconf import LOGIND_DROPIN_DIR, LogindError, LogindUnavailable, override_inhibit_delay
from .plan import (
    NODE_NOT_READY_MESSAGE,
    NOT_ADMITTED_MESSAGE,
    NOT_ADMITTED_REASON,
    SHUTDOWN_MESSAGE,
    SHUTDOWN_REASON,
    PriorityPeriod,
    disruption_condition,
    group_pods,
    pod_grace,
    requested_delay,
)
from .record import ShutdownRecord

__all__ = [
    "NODE_SHUTDOWN_EVENT",
    "Inhibitor",
    "PodTerminator",
    "ShutdownManager",
    "ShutdownPod",
    "Termination",
]

log = logging.getLogger(__name__)

NODE_SHUTDOWN_EVENT = "NodeShutdown"
RECONNECT_PERIOD = 1.0


class Inhibitor(Protocol):
    """What the manager needs from logind (``logind.LogindBus``)."""

    async def inhibit_delay_max(self) -> float: ...
    async def inhibit(self) -> int: ...
    def release(self, lock: int) -> None: ...
    async def reload_logind(self) -> None: ...
    def shutdown_signals(self) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[bool]]: ...


@attrs.frozen
class ShutdownPod:
    """An active pod as the shutdown manager sees it."""

    key: str
    uid: str
    priority: int = 0
    termination_grace: int | None = None


@attrs.frozen
class Termination:
    """How a pod is to be stopped and what its status will say."""

    grace: int
    reason: str
    message: str
    conditions: tuple[dict[str, str], ...]


class PodTerminator(Protocol):
    async def terminate(self, pod: ShutdownPod, how: Termination) -> None:
        """Stop the pod and return once it is stopped. Being cancelled abandons the
        wait, never the termination already asked for."""
        ...


class ShutdownManager:
    """Runs in the node nursery; ``shutdown_status`` and ``admit`` are read by others."""

    def __init__(
        self,
        periods: Sequence[PriorityPeriod],
        *,
        active_pods: Callable[[], Sequence[ShutdownPod]],
        terminator: PodTerminator,
        connect: Callable[[], AbstractAsyncContextManager[Inhibitor]],
        node_status_changed: Callable[[], None] = lambda: None,
        record_event: Callable[[str, str], None] = lambda reason, message: None,
        now_rfc3339: Callable[[], str] = lambda: "",
        dropin_dir: str = LOGIND_DROPIN_DIR,
        reconnect_period: float = RECONNECT_PERIOD,
        record: ShutdownRecord | None = None,
    ) -> None:
        self.periods = tuple(sorted(periods, key=lambda p: p.priority))
        self.active_pods = active_pods
        self.terminator = terminator
        self.connect = connect
        self.node_status_changed = node_status_changed
        self.record_event = record_event
        self.now_rfc3339 = now_rfc3339
        self.dropin_dir = dropin_dir
        self.reconnect_period = reconnect_period
        self.shutting_down = False
        self.shutdowns_processed = 0
        self.record = record
        self._lock: int | None = None
        self._release_with: Callable[[int], None] = lambda lock: None

    # -- read by other components -----------------------------------------------------

    def shutdown_status(self) -> str | None:
        """The node Ready condition's error while the node shuts down, else None."""
        return NODE_NOT_READY_MESSAGE if self.shutting_down else None

    def admit(self) -> tuple[bool, str, str]:
        """(admitted, reason, message) for a new pod."""
        if self.shutting_down:
            return False, NOT_ADMITTED_REASON, NOT_ADMITTED_MESSAGE
        return True, "", ""

    # -- the loop ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if not self.periods:
            log.info("No graceful configuration specified, node shutdown will be immediate")
            task_status.started()
            return
        log.info(
            "Creating node shutdown manager: %s",
            ", ".join(f"priority {p.priority}: {p.seconds}s" for p in self.periods),
        )
        started = False

        def mark_started() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        while True:
            try:
                async with self.connect() as bus:
                    await self._watch(bus, mark_started)
                raise LogindError("Ended to watching the node for shutdown events")
            except LogindUnavailable as exc:
                if not started:
                    log.warning(
                        "Graceful node shutdown is not available: %s; the node will shut down "
                        "without terminating its pods first",
                        exc,
                    )
                    mark_started()
                    return
                log.debug("Unable to watch the node for shutdown events: %s", exc)
            except LogindError as exc:
                log.error("Unable to watch the node for shutdown events: %s", exc)
            finally:
                self._release()
            mark_started()
            await trio.sleep(self.reconnect_period)
            log.debug("Restarting watch for node shutdown events")

    async def _watch(self, bus: Inhibitor, watching: Callable[[], None]) -> None:
        await self._ensure_delay(bus)
        await self._acquire(bus)
        async with bus.shutdown_signals() as signals:
            watching()
            async for shutting_down in signals:
                kind = "shutdown" if shutting_down else "cancelled"
                log.info("Shutdown manager detected new shutdown event: %s", kind)
                self.record_event(
                    NODE_SHUTDOWN_EVENT,
                    "Shutdown manager detected shutdown event"
                    if shutting_down
                    else "Shutdown manager detected shutdown cancellation",
                )
                self.shutting_down = shutting_down
                if shutting_down:
                    self.node_status_changed()
                    await self._process(bus)
                else:
                    await self._acquire(bus)

    async def _ensure_delay(self, bus: Inhibitor) -> None:
        requested = requested_delay(self.periods)
        current = await bus.inhibit_delay_max()
        if requested <= current:
            return
        path = override_inhibit_delay(requested, self.dropin_dir)
        log.info("logind InhibitDelayMaxSec is %gs, below %ds: wrote %s", current, requested, path)
        await bus.reload_logind()
        updated = await bus.inhibit_delay_max()
        if requested > updated:
            raise LogindError(
                f"node shutdown manager was unable to update logind InhibitDelayMaxSec to "
                f"{requested}s (ShutdownGracePeriod), current value of InhibitDelayMaxSec "
                f"({updated:g}s) is less than requested ShutdownGracePeriod"
            )

    async def _acquire(self, bus: Inhibitor) -> None:
        lock = await bus.inhibit()
        self._release()
        self._lock = lock
        self._release_with = bus.release

    def _release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            self._release_with(lock)

    async def _process(self, bus: Inhibitor) -> None:
        """Terminate the active pods group by group, then let the shutdown go on."""
        log.info("Shutdown manager processing shutdown event")
        if self.record is not None:
            self.record.started()
        try:
            pods = self.active_pods()
            groups = group_pods(self.periods, [(p, p.priority) for p in pods])
            for group in groups:
                if not group.pods:
                    continue
                with trio.move_on_after(group.seconds) as scope:
                    async with trio.open_nursery() as nursery:
                        for pod in group.pods:
                            nursery.start_soon(self._terminate, pod, group.seconds)
                if scope.cancelled_caught:
                    log.info("Shutdown manager pod killing time out: gracePeriod %ds, priority %d",
                             group.seconds, group.priority)  # fmt: skip
        finally:
            self._release()
            if self.record is not None:
                self.record.ended()
            self.shutdowns_processed += 1
            log.info("Shutdown manager completed processing shutdown event, node will "
                     "shutdown shortly")  # fmt: skip

    async def _terminate(self, pod: ShutdownPod, group_seconds: int) -> None:
        grace = pod_grace(group_seconds, pod.termination_grace)
        log.info("Shutdown manager killing pod %s with gracePeriod %ds", pod.key, grace)
        how = Termination(
            grace, SHUTDOWN_REASON, SHUTDOWN_MESSAGE, (disruption_condition(self.now_rfc3339()),)
        )
        try:
            await self.terminator.terminate(pod, how)
        except Exception as exc:  # one pod's failure must not stop the others
            log.info("Shutdown manager failed killing pod %s: %s", pod.key, exc)
        else:
            log.info("Shutdown manager finished killing pod %s", pod.key)
