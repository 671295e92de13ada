"""The eviction manager: one task that watches, reclaims and evicts (upstream managerImpl).

``EvictionManager.run`` loops: a pass (``synchronize``) every ``monitoring_interval``
(10 s), or at once when a memory threshold notifier fires; after an eviction it waits
(polling every second, at most 30 s) for the pod to be cleaned up, then passes again.
A pass:

1. reads the node's figures, then those of the pods a decision may need (all while a
   threshold is met, else the pods with local storage limits); arms the memory
   notifiers from the node's (every 10 s at most);
2. runs the pure pass (``state.step``): conditions, thresholds to act on;
3. evicts pods over their local storage limits, and if any was, ends the pass;
4. for the most urgent threshold: records ``EvictionThresholdMet`` "Attempting to
   reclaim <resource>" on the node, runs the node-level reclaim for its signal
   (unused containers, unused images) and, if a fresh summary shows every threshold
   (with minimum reclaim) resolved, ends the pass;
5. ranks the active pods for the signal and evicts the first that is not critical:
   a Warning ``Evicted`` event with upstream's annotations, then the pod killer with the
   grace period override and the evicted status.

Everything it needs comes in as small protocols (summary source, active pods, pod killer,
node reclaimer, event sink, cleaned-up check), so it is tested on a fake clock with
scripted figures; ``run.run_eviction`` binds them to the stats provider, the pod workers,
the garbage collectors and the event recorder.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence, Set
from pathlib import Path
from typing import Protocol

import attrs
import trio

from kubelet.api import Pod
from kubelet.cri import CriError
from kubelet.stats import NodeUsage, PodUsage

from . import admission, notifier
from .decide import (
    Eviction,
    Reclaim,
    choose_eviction,
    local_storage_candidates,
    local_storage_evictions,
    node_reclaim,
    resource_to_reclaim,
)
from .messages import REASON, THRESHOLD_MET_EVENT
from .observations import Observation, Observations, observe_signals
from .ranking import rank
from .state import EvictionState, met_now, step, thresholds_met
from .thresholds import Signal, Threshold, update_containerfs_thresholds

__all__ = [
    "EventSink",
    "EvictionConfig",
    "EvictionManager",
    "Evictor",
    "NodeReclaimer",
    "SummarySource",
]

log = logging.getLogger(__name__)

MONITORING_INTERVAL = 10.0
CLEANUP_TIMEOUT = 30.0
CLEANUP_POLL = 1.0
WARNING = "Warning"


class SummarySource(Protocol):
    """The usage figures, read in two steps: the node's (every signal), then the pods'
    a decision needs (``wanted``: their UIDs; None: all)."""

    async def node_usage(self) -> NodeUsage: ...

    async def pods_usage(self, wanted: Set[str] | None) -> tuple[PodUsage, ...]: ...


class Evictor(Protocol):
    async def evict(self, eviction: Eviction) -> None:
        """Stop the pod with ``eviction.grace_period_override`` and report it evicted.

        Returns once the pod's containers are stopped; raises if that failed.
        """


class NodeReclaimer(Protocol):
    async def delete_unused_containers(self) -> None: ...

    async def delete_unused_images(self) -> None: ...


class EventSink(Protocol):
    def node_event(self, event_type: str, reason: str, message: str) -> None: ...

    def pod_event(
        self,
        pod: Pod,
        event_type: str,
        reason: str,
        message: str,
        annotations: Mapping[str, str],
    ) -> None: ...


class PressureSink(Protocol):
    conditions: tuple[str, ...]


class EvictionMetrics(Protocol):
    """Upstream's ``kubelet_evictions`` and ``kubelet_eviction_stats_age_seconds``."""

    def pod_evicted(self, signal: str) -> None: ...

    def observe_eviction_stats_age(self, signal: str, measured_at: float) -> None: ...


