"""The cgroup component: the kubepods/QoS tree set up at start, pod cgroups on demand.

``run_cgroups`` is its entry. It reads the host's hierarchies (or takes a test tree),
builds the ``CgroupManager`` -- refusing, as upstream does, a ``cgroupRoot`` that does
not exist, the systemd driver where systemd does not run, or a reserved cgroup it
cannot limit -- creates ``kubepods`` (node allocatable), ``burstable`` and
``besteffort``, and runs the manager's minute loop (QoS shares, a failed allocatable
update retried) in its nursery. It hands back ``PodCgroups``, which is what the pod
driver (a pod's cgroup before its sandbox, removed after its teardown) and housekeeping
(the orphan sweep) use. With the systemd driver the connection to systemd
(``SystemdBus.serve``) runs in the same nursery.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import trio

from kubelet.api import Pod, parse_quantity
from kubelet.errors import ConfigError

from . import names
from .fs import CgroupError, CgroupFs
from .layout import CgroupLayout, read_layout
from .manager import (
    FAILED_CREATE_POD_CONTAINER,
    CgroupManager,
    CgroupSettings,
    Event,
    Observe,
    ReservedCgroupError,
    internal_capacity,
    read_pid_max,
)
from .names import CgroupName
from .swap import NodeSwap, startup_swap, volumes_may_swap
from .system import SystemCgroups
from .systemdaccess import HOST_SYSTEMD, SystemdAccess, SystemdUnavailable

if TYPE_CHECKING:
    from .systemd import SystemdBus
from .values import ResourceConfig
from .version import CGROUP_V1, CGROUP_V1_MAINTENANCE, CgroupVersionFacts, check_cgroup_version

__all__ = [
    "FAILED_CREATE_POD_CONTAINER",
    "CgroupHost",
    "CgroupParts",
    "PodCgroups",
    "host_cgroup_fs",
    "run_cgroups",
]

log = logging.getLogger(__name__)

_NO_LAYOUT = CgroupLayout(version=2)
"""``cgroupsPerQOS: false``: the manager touches no cgroup, the host's are not read."""

T = TypeVar("T")
RunSync = Callable[[Callable[[], T]], Awaitable[T]]
ActivePods = Callable[[], Sequence[Pod]]
QosOf = Callable[[Pod], str]


def host_cgroup_fs() -> CgroupFs:
    """The host's hierarchies, as ``/proc/self/mountinfo`` lists them."""
    try:
        return CgroupFs(read_layout())
    except (OSError, ValueError) as err:
        message = f"cannot read the cgroup mounts: {err}"
        raise ConfigError.single("", "cgroupsPerQOS", message) from err


