"""The eviction component: the manager's loop, its memory notifiers and the OOM watcher.

``run_eviction`` is the entry. It takes what the manager acts through -- the usage
figures (``SummarySource``), the pods (``EvictablePods``: the active pods, the kill path
of the pod workers, "cleaned up"), the node-level reclaim (the garbage collectors) and
the event recorder -- and writes the pressure conditions into ``NodePressure``, which
node status and admission read. ``eviction_settings`` turns the configuration into
thresholds at start-up (``ConfigError`` names the bad field), so a bad threshold stops
the kubelet before any pod is touched.

The OOM watcher reads /dev/kmsg in the same nursery: a machine-wide OOM kill becomes a
``SystemOOM`` Warning event on the node. Where /dev/kmsg cannot be read (a container,
no privilege) that is logged once and the kubelet runs on without it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import attrs
import trio

from kubelet.api import Pod
from kubelet.cgroups import node_allocatable_root, to_cgroupfs
from kubelet.config import Options, features
from kubelet.decisions import is_critical_pod, pod_qos
from kubelet.errors import ConfigError, Problem
from kubelet.events import EventRecorder, ObjectRef, node_ref, pod_ref
from kubelet.stats import Cgroups, Layout, oom

from . import admission
from .decide import Eviction
from .manager import (
    DiskLayout,
    EvictionConfig,
    EvictionManager,
    EvictionMetrics,
    NodeReclaimer,
    SummarySource,
)
from .thresholds import Threshold, ThresholdError, parse_thresholds

__all__ = [
    "EvictablePods",
    "EvictionParts",
    "NodePressure",
    "eviction_settings",
    "run_eviction",
]

log = logging.getLogger(__name__)

WARNING = "Warning"


@attrs.define
class NodePressure:
    """The pressure conditions as the eviction manager last computed them.

    Made by the composition root and handed to the eviction manager (which writes it),
    node status and admission (which read it), so none of them waits for another.
    """

    conditions: tuple[str, ...] = ()

    def admit(self, pod: Pod) -> admission.Refusal | None:
        """Upstream's eviction admit handler: None to admit ``pod`` under these conditions."""
        return admission.admit(pod, self.conditions, is_critical=is_critical_pod, qos=pod_qos)

    def has(self, condition: str) -> bool:
        return condition in self.conditions


class EvictablePods(Protocol):
    """What the eviction manager needs of the pod machinery (``pods.evict`` binds it)."""

    def active_pods(self) -> Sequence[Pod]: ...

    async def evict(self, eviction: Eviction) -> None: ...

    def cleaned_up(self, pod: Pod) -> bool: ...


def _field_problem(source: str, field: str, exc: ThresholdError) -> ConfigError:
    return ConfigError(Problem(source, field, str(exc)))


def eviction_settings(options: Options) -> tuple[Threshold, ...]:
    """The configured thresholds, as upstream's ``ParseThresholdConfig`` reads them.

    ConfigError names the field at fault: the maps are parsed on their own first, so the
    message says whether ``evictionHard``, ``evictionSoft`` (with its grace periods) or
    ``evictionMinimumReclaim`` is bad.
    """
    cfg, source = options.config, options.config_file
    checks: tuple[tuple[str, Callable[[], object]], ...] = (
        ("evictionHard", lambda: parse_thresholds(cfg.eviction_hard)),
        (
            "evictionSoftGracePeriod",
            lambda: parse_thresholds({}, {}, cfg.eviction_soft_grace_period),
        ),
        (
            "evictionSoft",
            lambda: parse_thresholds({}, cfg.eviction_soft, cfg.eviction_soft_grace_period),
        ),
        (
            "evictionMinimumReclaim",
            lambda: parse_thresholds({}, {}, {}, cfg.eviction_minimum_reclaim),
        ),
    )
    for field, check in checks:
        try:
            check()
        except ThresholdError as exc:
            raise _field_problem(source, field, exc) from None
    if cfg.eviction_max_pod_grace_period < 0:
        raise ConfigError(Problem(source, "evictionMaxPodGracePeriod", "must not be negative"))
    return parse_thresholds(
        cfg.eviction_hard,
        cfg.eviction_soft,
        cfg.eviction_soft_grace_period,
        cfg.eviction_minimum_reclaim,
        cfg.enforce_node_allocatable,
    )


