"""Tearing a pod down over the CRI, in an order that holds even when cancelled half-way.

    every container stopped, each under its own deadline: regular containers in
    parallel, then sidecars in reverse order (``decisions.stoporder``)
    → every sandbox stopped → containers removed → sandboxes removed

with the other pods' container stops in flight let end (2 s at most) before the pod's
sandbox stop (``ContainerStops``).

Each step is idempotent (NotFound counts as done), so a kubelet that dies mid-way
finishes the job after restart from what the runtime reports. A container's stop runs
its preStop hook first and gives StopContainer what is left of the grace period.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence

import trio

from kubelet.api import Container, Pod
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    CriError,
    NotFound,
    RuntimeClient,
    RuntimePodStatus,
    SandboxState,
    labels,
)
from kubelet.decisions import (
    ContainerToKill,
    KillReason,
    kill_grace_period,
    stop_container_timeout,
    stop_prerequisites,
)
from kubelet.events import NORMAL, WARNING, EventRecorder, pod_ref
from kubelet.handlers import HttpGetter

from .hooks import EVENT_FAILED_PRE_STOP_HOOK, run_pre_stop
from .legacylogs import unlink_container_log

log = logging.getLogger(__name__)

DEFAULT_ORPHAN_GRACE = 30

STOPS_FIRST_LIMIT = 2.0
"""How long a pod's sandbox stop waits, at most, for the container stops in flight on the
node when it is due (``ContainerStops.settle``)."""


class ContainerStops:
    """The StopContainer calls in flight on the node, so that a pod's cleanup lets the
    other pods' container stops end first.

    When many pods are deleted at once, each pod's sandbox stop and removals used to run
    while other pods' containers were still stopping, and the runtime's work for them (CNI
    teardown, shim exits, unmounts) delayed those stops: with 30 pods on containerd whose
    processes all end within 1 s of their SIGTERM, the last StopContainer ended 1.5 s
    after the deletion (1.0 s with this wait). A pod's sandbox stop (its removals come
    after it) waits now for the stops in flight when it is due, never for stops begun
    later, and ``STOPS_FIRST_LIMIT`` at most (a container that takes its whole grace
    period holds nobody longer): a pod's last status and API deletion, which follow its
    teardown, are late by that much at most. One pod alone, or a pod whose stops are the
    last, waits for nothing.
    """

    def __init__(self) -> None:
        self._in_flight: set[trio.Event] = set()
        """One event per stop in flight, set when it ends."""

    @contextlib.contextmanager
    def stopping(self) -> Iterator[None]:
        """Count one StopContainer in flight for the ``with`` block."""
        done = trio.Event()
        self._in_flight.add(done)
        try:
            yield
        finally:
            self._in_flight.discard(done)
            done.set()

    def in_flight(self) -> int:
        return len(self._in_flight)

    async def settle(self, limit: float = STOPS_FIRST_LIMIT) -> None:
        """Return when every stop in flight now has ended, or after ``limit`` seconds."""
        pending = list(self._in_flight)
        if not pending:
            return
        with trio.move_on_after(limit):
            for done in pending:
                await done.wait()


def _spec_of(pod: Pod, name: str) -> Container | None:
    for c in (*pod.spec.init_containers, *pod.spec.containers, *pod.spec.ephemeral_containers):
        if c.name == name:
            return c
    return None


def _grace_from_annotations(info: ContainerInfo) -> int:
    for key in (labels.POD_DELETION_GRACE_PERIOD, labels.POD_TERMINATION_GRACE_PERIOD):
        value = info.annotations.get(key)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                continue
    return DEFAULT_ORPHAN_GRACE


class PodTeardown:
    """Stops and removes what a pod has on the runtime; one instance serves every pod."""

    def __init__(
        self,
        runtime: RuntimeClient,
        recorder: EventRecorder,
        http: HttpGetter | None = None,
        containers_log_dir: str = "",
        *,
        post_stop: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.runtime = runtime
        self.post_stop = post_stop
        """the container manager's hook before a container is removed"""
        self.recorder = recorder
        self.http = http
        self.containers_log_dir = containers_log_dir
        """the legacy log symlinks' directory ("": none are kept)"""
        self.stops = ContainerStops()
        """Every pod's StopContainer calls in flight (one instance serves every pod)."""

    async def kill(
        self, pod: Pod, status: RuntimePodStatus, grace_override: int | None = None
    ) -> None:
        """Stop every live container, then every sandbox. Errors are logged; the sandbox
        stop forcibly ends whatever a failed container stop left running.

        Every container's kill starts at once (preStop hooks run in parallel); a
        sidecar then waits for its turn (``termination_order``: regular containers
        first, sidecars in reverse order) within its own grace period before its
        StopContainer. A stop that failed releases nobody: who waits for it stops when
        its grace period runs out. The sandbox stop lets the other pods' container stops
        then in flight end first (``ContainerStops``)."""
        live = [c for c in status.containers if c.state is not ContainerRunState.EXITED]
        running = [c.name for c in live if c.state is ContainerRunState.RUNNING]
        plan = stop_prerequisites(pod, running)  # only running containers take turns
        left = Counter(running)
        stopped = {name: trio.Event() for name in left}

        async def kill_in_turn(info: ContainerInfo) -> None:
            in_turn = info.state is ContainerRunState.RUNNING
            turn = [stopped[name] for name in plan.get(info.name, ())] if in_turn else []
            done = await self.kill_one(
                pod, info, KillReason.UNKNOWN, grace_override, status.ip, after=turn
            )
            if done and in_turn:
                left[info.name] -= 1
                if left[info.name] == 0:
                    stopped[info.name].set()

        async with trio.open_nursery() as nursery:
            for info in live:
                nursery.start_soon(kill_in_turn, info)
        if status.sandboxes:
            await self.stops.settle()
        async with trio.open_nursery() as nursery:
            for sandbox in status.sandboxes:
                nursery.start_soon(self._stop_sandbox, sandbox.id)

    async def terminate(
        self, pod: Pod, status: RuntimePodStatus, grace_override: int | None = None
    ) -> None:
        """Kill the pod, then remove its containers and sandboxes."""
        await self.kill(pod, status, grace_override)
        await self.remove(status)

    async def remove(self, status: RuntimePodStatus) -> None:
        """Remove a killed pod's containers, then its sandboxes."""
        async with trio.open_nursery() as nursery:
            for info in status.containers:
                nursery.start_soon(self.remove_container, info, status)
        async with trio.open_nursery() as nursery:
            for sandbox in status.sandboxes:
                nursery.start_soon(self._remove_sandbox, sandbox.id)

    async def kill_containers(
        self, pod: Pod, status: RuntimePodStatus, victims: Mapping[str, ContainerToKill]
    ) -> None:
        by_id = {c.id: c for c in status.containers}
        async with trio.open_nursery() as nursery:
            for cid, why in victims.items():
                info = by_id.get(cid)
                if info is not None:
                    log.info("pod %s: %s", pod.key, why.message)
                    nursery.start_soon(self.kill_one, pod, info, why.reason, None, status.ip)

    async def kill_one(
        self,
        pod: Pod,
        info: ContainerInfo,
        reason: KillReason,
        grace_override: int | None,
        pod_ip: str = "",
        *,
        after: Sequence[trio.Event] = (),
    ) -> bool:
        """preStop, then (``after``: the stops this one waits for, bounded by what is
        left of the grace period) StopContainer. True once the container is stopped."""
        spec = _spec_of(pod, info.name)
        if spec is not None:
            grace = kill_grace_period(pod, spec, reason, override=grace_override)
        else:
            grace = grace_override if grace_override is not None else _grace_from_annotations(info)
        elapsed = 0.0
        if spec is not None and info.state is ContainerRunState.RUNNING:
            started = trio.current_time()
            failure = await run_pre_stop(
                self.runtime, pod, spec, info.id, grace, pod_ip=pod_ip, http=self.http
            )
            elapsed = trio.current_time() - started
            if failure is not None:
                self.recorder.record(
                    pod_ref(pod, spec), WARNING, EVENT_FAILED_PRE_STOP_HOOK, failure
                )
        waited = 0.0
        remaining = grace - math.floor(elapsed)
        if after and remaining > 0:
            started = trio.current_time()
            with trio.move_on_after(remaining):
                for event in after:
                    await event.wait()
            waited = trio.current_time() - started
        timeout = stop_container_timeout(grace, elapsed, waited)
        if spec is not None:
            self.recorder.record(
                pod_ref(pod, spec), NORMAL, "Killing", f"Stopping container {info.name}"
            )
        log.info(
            "Killing container %s of pod %s with a grace period of %ds", info.name, pod.key, timeout
        )
        with self.stops.stopping():
            return await _idempotent(
                f"stopping container {info.name} of pod {pod.key}",
                self.runtime.stop_container(info.id, timeout),
            )

    async def _stop_sandbox(self, sandbox_id: str) -> None:
        await _idempotent(
            f"stopping sandbox {sandbox_id[:13]}", self.runtime.stop_pod_sandbox(sandbox_id)
        )

    async def remove_container(self, info: ContainerInfo, status: RuntimePodStatus) -> None:
        """RemoveContainer, then the container's legacy log symlink (as upstream)."""
        cid = info.id
        if self.post_stop is not None:  # upstream's PostStopContainer, before removal
            await self.post_stop(cid)
        if await _idempotent(f"removing container {cid[:13]}", self.runtime.remove_container(cid)):
            unlink_container_log(
                self.containers_log_dir,
                cid,
                info.labels,
                container_name=info.name,
                pod_name=status.name,
                namespace=status.namespace,
            )

    async def _remove_sandbox(self, sandbox_id: str) -> None:
        await _idempotent(
            f"removing sandbox {sandbox_id[:13]}", self.runtime.remove_pod_sandbox(sandbox_id)
        )


async def _idempotent(what: str, call: Awaitable[None]) -> bool:
    """One teardown step: NotFound means already done; other failures are logged, since
    the next step (or the next pass, after the pod worker's retry) covers them. True
    when the step is done."""
    try:
        await call
    except NotFound:
        pass
    except CriError as exc:
        log.warning("%s failed: %s", what, exc)
        return False
    return True


def all_gone(status: RuntimePodStatus) -> bool:
    """Nothing of the pod is left on the runtime."""
    return not status.sandboxes and not status.containers


def still_running(status: RuntimePodStatus) -> bool:
    return any(s.state is SandboxState.READY for s in status.sandboxes) or any(
        c.state is ContainerRunState.RUNNING for c in status.containers
    )