class PodCgroups:
    """The pod side of the manager, as the pod driver and housekeeping call it: the QoS
    class of a pod and the active pods are looked up here, so callers pass only the pod."""

    def __init__(
        self,
        manager: CgroupManager,
        active: ActivePods,
        qos_of: QosOf,
        swap: NodeSwap | None = None,
        version: CgroupVersionFacts | None = None,
    ) -> None:
        self.manager = manager
        self.swap = swap or NodeSwap()
        """the node's swap facts, for the containers' swap settings"""
        self.version = version or CgroupVersionFacts()
        """the hierarchy's version and whether containers are OOM-killed as a group"""
        self._active = active
        self._qos_of = qos_of

    @property
    def enabled(self) -> bool:
        """``cgroupsPerQOS``: without it there are no pod cgroups at all."""
        return self.manager.settings.cgroups_per_qos

    def active(self) -> list[tuple[Pod, str]]:
        return [(pod, self._qos_of(pod)) for pod in self._active()]

    def parent(self, pod: Pod) -> str:
        """The sandbox's ``cgroup_parent`` ("" without ``cgroupsPerQOS``)."""
        return self.manager.pod_cgroup_parent(pod, self._qos_of(pod))

    async def ensure(self, pod: Pod) -> bool:
        """The pod's cgroup, created with its values when missing (True then); a
        ``CgroupError`` is the caller's to report (FailedCreatePodContainer)."""
        manager = self.manager
        if not manager.settings.cgroups_per_qos:
            return False  # no pod cgroups: nor the active pods' classes to size them
        qos_class = self._qos_of(pod)
        if manager.exists(manager.pod_cgroup(pod, qos_class)):
            # Every sync of a running pod lands here: a few stats of the cgroup filesystem
            # (in memory, never blocking) cost less than the hop to a worker thread.
            return False
        return await manager.ensure_pod(pod, qos_class, self.active())

    async def resize(self, pod: Pod, resource: str) -> None:
        """An in-place resize: the pod cgroup's ``resource`` ("cpu" or "memory") set to
        what ``pod`` (its new allocation) asks; nothing without ``cgroupsPerQOS`` or
        before the cgroup exists. A ``CgroupError`` is the caller's to report."""
        manager = self.manager
        if not manager.settings.cgroups_per_qos:
            return
        name = manager.pod_cgroup(pod, self._qos_of(pod))
        if not manager.exists(name):
            return
        config = manager.pod_config(pod, self._qos_of(pod))
        if resource == "cpu":
            part = ResourceConfig(
                cpu_shares=config.cpu_shares,
                cpu_quota=config.cpu_quota,
                cpu_period=config.cpu_period,
            )
        else:
            part = ResourceConfig(memory=config.memory if config.memory is not None else -1)
        await manager.apply(name, part)
        try:  # the QoS cgroups follow (upstream updates them after a resize too)
            await manager.update_qos(self.active())
        except CgroupError as err:
            log.info("Failed to update QoS cgroups after a resize: %s", err)

    async def drift(self, pod: Pod) -> dict[str, bool]:
        """The pod cgroup's resources ("cpu", "memory") not at what ``pod`` (its
        allocation) asks, each with whether the change grows it; none without the cgroup."""
        manager = self.manager
        if not manager.settings.cgroups_per_qos:
            return {}
        qos_class = self._qos_of(pod)
        name = manager.pod_cgroup(pod, qos_class)
        config = manager.pod_config(pod, qos_class)
        part = ResourceConfig(
            cpu_shares=config.cpu_shares,
            cpu_quota=config.cpu_quota,
            cpu_period=config.cpu_period,
            memory=config.memory if config.memory is not None else -1,
        )

        def read() -> dict[str, bool]:
            return manager.drift(name, part) if manager.exists(name) else {}

        found: dict[str, bool] = await manager.offload(read)
        return found

    async def memory_headroom(self, pod: Pod) -> tuple[int, int] | None:
        """(the memory limit ``pod``'s allocation gives its cgroup, what the cgroup uses
        now); None without a limit, a cgroup, or a readable usage."""
        manager = self.manager
        if not manager.settings.cgroups_per_qos:
            return None
        qos_class = self._qos_of(pod)
        limit = manager.pod_config(pod, qos_class).memory
        if limit is None or limit < 0:
            return None
        name = manager.pod_cgroup(pod, qos_class)

        def read() -> int | None:
            try:
                return manager.memory_usage(name) if manager.exists(name) else None
            except (CgroupError, ValueError, KeyError):
                return None

        usage: int | None = await manager.offload(read)
        return None if usage is None else (limit, usage)

    def _find(self, uid: str) -> CgroupName | None:
        """The pod cgroup of ``uid`` under whichever QoS parent holds it (a pod known only
        from the runtime has no spec to compute its class from)."""
        manager = self.manager
        for parent in manager.qos.roots():
            name = names.new_name(parent, names.POD_PREFIX + uid)
            if any(os.path.isdir(path) for path in manager.fs.dirs(manager.literal(name))):
                return name
        return None

    async def remove(self, uid: str) -> bool:
        """After the pod's teardown: its cgroup killed and removed, then the QoS cgroups
        brought in line with the pods left (upstream's killPod); True when there was one."""
        if not self.enabled or "/" in uid or "_" in uid:
            return False
        name = await self.manager.offload(self._find, uid)
        if name is None:
            return False
        await self.manager.remove_pod(name)
        try:
            await self.manager.update_qos(self.active())
        except CgroupError as err:  # again within a minute
            log.info("Failed to update QoS cgroups while killing pod: %s", err)
        return True

    async def sweep(
        self, known: Callable[[str], bool], volumes_exist: Callable[[str], bool]
    ) -> list[str]:
        """Upstream's orphan clean-up: every pod cgroup of a pod not ``known`` (asked
        just before it goes) is removed -- what still runs in it is killed first -- or,
        while that pod's volumes are still on disk, brought down to 2 cpu shares. The
        UIDs removed."""
        if not self.enabled:
            return []
        removed = []
        for uid, name in (await self.manager.pod_cgroups()).items():
            if known(uid):
                continue
            try:
                if volumes_exist(uid):
                    await self.manager.reduce_cpu_limits(name)
                    continue
                await self.manager.remove_pod(name)
            except CgroupError as err:
                log.warning("orphaned pod cgroup of %s not removed: %s", uid, err)
                continue
            log.info("removed orphaned pod cgroup %s", self.manager.literal(name))
            removed.append(uid)
        return removed