DiskLayout = Callable[[], Awaitable[tuple[bool, bool]]]
"""(imagefs on its own device, writable layers apart from images); may raise to retry."""


@attrs.frozen
class EvictionConfig:
    thresholds: tuple[Threshold, ...]
    pressure_transition_period: float = 300.0
    max_pod_grace_period: int = 0
    monitoring_interval: float = MONITORING_INTERVAL
    local_storage_capacity_isolation: bool = True
    pod_level_resources: bool = True
    kernel_memcg_notification: bool = True
    memory_cgroup_root: Path | None = None
    """the root memory cgroup directory (v1), for the notifier; None: no notifier"""
    pods_memory_cgroup: Path | None = None
    """the pods cgroup's memory directory, for allocatableMemory.available"""


class EvictionManager:
    """Owns the eviction state; ``conditions`` and ``admit`` are read by other components."""

    def __init__(
        self,
        config: EvictionConfig,
        *,
        summaries: SummarySource,
        active_pods: Callable[[], Sequence[Pod]],
        killer: Evictor,
        reclaimer: NodeReclaimer,
        events: EventSink,
        is_critical: Callable[[Pod], bool],
        cleaned_up: Callable[[Pod], bool],
        disk_layout: DiskLayout,
        pressure: PressureSink | None = None,
        metrics: EvictionMetrics | None = None,
        before_periodic_pass: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.before_periodic_pass = before_periodic_pass
        """Awaited before a pass the monitoring interval starts (not one a memory notifier
        asked for): the PLEG's ``between_relists``, so that the pass's stats read -- the
        runtime asks every container's shim -- does not slow a relist's lists."""
        self.summaries = summaries
        self.active_pods = active_pods
        self.killer = killer
        self.reclaimer = reclaimer
        self.events = events
        self.is_critical = is_critical
        self.cleaned_up = cleaned_up
        self.disk_layout = disk_layout
        self.pressure = pressure
        self.state = EvictionState()
        self.thresholds = config.thresholds
        self._layout: tuple[bool, bool] | None = None
        self._kick = trio.Event()
        self._notifiers: list[tuple[Threshold, notifier.CgroupThresholdNotifier]] = []
        self._notifiers_armed_at: float | None = None

    @property
    def conditions(self) -> tuple[str, ...]:
        """The pressure conditions for node status (MemoryPressure, DiskPressure, PIDPressure)."""
        return self.state.conditions

    def admit(self, pod: Pod, qos: Callable[[Pod], str]) -> admission.Refusal | None:
        return admission.admit(pod, self.conditions, is_critical=self.is_critical, qos=qos)

    def kick(self) -> None:
        """Run a pass now (a memory notifier fired)."""
        self._kick.set()

    # -- the loop ----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._start_notifiers(nursery)
            task_status.started()
            try:
                while True:
                    evicted = await self._pass_logged()
                    if evicted:
                        log.info(
                            "eviction manager: pods %s evicted, waiting for cleanup",
                            _names(evicted),
                        )
                        await self._wait_for_cleanup(evicted)
                        continue
                    with trio.move_on_after(self.config.monitoring_interval) as timer:
                        await self._kick.wait()
                    self._kick = trio.Event()
                    if timer.cancelled_caught and self.before_periodic_pass is not None:
                        await self.before_periodic_pass()
            finally:
                for _, n in self._notifiers:
                    n.close()

    async def _pass_logged(self) -> list[Pod]:
        try:
            return await self.synchronize()
        except CriError as exc:  # the runtime is down or slow: the next pass tries again
            log.warning("eviction manager: failed to synchronize: %s", exc)
            return []
        except Exception:
            log.exception("eviction manager: failed to synchronize")
            return []

    async def _wait_for_cleanup(self, pods: Sequence[Pod]) -> None:
        # Polled, as upstream does: "cleaned up" is a question to the pod workers and the
        # runtime, not an event anyone sends.
        with trio.move_on_after(CLEANUP_TIMEOUT):
            while True:
                await trio.sleep(CLEANUP_POLL)
                if all(self.cleaned_up(p) for p in pods):
                    log.info("eviction manager: pods %s cleaned up", _names(pods))
                    return
        log.info("eviction manager: timed out waiting for pods %s to be cleaned up", _names(pods))

    def _start_notifiers(self, nursery: trio.Nursery) -> None:
        cfg = self.config
        if not cfg.kernel_memcg_notification:
            return
        for t in self.thresholds:
            if t.signal is Signal.MEMORY_AVAILABLE:
                path = cfg.memory_cgroup_root
            elif t.signal is Signal.ALLOCATABLE_MEMORY_AVAILABLE:
                path = cfg.pods_memory_cgroup
            else:
                continue
            if path is None:
                continue
            n = notifier.CgroupThresholdNotifier(path)
            self._notifiers.append((t, n))
            nursery.start_soon(self._watch_notifier, t, n)
            nursery.start_soon(n.keep_armed, functools.partial(self._arm_failed, t))

    async def _watch_notifier(self, t: Threshold, n: notifier.CgroupThresholdNotifier) -> None:
        while True:
            await n.wait()
            log.info("eviction manager: %s crossed", notifier.description(t))
            self.kick()

    def _arm_failed(self, t: Threshold, exc: Exception) -> None:
        log.info("eviction manager: failed to update %s: %s", notifier.description(t), exc)

    def _arm_notifiers(self, node: NodeUsage) -> None:
        now = trio.current_time()
        armed_at = self._notifiers_armed_at
        if armed_at is not None and now - armed_at <= notifier.REFRESH_INTERVAL:
            return
        self._notifiers_armed_at = now
        for t, n in self._notifiers:
            memory = (
                node.pods_memory if t.signal is Signal.ALLOCATABLE_MEMORY_AVAILABLE else node.memory
            )
            try:
                if memory is None:
                    raise ValueError("no memory figures in the summary")
                n.update(notifier.memcg_threshold(t, memory))
            except ValueError as exc:
                self._arm_failed(t, exc)

    # -- one pass ----------------------------------------------------------------------

    async def _fs_layout(self) -> tuple[bool, bool] | None:
        if self._layout is None:
            try:
                dedicated, split = await self.disk_layout()
            except Exception as exc:  # the runtime may not answer yet: retry next pass
                log.warning("eviction manager: failed to get the image filesystem layout: %s", exc)
                return None
            self.thresholds, warnings = update_containerfs_thresholds(
                self.config.thresholds, dedicated, split
            )
            for warning in warnings:
                log.warning("eviction manager: %s", warning)
            self._layout = (dedicated, split)
        return self._layout

    async def synchronize(self) -> list[Pod]:
        """One pass; the pods evicted (at most one, or all those over local storage limits)."""
        cfg = self.config
        if not cfg.thresholds and not cfg.local_storage_capacity_isolation:
            return []
        layout = await self._fs_layout()
        if layout is None:
            return []
        dedicated, split = layout
        pods = list(self.active_pods())
        node = await self.summaries.node_usage()
        observations = observe_signals(node)
        wanted = self._pods_to_read(pods, observations)
        stats = {p.uid: p for p in await self.summaries.pods_usage(wanted)}
        self._arm_notifiers(node)
        result = step(
            self.state,
            self.thresholds,
            observations,
            trio.current_time(),
            cfg.pressure_transition_period,
        )
        self.state = result.state
        if self.pressure is not None:
            self.pressure.conditions = result.conditions
        if cfg.local_storage_capacity_isolation:
            evictions = local_storage_evictions(
                pods, stats, dedicated_image_fs=dedicated, is_critical=self.is_critical
            )
            evicted = [e.pod for e in evictions if await self._evict(e)]
            if evicted:
                return evicted
        chosen = resource_to_reclaim(result.act_on)
        if chosen is None:
            return []
        threshold, resource = chosen
        log.warning("eviction manager: attempting to reclaim %s", resource)
        self.events.node_event(WARNING, THRESHOLD_MET_EVENT, f"Attempting to reclaim {resource}")
        if await self._reclaim_on_node(threshold.signal, dedicated, split):
            log.info("eviction manager: able to reduce %s pressure without evicting pods", resource)
            return []
        if not pods:
            log.error("eviction manager: thresholds met, but no pods are active to evict")
            return []
        ranked = rank(
            threshold.signal,
            pods,
            stats,
            dedicated_image_fs=dedicated,
            split_container_fs=split,
            pod_level_resources=cfg.pod_level_resources,
        )
        self._observe_stats_age(result.act_on, observations)
        eviction = choose_eviction(
            threshold,
            resource,
            result.act_on,
            observations,
            ranked,
            stats,
            max_pod_grace_period=cfg.max_pod_grace_period,
            is_critical=self.is_critical,
            pod_level_resources=cfg.pod_level_resources,
        )
        if eviction is None:
            log.info("eviction manager: unable to evict any pods from the node")
            return []
        await self._evict(eviction)
        return [eviction.pod]

    def _pods_to_read(self, pods: Sequence[Pod], observations: Observations) -> Set[str] | None:
        """The UIDs of the pods whose figures this pass may decide on (None: all). All of
        them while a threshold is met (ranking and the eviction's message read them, a
        soft threshold may be past its grace period); otherwise those over which
        ``local_storage_evictions`` may evict: at 500 pods and no pressure, the pass then
        reads the node's figures and the pods' CPU only."""
        if met_now(self.state, self.thresholds, observations):
            return None
        if not self.config.local_storage_capacity_isolation:
            return frozenset()
        return local_storage_candidates(pods, is_critical=self.is_critical)

    def _observe_stats_age(
        self, act_on: Sequence[Threshold], observations: Mapping[Signal, Observation]
    ) -> None:
        """How old each acted-on threshold's figure is, as the pass is about to evict."""
        if self.metrics is None:
            return
        for t in act_on:
            seen = observations.get(t.signal)
            if seen is not None and seen.time is not None:
                self.metrics.observe_eviction_stats_age(str(t.signal), seen.time)

    async def _reclaim_on_node(self, signal: Signal, dedicated: bool, split: bool) -> bool:
        steps = node_reclaim(signal, dedicated, split)
        if not steps:
            return False
        for reclaim in steps:
            try:
                if reclaim is Reclaim.CONTAINERS:
                    await self.reclaimer.delete_unused_containers()
                else:
                    await self.reclaimer.delete_unused_images()
            except Exception as exc:
                log.info(
                    "eviction manager: error reclaiming on the node (%s): %s", reclaim.value, exc
                )
        try:  # the node's figures alone: what tells whether the thresholds are resolved
            node = await self.summaries.node_usage()
        except Exception as exc:
            log.error("eviction manager: failed to get summary stats after reclaim: %s", exc)
            return False
        return not thresholds_met(self.thresholds, observe_signals(node), True)

    async def _evict(self, eviction: Eviction) -> bool:
        pod = eviction.pod
        if self.is_critical(pod):
            log.error("eviction manager: cannot evict a critical pod %s", pod.key)
            return False
        self.events.pod_event(
            pod, WARNING, REASON, eviction.message.text, eviction.message.annotations
        )
        try:
            await self.killer.evict(eviction)
        except Exception as exc:
            log.error("eviction manager: pod %s failed to evict: %s", pod.key, exc)
        else:
            log.info("eviction manager: pod %s is evicted successfully", pod.key)
        if self.metrics is not None:  # counted as upstream counts: once the kill was asked
            self.metrics.pod_evicted(eviction.metric_signal)
        return True


def _names(pods: Sequence[Pod]) -> str:
    return ", ".join(p.key for p in pods)
