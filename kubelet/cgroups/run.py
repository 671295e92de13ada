"""The cgroup component: the kubepods/QoS tree set up at start, pod cgroups on demand.

``run_cgroups`` is its entry. It reads the host's hierarchies (or takes a test tree),
builds the ``CgroupManager`` -- refusing, as upstream does, a ``cgroupRoot`` that does
not exist, the systemd driver where systemd does not run, or a reserved cgroup it
cannot limit -- creates ``kubepods`` (node allocatable), ``burstable`` and
``besteffort``, and runs the manager's minute loop (QoS shares, a failed allocatable
update retried) in its nursery. It hands back ``PodCgroups``, which is what the pod
driver (a pod's cgroup before its sandbox, removed after its teardown) and housekeeping
(the orphan sweep) use.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, TypeVar

import trio

from kubelet.api.pod import Pod
from kubelet.api.quantity import parse_quantity
from kubelet.errors import ConfigError

from . import names
from .fs import CgroupError, CgroupFs
from .layout import CgroupLayout, read_layout
from .manager import (
    FAILED_CREATE_POD_CONTAINER,
    CgroupManager,
    CgroupSettings,
    Event,
    ReservedCgroupError,
    internal_capacity,
    read_pid_max,
)
from .names import CgroupName

__all__ = ["FAILED_CREATE_POD_CONTAINER", "PodCgroups", "host_cgroup_fs", "run_cgroups"]

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

    def __init__(self, manager: CgroupManager, active: ActivePods, qos_of: QosOf) -> None:
        self.manager = manager
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
        qos_class, manager = self._qos_of(pod), self.manager
        if manager.settings.cgroups_per_qos and manager.exists(manager.pod_cgroup(pod, qos_class)):
            # Every sync of a running pod lands here: a few stats of the cgroup filesystem
            # (in memory, never blocking) cost less than the hop to a worker thread.
            return False
        return await manager.ensure_pod(pod, qos_class, self.active())

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


def capacity_of(num_cores: int, memory_bytes: int, hugepages: Mapping[str, int]) -> dict[str, str]:
    """The machine's capacity as quantities: cpu, memory, ``hugepages-<size>``."""
    out = {"cpu": str(num_cores), "memory": str(memory_bytes)}
    for size, total in hugepages.items():
        out[f"hugepages-{size}"] = str(total)
    return out


async def run_cgroups(
    settings: CgroupSettings,
    fs: Callable[[], CgroupFs],
    capacity: Mapping[str, str],
    active: ActivePods,
    qos_of: QosOf,
    record: Callable[[Event], None],
    io: RunSync[Any],
    *,
    task_status: trio.TaskStatus[PodCgroups] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Set the tree up, hand back ``PodCgroups``, keep the QoS cgroups current.

    A configuration the manager cannot honour stops start-up (``ConfigError``), after
    recording the events upstream records (``FailedNodeAllocatableEnforcement``)."""

    async def offload(fn: Callable[..., Any], *args: Any) -> Any:
        return await io(functools.partial(fn, *args))

    sizes = [
        int(parse_quantity(name[len("hugepages-") :]).amount)
        for name in capacity
        if name.startswith("hugepages-")
    ]
    internal: dict[str, Fraction] = internal_capacity(capacity, read_pid_max())
    try:
        manager = CgroupManager(
            fs() if settings.cgroups_per_qos else CgroupFs(_NO_LAYOUT),
            settings,
            hugepage_sizes=sorted(sizes),
            offload=offload,
        )
        events = await manager.start(internal)
    except ReservedCgroupError as err:
        for event in err.events:
            record(event)
        raise ConfigError.single("", "enforceNodeAllocatable", str(err)) from err
    except CgroupError as err:
        field = "cgroupDriver" if settings.driver == names.SYSTEMD else "cgroupRoot"
        raise ConfigError.single("", field, str(err)) from err
    for event in events:
        record(event)
    handle = PodCgroups(manager, active, qos_of)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run, internal, handle.active, record)
        task_status.started(handle)