def _open(fs: Callable[[], CgroupFs], settings: CgroupSettings) -> CgroupFs | None:
    """The host's hierarchies. Without ``cgroupsPerQOS`` they are read all the same (the
    containers' swap settings, ``kubeletCgroups``, ``systemCgroups`` need them), and when
    they cannot be, only what needs them is left out (None)."""
    if settings.cgroups_per_qos or settings.kubelet_cgroups or settings.system_cgroups:
        return fs()
    try:
        return fs()
    except ConfigError as err:
        log.info("no cgroup hierarchies: %s", err)
        return None


def capacity_of(num_cores: int, memory_bytes: int, hugepages: Mapping[str, int]) -> dict[str, str]:
    """The machine's capacity as quantities: cpu, memory, ``hugepages-<size>``."""
    out = {"cpu": str(num_cores), "memory": str(memory_bytes)}
    for size, total in hugepages.items():
        out[f"hugepages-{size}"] = str(total)
    return out


@attrs.frozen(kw_only=True)
class CgroupHost:
    """Where the cgroups are: the hierarchies, where their writes run, /proc, systemd."""

    fs: Callable[[], CgroupFs] = host_cgroup_fs
    """the cgroup hierarchies (tests: a tree in a temporary directory)"""
    io: RunSync[Any]
    """where cgroup writes run (tests on a fake clock: inline)"""
    proc: Path = Path("/proc")
    systemd: SystemdAccess = HOST_SYSTEMD
    """the systemd cgroup driver's bus and systemd check"""


@attrs.frozen(kw_only=True)
class CgroupParts:
    """What the cgroup component is made from."""

    settings: CgroupSettings
    host: CgroupHost
    capacity: Mapping[str, str]
    """the machine's, as quantities (``capacity_of``): what kubepods is sized from"""
    active: ActivePods
    qos_of: QosOf
    record: Callable[[Event], None]
    """the Node's events (``FailedNodeAllocatableEnforcement``, swap warnings)"""
    noswap: Callable[[], bool] = lambda: True
    """whether tmpfs can keep memory-backed volumes off swap"""
    observe: Observe | None = None
    """told how long each cgroup create, update and destroy took (the manager's metric)"""