def _config(options: Options, cgroups: Cgroups) -> EvictionConfig:
    cfg = options.config
    pods_cgroup = to_cgroupfs(node_allocatable_root(cfg.cgroup_root or "/", cfg.cgroups_per_qos))
    v1 = cgroups.layout is Layout.V1
    return EvictionConfig(
        thresholds=eviction_settings(options),
        pressure_transition_period=cfg.eviction_pressure_transition_period,
        max_pod_grace_period=cfg.eviction_max_pod_grace_period,
        local_storage_capacity_isolation=cfg.local_storage_capacity_isolation,
        pod_level_resources=options.features.enabled(features.POD_LEVEL_RESOURCES),
        # cgroup v2 has no usage threshold interface: the periodic pass only, as upstream
        kernel_memcg_notification=v1,
        memory_cgroup_root=cgroups.memory_path("/") if v1 else None,
        pods_memory_cgroup=cgroups.memory_path(pods_cgroup) if v1 else None,
    )


@attrs.frozen
class _Events:
    """The manager's ``EventSink`` over the recorder."""

    recorder: EventRecorder
    node: ObjectRef

    def node_event(self, event_type: str, reason: str, message: str) -> None:
        self.recorder.record(self.node, event_type, reason, message)

    def pod_event(
        self,
        pod: Pod,
        event_type: str,
        reason: str,
        message: str,
        annotations: Mapping[str, str],
    ) -> None:
        self.recorder.record(pod_ref(pod), event_type, reason, message, annotations)


@attrs.frozen
class OomWatcher:
    """Kernel OOM kills → ``SystemOOM`` node events (upstream's oomwatcher)."""

    recorder: EventRecorder
    node: ObjectRef
    pod_name: Callable[[str], str | None]
    """namespace/name of a pod UID this kubelet knows, else None"""
    path: str = "/dev/kmsg"

    def on_kill(self, instance: oom.OomInstance) -> None:
        uid = oom.pod_uid_of_cgroup(instance.task_cgroup or instance.container)
        message = oom.system_oom_message(instance, self.pod_name(uid) if uid else None)
        if message is None:
            return  # a container's own limit: its status says OOMKilled
        self.recorder.record(self.node, WARNING, oom.SYSTEM_OOM, message)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            await oom.watch_kmsg(self.on_kill, self.path)
        except OSError as exc:
            log.warning(
                "OOM watcher: cannot read %s (%s); system OOM events will not be recorded",
                self.path,
                exc,
            )


@attrs.frozen(kw_only=True)
class EvictionParts:
    """What the eviction component acts through (``agent`` builds it)."""

    options: Options
    node_name: str
    summaries: SummarySource
    pods: EvictablePods
    reclaimer: NodeReclaimer
    recorder: EventRecorder
    pressure: NodePressure
    disk_layout: DiskLayout
    pod_name: Callable[[str], str | None]
    """namespace/name of a pod by UID (the OOM watcher names the pod it hit)"""
    cgroups: Cgroups | None = None
    """where the memory notifiers arm (None: the host's)"""
    kmsg: str | None = "/dev/kmsg"
    """the kernel log the OOM watcher reads (None: no watcher; tests)"""
    metrics: EvictionMetrics | None = None
    before_periodic_pass: Callable[[], Awaitable[None]] | None = None


async def run_eviction(
    parts: EvictionParts,
    *,
    task_status: trio.TaskStatus[EvictionManager] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Watch the node's resources, reclaim and evict; until cancelled."""
    cgroups = parts.cgroups or Cgroups(Path("/"))
    pods, recorder, kmsg = parts.pods, parts.recorder, parts.kmsg
    manager = EvictionManager(
        _config(parts.options, cgroups),
        summaries=parts.summaries,
        active_pods=pods.active_pods,
        killer=pods,
        reclaimer=parts.reclaimer,
        events=_Events(recorder, node_ref(parts.node_name)),
        is_critical=is_critical_pod,
        cleaned_up=pods.cleaned_up,
        disk_layout=parts.disk_layout,
        pressure=parts.pressure,
        metrics=parts.metrics,
        before_periodic_pass=parts.before_periodic_pass,
    )
    async with trio.open_nursery() as nursery:
        if kmsg is not None:
            watcher = OomWatcher(recorder, node_ref(parts.node_name), parts.pod_name, kmsg)
            await nursery.start(watcher.run)
        await nursery.start(manager.run)
        task_status.started(manager)