async def run_cgroups(
    parts: CgroupParts,
    *,
    task_status: trio.TaskStatus[PodCgroups] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Set the tree up, hand back ``PodCgroups``, keep the QoS cgroups current.

    A configuration the manager cannot honour stops start-up (``ConfigError``), after
    recording the events upstream records (``FailedNodeAllocatableEnforcement``).
    ``SystemCgroups.run`` runs beside: the moves of ``kubeletCgroups``/``systemCgroups``
    and the kubelet's ``oom_score_adj`` (``host.proc``: where /proc is read). The cgroup
    version is checked first (``failCgroupV1``, ``singleProcessOOMKill``: ``version.py``;
    a v1 host allowed gets upstream's ``CgroupV1`` Warning on the Node), then swap
    (``failSwapOn``), as upstream's container manager does; with swap on,
    ``noswap`` says whether tmpfs can keep memory-backed volumes off it (else a Node
    event says they may not be)."""
    settings, host, capacity = parts.settings, parts.host, parts.capacity

    async def offload(fn: Callable[..., Any], *args: Any) -> Any:
        return await host.io(functools.partial(fn, *args))

    sizes = [
        int(parse_quantity(name[len("hugepages-") :]).amount)
        for name in capacity
        if name.startswith("hugepages-")
    ]
    internal: dict[str, Fraction] = internal_capacity(capacity, read_pid_max())
    host_fs = _open(host.fs, settings)
    version = check_cgroup_version(
        host_fs.layout.version if host_fs is not None else None,
        fail_cgroup_v1=settings.fail_cgroup_v1,
        single_process_oom_kill=settings.single_process_oom_kill,
    )
    swap = startup_swap(
        host_fs,
        host.proc,
        fail_swap_on=settings.fail_swap_on,
        behavior=settings.swap_behavior,
        memory_capacity=int(internal.get("memory", 0)),
    )
    start = _Start(
        settings, host_fs, swap, version, sorted(sizes), internal, host.proc, parts.observe
    )
    try:
        await _serve(start, parts, offload, task_status)
    except BaseExceptionGroup as group:
        # a refusal at start-up reaches the caller as it was raised, not in a group
        single = _collapse(group)
        if isinstance(single, ConfigError):
            raise single from None
        raise


def _collapse(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


@attrs.frozen
class _Start:
    """What start-up read before the manager is made."""

    settings: CgroupSettings
    host_fs: CgroupFs | None
    swap: NodeSwap
    version: CgroupVersionFacts
    hugepage_sizes: list[int]
    internal: dict[str, Fraction]
    proc: Path
    observe: Observe | None


async def _serve(
    start: _Start,
    parts: CgroupParts,
    offload: Callable[..., Awaitable[Any]],
    task_status: trio.TaskStatus[PodCgroups],
) -> None:
    settings, host_fs, record = start.settings, start.host_fs, parts.record
    async with trio.open_nursery() as nursery:
        slices = None
        if settings.driver == names.SYSTEMD and settings.cgroups_per_qos:
            slices = await _open_systemd(nursery, parts.host.systemd)
        try:
            manager = CgroupManager(
                host_fs if settings.cgroups_per_qos and host_fs else CgroupFs(_NO_LAYOUT),
                settings,
                hugepage_sizes=start.hugepage_sizes,
                offload=offload,
                slices=slices,
                observe=start.observe,
            )
            events = await manager.start(start.internal)
        except ReservedCgroupError as err:
            for event in err.events:
                record(event)
            raise ConfigError.single("", "enforceNodeAllocatable", str(err)) from err
        except CgroupError as err:
            field = "cgroupDriver" if settings.driver == names.SYSTEMD else "cgroupRoot"
            raise ConfigError.single("", field, str(err)) from err
        swap = start.swap
        warning = volumes_may_swap(swap, await offload(parts.noswap)) if swap.on else None
        for event in [*events, *([warning] if warning is not None else []), *_v1(start)]:
            record(event)
        handle = PodCgroups(manager, parts.active, parts.qos_of, swap, start.version)
        await nursery.start(manager.run, start.internal, handle.active, record)
        moves = SystemCgroups(
            host_fs or CgroupFs(_NO_LAYOUT),
            settings.kubelet_cgroups,
            settings.system_cgroups,
            proc=start.proc,
            oom_score_adj=settings.oom_score_adj,
        )
        if moves.wanted:
            nursery.start_soon(moves.run, offload)
        task_status.started(handle)


def _v1(start: _Start) -> list[Event]:
    """Upstream's Warning on the Node of a v1 host it runs on (``failCgroupV1: false``)."""
    if start.version.version != 1:
        return []
    log.warning("%s", CGROUP_V1_MAINTENANCE)
    return [("Warning", CGROUP_V1, CGROUP_V1_MAINTENANCE)]


async def _open_systemd(nursery: trio.Nursery, access: SystemdAccess) -> SystemdBus:
    """systemd's manager on the system bus, kept connected in ``nursery``; where systemd
    cannot be used, start-up stops naming ``cgroupDriver`` (upstream refuses it too)."""
    try:
        from .systemd import SystemdBus  # the D-Bus client: the systemd driver only

        bus: SystemdBus = await nursery.start(SystemdBus(access).serve)
    except SystemdUnavailable as err:
        raise ConfigError.single("", "cgroupDriver", str(err)) from err
    return bus
