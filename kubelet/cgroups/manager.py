"""The container manager's cgroup side: the kubepods/QoS tree, pod cgroups, allocatable.

What upstream's container manager does with cgroups, over ``CgroupFs``:

- ``start`` (at start-up, before any pod): checks ``cgroupRoot`` exists, creates
  ``kubepods`` (limited to allocatable when ``enforceNodeAllocatable`` has
  "pods", else to capacity: the kernel's default of 1024 cpu shares would starve the
  pods), the ``burstable`` and ``besteffort`` cgroups, and the reserved cgroups' limits;
- ``run`` (one task, owned by ``run_cgroups``' nursery): every minute brings the QoS
  cgroups in line with the active pods and retries a ``kubepods`` update that failed
  (memory above the new limit until eviction frees it);
- ``ensure_pod`` before the sandbox: the QoS cgroups first (the new pod counts), then
  the pod cgroup, created with its values when missing and otherwise left alone;
- ``remove_pod`` after the pod's teardown: processes still in it are SIGKILLed (up to
  five rounds, as upstream), then the directories are removed bottom-up, retried five
  times 10 ms apart doubling (a killed process takes a moment to leave);
- ``pod_cgroups`` lists the pod cgroups on the host, for housekeeping's orphan sweep;
  ``reduce_cpu_limits`` is what upstream does instead of removing an orphan whose
  volumes are still mounted.

With the systemd driver (``slices`` given: systemd's D-Bus API), every cgroup is a
slice unit (slices.py): created with ``StartTransientUnit`` and its resource properties,
updated with ``SetUnitProperties``, removed with ``StopUnit`` -- and then, as
libcontainer's systemd manager does, the same values are written through ``fs`` too (the
hierarchies systemd does not manage, hugetlb, are made there). Construction without
``slices`` refuses the driver with upstream's message.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import signal
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import attrs
import trio

from kubelet.api import Pod, parse_quantity
from kubelet.config import KubeletConfiguration

from . import names
from .fs import UNIFIED, CgroupError, CgroupFs
from .names import BEST_EFFORT, BURSTABLE, GUARANTEED, CgroupName, QosCgroups
from .requests import pod_requests
from .slices import Property, resource_properties, slice_of, start_properties
from .values import (
    CPU_PERIOD,
    PIDS,
    ResourceConfig,
    node_allocatable,
    node_allocatable_config,
    qos_configs,
    reserved_config,
    resource_config_for_pod,
    v1_files,
    v2_files,
)

__all__ = [
    "FAILED_CREATE_POD_CONTAINER",
    "FAILED_NODE_ALLOCATABLE",
    "NODE_ALLOCATABLE_ENFORCED",
    "CgroupManager",
    "CgroupSettings",
    "Event",
    "ReservedCgroupError",
    "hugepage_sizes",
    "internal_capacity",
    "read_pid_max",
]

FAILED_NODE_ALLOCATABLE = "FailedNodeAllocatableEnforcement"
NODE_ALLOCATABLE_ENFORCED = "NodeAllocatableEnforced"
FAILED_CREATE_POD_CONTAINER = "FailedCreatePodContainer"
"""Recorded on the pod by the caller: "unable to ensure pod container exists: <why>"."""

QOS_UPDATE_INTERVAL = 60.0
ENFORCE_RETRY_INTERVAL = 60.0
KILL_ROUNDS = 5
REMOVE_ATTEMPTS = 5
CREATE, UPDATE, DESTROY = "create", "update", "destroy"
"""The operations ``kubelet_cgroup_manager_duration_seconds`` breaks its time down by."""
FULL_SCAN_EVERY = 30
"""``pod_cgroups`` lists every hierarchy at least once a minute at housekeeping's 2 s:
a pod cgroup left in some hierarchies only, where other hierarchies happen to hold as many
other pod cgroups, waits at most that long to be seen."""
REMOVE_FIRST_DELAY = 0.010

_V1_REQUIRED = ("cpu", "cpuacct", "cpuset", "memory", "systemd", "pids")
_V2_SUPPORTED = ("cpu", "cpuset", "memory", "hugetlb", "pids")

log = logging.getLogger(__name__)

Offload = Callable[..., Awaitable[Any]]
"""How a blocking operation runs: ``trio.to_thread.run_sync`` (tests run it inline, so
that the autojump clock never moves while a worker thread is busy)."""
Observe = Callable[[str, float], None]
"""Told (operation, seconds) of each cgroup create, update and destroy."""

Event = tuple[str, str, str]
"""(type, reason, message) of a Node event for the caller to record."""
Kill = Callable[[int, int], None]


class Slices(Protocol):
    """systemd's manager, as the systemd driver uses it (systemd.SystemdBus)."""

    async def start_slice(self, unit: str, properties: Sequence[Property]) -> bool: ...
    async def set_properties(self, unit: str, properties: Sequence[Property]) -> None: ...
    async def stop_unit(self, unit: str) -> None: ...


def _go_quote(name: CgroupName) -> str:
    """A cgroup name as upstream's messages print it (Go's %q of a []string)."""
    return "[" + " ".join(json.dumps(part) for part in name) + "]"


def _amounts(values: Mapping[str, str]) -> dict[str, Fraction]:
    return {name: parse_quantity(text).amount for name, text in values.items()}


class ReservedCgroupError(CgroupError):
    """A reserved cgroup could not be limited; ``events`` are to be recorded all the same."""

    def __init__(self, message: str, events: list[Event]) -> None:
        super().__init__(message)
        self.events = events


@attrs.frozen(kw_only=True)
class CgroupSettings:
    """The settings that shape the cgroups, from the KubeletConfiguration."""

    driver: str = names.CGROUPFS
    cgroup_root: str = "/"
    cgroups_per_qos: bool = True
    enforce: frozenset[str] = frozenset({"pods"})
    system_reserved: Mapping[str, Fraction] = attrs.field(factory=dict)
    kube_reserved: Mapping[str, Fraction] = attrs.field(factory=dict)
    system_reserved_cgroup: str = ""
    kube_reserved_cgroup: str = ""
    pod_pids_limit: int = -1
    cpu_cfs_quota: bool = True
    cpu_cfs_quota_period: int = CPU_PERIOD
    qos_reserved_memory: int | None = None
    """``qosReserved.memory`` percent, only with the QOSReserved gate"""
    pod_level_resources: bool = True
    kubelet_cgroups: str = ""
    system_cgroups: str = ""
    fail_swap_on: bool = True
    swap_behavior: str = ""
    fail_cgroup_v1: bool = True
    """refuse a cgroup v1 host (``failCgroupV1``)"""
    single_process_oom_kill: bool | None = None
    """``singleProcessOOMKill`` as set (None: unset)"""
    oom_score_adj: int | None = None
    """the kubelet's own ``oomScoreAdj``, re-applied by ``SystemCgroups.run`` (None: not)"""

    @classmethod
    def from_config(
        cls,
        config: KubeletConfiguration,
        *,
        pod_level_resources: bool = True,
        qos_reserved: bool = False,
    ) -> CgroupSettings:
        """The cgroup fields of the configuration; ``qos_reserved``: the QOSReserved gate,
        without which upstream parses ``qosReserved`` but does not apply it."""
        memory = config.qos_reserved.get("memory")
        return cls(
            driver=config.cgroup_driver,
            cgroup_root=config.cgroup_root or "/",
            cgroups_per_qos=config.cgroups_per_qos,
            enforce=frozenset(config.enforce_node_allocatable) - {"none"},
            system_reserved=_amounts(config.system_reserved),
            kube_reserved=_amounts(config.kube_reserved),
            system_reserved_cgroup=config.system_reserved_cgroup,
            kube_reserved_cgroup=config.kube_reserved_cgroup,
            pod_pids_limit=config.pod_pids_limit,
            cpu_cfs_quota=config.cpu_cfs_quota,
            cpu_cfs_quota_period=round(config.cpu_cfs_quota_period * 1_000_000),
            qos_reserved_memory=int(memory.rstrip("%")) if qos_reserved and memory else None,
            pod_level_resources=pod_level_resources,
            kubelet_cgroups=config.kubelet_cgroups,
            system_cgroups=config.system_cgroups,
            fail_swap_on=config.fail_swap_on,
            swap_behavior=config.memory_swap.swap_behavior,
            fail_cgroup_v1=config.fail_cgroup_v1,
            single_process_oom_kill=config.single_process_oom_kill,
            oom_score_adj=config.oom_score_adj,
        )


def hugepage_sizes(root: Path = Path("/sys/kernel/mm/hugepages")) -> tuple[int, ...]:
    """Page sizes (bytes) the kernel offers: ``hugepages-2048kB`` → 2097152."""
    sizes = []
    try:
        entries = os.listdir(root)
    except OSError:
        return ()
    for entry in entries:
        if entry.startswith("hugepages-") and entry.endswith("kB"):
            digits = entry[len("hugepages-") : -2]
            if digits.isdigit():
                sizes.append(int(digits) * 1024)
    return tuple(sorted(sizes))


class CgroupManager:
    """Creates, limits and removes the kubelet's cgroups (see the module docstring)."""

    def __init__(
        self,
        fs: CgroupFs,
        settings: CgroupSettings,
        *,
        hugepage_sizes: Sequence[int] = (),
        kill: Kill = os.kill,
        slices: Slices | None = None,
        offload: Offload = trio.to_thread.run_sync,
        observe: Observe | None = None,
    ) -> None:
        if settings.driver == names.SYSTEMD and slices is None and settings.cgroups_per_qos:
            raise CgroupError(
                "systemd not running on this host, cannot use systemd cgroups manager"
            )
        self.slices = slices if settings.driver == names.SYSTEMD else None
        self.fs = fs
        self.settings = settings
        self.kill = kill
        self.offload = offload
        self.observe = observe
        """(operation, seconds) of each create, update and destroy of a cgroup
        (``kubelet_cgroup_manager_duration_seconds``)"""
        self.driver = settings.driver
        self.root = names.node_allocatable_root(settings.cgroup_root, settings.cgroups_per_qos)
        self.qos = QosCgroups.under(self.root)
        self._hugetlb = fs.layout.has("hugetlb")
        self.hugepage_sizes = tuple(hugepage_sizes) if self._hugetlb else ()
        self._kubepods_enforced = False
        self.allocatable_memory: int | None = None
        """capacity minus the reservations (bytes), known once ``start`` ran: what
        ``qosReserved`` limits the QoS cgroups from"""
        self._requests: dict[int, tuple[weakref.ref[Pod], Mapping[str, Fraction]]] = {}
        self._scans = 0
        """``pod_cgroups`` calls so far (every ``FULL_SCAN_EVERY``-th lists every hierarchy)"""

    def _requests_of(self, pod: Pod) -> Mapping[str, Fraction]:
        """A pod's summed requests, computed once per pod object (pods are immutable, and
        the QoS update walks every active pod at each pod start)."""
        key = id(pod)
        hit = self._requests.get(key)
        if hit is not None and hit[0]() is pod:
            return hit[1]
        found = pod_requests(pod, pod_level_resources=self.settings.pod_level_resources)
        self._requests[key] = (weakref.ref(pod, lambda _ref: self._requests.pop(key, None)), found)
        return found

    # -- names ------------------------------------------------------------------------------

    def literal(self, name: CgroupName) -> str:
        return names.literal(name, self.driver)

    def pod_cgroup(self, pod: Pod, qos_class: str) -> CgroupName:
        return names.pod_cgroup(self.qos, qos_class, pod.metadata.uid)

    def pod_cgroup_parent(self, pod: Pod, qos_class: str) -> str:
        """The sandbox's ``cgroup_parent``: the pod cgroup's literal name, or "" (the
        runtime's default) without ``cgroupsPerQOS``."""
        if not self.settings.cgroups_per_qos:
            return ""
        return self.literal(self.pod_cgroup(pod, qos_class))

    # -- synchronous core (each public operation runs one of these in a worker thread) ------

    def _required(self) -> tuple[str, ...]:
        if self.fs.layout.version == 2:
            return (UNIFIED,)
        required = [c for c in _V1_REQUIRED if c in self.fs.layout.mounts]
        if self._hugetlb:
            required.append("hugetlb")
        return tuple(required)

    def missing(self, name: CgroupName) -> list[str]:
        """Why ``name`` does not count as existing (empty: it exists), as upstream's
        ``Validate``: a v1 directory missing, or (v2) a controller not enabled for it."""
        literal = self.literal(name)
        if self.fs.layout.version == 1:
            return self.fs.missing(literal, self._required())
        path = self.fs.paths(literal)[UNIFIED]
        if not os.path.isdir(path):
            return [path]
        wanted = set(_V2_SUPPORTED) & self.fs.layout.controllers
        enabled = set(self.fs.read(path, "cgroup.controllers").split())
        return sorted(wanted - enabled)

    def exists(self, name: CgroupName) -> bool:
        return not self.missing(name)

    @contextlib.contextmanager
    def _timed(self, operation: str) -> Iterator[None]:
        """Observe how long the body takes as ``operation``, whether it fails or not."""
        started = time.perf_counter()
        try:
            yield
        finally:
            if self.observe is not None:
                self.observe(operation, time.perf_counter() - started)

    def _set(self, name: CgroupName, config: ResourceConfig) -> None:
        """Update ``name`` to ``config``: an "update" of the metric."""
        with self._timed(UPDATE):
            self._write(name, config)

    def _write(self, name: CgroupName, config: ResourceConfig) -> None:
        """Write ``config`` into every hierarchy of ``name`` (libcontainer's ``Set``)."""
        paths = self.fs.paths(self.literal(name))
        if self.fs.layout.version == 2:
            path = paths[UNIFIED]
            for file, value in v2_files(config, self.hugepage_sizes):
                if file.startswith("hugetlb.") and not self._hugetlb:
                    continue
                self.fs.write(path, file, value)
                self._reserved_hugetlb(path, file, value, ".max", ".rsvd.max")
            return
        for controller, entries in v1_files(config, self.hugepage_sizes).items():
            if controller not in paths or (controller == "hugetlb" and not self._hugetlb):
                continue
            path = paths[controller]
            if controller == "cpu":
                self._set_cpu_v1(path, entries)
                continue
            for file, value in entries:
                self.fs.write(path, file, value)
                self._reserved_hugetlb(path, file, value, ".limit_in_bytes", ".rsvd.limit_in_bytes")

    def _reserved_hugetlb(self, path: str, file: str, value: str, plain: str, rsvd: str) -> None:
        """Newer kernels also account reservations; runc limits them alike when offered."""
        if file.startswith("hugetlb.") and file.endswith(plain) and ".rsvd." not in file:
            other = file[: -len(plain)] + rsvd
            if self.fs.has_file(path, other):
                self.fs.write(path, other, value)

    def _set_cpu_v1(self, path: str, entries: list[tuple[str, str]]) -> None:
        """Shares, then period before quota; a period the kernel refuses next to the old
        quota (EINVAL) is written again after the quota, as runc does."""
        values = dict(entries)
        if "cpu.shares" in values:
            self.fs.write(path, "cpu.shares", values["cpu.shares"])
        period, quota = values.get("cpu.cfs_period_us"), values.get("cpu.cfs_quota_us")
        if period is not None:
            try:
                self.fs.write(path, "cpu.cfs_period_us", period)
            except CgroupError as err:
                if quota is None or not isinstance(err.__cause__, OSError):
                    raise
                if err.__cause__.errno != errno.EINVAL:
                    raise
                self.fs.write(path, "cpu.cfs_quota_us", quota)
                self.fs.write(path, "cpu.cfs_period_us", period)
                return
        if quota is not None:
            self.fs.write(path, "cpu.cfs_quota_us", quota)

    def _create(self, name: CgroupName, config: ResourceConfig) -> None:
        with self._timed(CREATE):
            self._make(name, config)

    def _make(self, name: CgroupName, config: ResourceConfig) -> None:
        self.fs.create(self.literal(name))
        self._write(name, config)

    def _ensure(self, name: CgroupName, config: ResourceConfig) -> bool:
        """Create with ``config`` when missing, else update to it; True when created."""
        if self.exists(name):
            self._set(name, config)
            return False
        self._create(name, config)
        return True

    def memory_usage(self, name: CgroupName) -> int:
        """What ``name`` uses now (bytes), read from its memory controller."""
        return self._memory_usage(name)

    def _memory_usage(self, name: CgroupName) -> int:
        paths = self.fs.paths(self.literal(name))
        if self.fs.layout.version == 2:
            return int(self.fs.read(paths[UNIFIED], "memory.current"))
        return int(self.fs.read(paths["memory"], "memory.usage_in_bytes"))

    def drift(self, name: CgroupName, config: ResourceConfig) -> dict[str, bool]:
        """For each of "cpu" and "memory" whose files under ``name`` are not what
        ``config`` sets: whether ``config`` grows it (more shares or weight, a higher
        memory limit). A file that cannot be read counts as in line."""
        paths = self.fs.paths(self.literal(name))
        if self.fs.layout.version == 2:
            wanted = {
                ("cpu" if f.startswith("cpu.") else "memory", UNIFIED, f, v)
                for f, v in v2_files(config)
                if f.split(".")[0] in ("cpu", "memory")
            }
        else:
            wanted = {(c, c, f, v) for c, entries in v1_files(config).items() for f, v in entries}
        out: dict[str, bool] = {}
        for resource, hierarchy, file, value in sorted(wanted):
            if resource not in ("cpu", "memory") or hierarchy not in paths:
                continue
            try:
                now = self.fs.read(paths[hierarchy], file)
            except CgroupError:
                continue
            if _same_value(now, value):
                continue
            if file in ("cpu.shares", "cpu.weight", "memory.limit_in_bytes", "memory.max"):
                out[resource] = _limit(value) >= _limit(now)
            else:
                out.setdefault(resource, True)
        return out

    def _qos_configs(
        self, active: Iterable[tuple[Pod, str]], allocatable_memory: int | None
    ) -> dict[str, ResourceConfig]:
        if allocatable_memory is None:
            allocatable_memory = self.allocatable_memory
        return qos_configs(
            active,
            hugepage_sizes=self.hugepage_sizes,
            qos_reserved_memory=self.settings.qos_reserved_memory,
            allocatable_memory=allocatable_memory,
            pod_level_resources=self.settings.pod_level_resources,
            requests_of=self._requests_of,
        )

    def _qos_targets(self) -> dict[str, CgroupName]:
        return {
            GUARANTEED: self.qos.guaranteed,
            BURSTABLE: self.qos.burstable,
            BEST_EFFORT: self.qos.besteffort,
        }

    def _update_qos(
        self, active: Iterable[tuple[Pod, str]], allocatable_memory: int | None
    ) -> None:
        configs = self._qos_configs(active, allocatable_memory)
        targets = self._qos_targets()
        failed: list[str] = []
        for qos_class, config in configs.items():
            try:
                self._set(targets[qos_class], config)
            except CgroupError:
                failed.append(qos_class)
        if not failed:
            return
        # The memory of a class may be above its new limit: cap it at what it uses,
        # which keeps it from growing (upstream's retrySetMemoryReserve), then retry.
        for qos_class in failed:
            config = configs[qos_class]
            if config.memory is not None:
                usage = self._memory_usage(targets[qos_class])
                if usage > config.memory:
                    config = attrs.evolve(config, memory=usage)
            self._set(targets[qos_class], config)

    def _setup(self, internal_capacity: Mapping[str, Fraction]) -> None:
        """Upstream's setupNode for cgroups: root check, ``kubepods``, the QoS cgroups."""
        self._check_root()
        if not self.exists(self.root):
            self._create(self.root, self.kubepods_config(internal_capacity))
        unbounded = {size: 1 << 62 for size in self.hugepage_sizes}
        self._ensure(self.qos.burstable, ResourceConfig(hugepage_limits=unbounded))
        self._ensure(self.qos.besteffort, ResourceConfig(cpu_shares=2, hugepage_limits=unbounded))

    def _check_root(self) -> None:
        root = names.parse_cgroupfs(self.settings.cgroup_root)
        if self.missing(root):
            raise CgroupError(f"invalid configuration: cgroup-root {_go_quote(root)} doesn't exist")

    def _reserved_targets(self) -> Iterator[tuple[str, str, str, ResourceConfig]]:
        """(key, what, cgroup, values) of each reserved cgroup ``enforceNodeAllocatable``
        lists, in upstream's order."""
        settings = self.settings
        for key, cgroup, reserved in (
            ("system-reserved", settings.system_reserved_cgroup, settings.system_reserved),
            ("kube-reserved", settings.kube_reserved_cgroup, settings.kube_reserved),
        ):
            label = "System" if key.startswith("system") else "Kube"
            for compressible in (False, True):
                if key + ("-compressible" if compressible else "") not in settings.enforce:
                    continue
                what = f"{label} Reserved{' Compressible' if compressible else ''}"
                yield key, what, cgroup, reserved_config(reserved, compressible_only=compressible)

    def _enforce_reserved(self) -> list[Event]:
        """``system-reserved``/``kube-reserved`` (and their ``-compressible`` forms): the
        named cgroups, which must exist, limited to the reservation. A failure stops the
        kubelet, as upstream's does."""
        events: list[Event] = []
        for key, what, cgroup, config in self._reserved_targets():
            name = names.parse(cgroup, self.driver)
            try:
                missing = self.missing(name)
                if missing:
                    raise CgroupError(
                        f"cgroup {_go_quote(name)} has some missing paths: " + ", ".join(missing)
                    )
                self._set(name, config)
            except CgroupError as err:
                message = f"Failed to enforce {what} Cgroup Limits on {json.dumps(cgroup)}: {err}"
                events.append(("Warning", FAILED_NODE_ALLOCATABLE, message))
                raise ReservedCgroupError(message, events) from err
            kind = key.replace("-", " ")
            events.append(
                ("Normal", NODE_ALLOCATABLE_ENFORCED, f"Updated limits on {kind} cgroup {cgroup}")
            )
        return events

    def kubepods_config(self, internal_capacity: Mapping[str, Fraction]) -> ResourceConfig:
        return node_allocatable_config(
            internal_capacity,
            self.settings.system_reserved,
            self.settings.kube_reserved,
            enforce_pods="pods" in self.settings.enforce,
        )

    def _enforce_kubepods(self, internal_capacity: Mapping[str, Fraction]) -> Event:
        try:
            self._set(self.root, self.kubepods_config(internal_capacity))
        except CgroupError as err:
            return self._kubepods_failed(err)
        return ("Normal", NODE_ALLOCATABLE_ENFORCED, "Updated Node Allocatable limit across pods")

    def _kubepods_failed(self, err: CgroupError) -> Event:
        message = f"Failed to update Node Allocatable Limits {_go_quote(self.root)}: {err}"
        return ("Warning", FAILED_NODE_ALLOCATABLE, message)

    def _kill_round(self, pids: Iterable[int], killed: set[int]) -> list[str]:
        errors = []
        for pid in sorted(pids):
            if pid in killed:
                continue
            try:
                self.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                killed.add(pid)  # already gone
            except OSError as err:
                errors.append(f"pid {pid}: {err.strerror or err}")
            else:
                killed.add(pid)
        return errors

    def _kill_all(self, name: CgroupName) -> None:
        literal = self.literal(name)
        pids = self.fs.procs(literal)
        if not pids:
            return
        killed: set[int] = set()
        errors: list[str] = []
        for _ in range(KILL_ROUNDS):
            errors = self._kill_round(pids, killed)
            if not errors:
                return
        raise CgroupError(
            f"failed to kill all the processes attached to the {literal} cgroups : "
            + "; ".join(errors)
        )

    # -- the systemd driver: the unit first, then the same values through fs ----------------

    async def _unit_create(self, name: CgroupName, config: ResourceConfig) -> None:
        assert self.slices is not None
        unit, parent = slice_of(name)
        version = self.fs.layout.version
        properties = [
            *start_properties(unit, parent, version),
            *resource_properties(config, version),
        ]
        await self.slices.start_slice(unit, properties)

    async def _unit_update(self, name: CgroupName, config: ResourceConfig) -> None:
        assert self.slices is not None
        properties = resource_properties(config, self.fs.layout.version)
        if properties and name:  # the root (a reserved cgroup "/") is no unit of ours
            await self.slices.set_properties(slice_of(name)[0], properties)

    async def apply(
        self, name: CgroupName, config: ResourceConfig, *, create: bool = False
    ) -> None:
        """Create or update ``name``: its slice first (systemd driver), then the files."""
        with self._timed(CREATE if create else UPDATE):
            if self.slices is not None:
                await (self._unit_create if create else self._unit_update)(name, config)
            await self.offload(self._make if create else self._write, name, config)

    async def _setup_slices(self, internal_capacity: Mapping[str, Fraction]) -> None:
        """``_setup`` for the systemd driver: kubepods.slice and the QoS slices."""
        await self.offload(self._check_root)
        unbounded = {size: 1 << 62 for size in self.hugepage_sizes}
        for name, config, update in (
            (self.root, self.kubepods_config(internal_capacity), False),
            (self.qos.burstable, ResourceConfig(hugepage_limits=unbounded), True),
            (self.qos.besteffort, ResourceConfig(cpu_shares=2, hugepage_limits=unbounded), True),
        ):
            if not await self.offload(self.exists, name):
                await self.apply(name, config, create=True)
            elif update:
                await self.apply(name, config)

    async def _enforce_kubepods_now(self, internal_capacity: Mapping[str, Fraction]) -> Event:
        if self.slices is not None:
            try:
                await self._unit_update(self.root, self.kubepods_config(internal_capacity))
            except CgroupError as err:
                return self._kubepods_failed(err)
        event: Event = await self.offload(self._enforce_kubepods, internal_capacity)
        return event

    async def _reserved_units(self) -> None:
        """systemd driver: the reserved slices' properties, before their files."""
        for _key, what, cgroup, config in self._reserved_targets():
            name = names.parse(cgroup, self.driver)
            if await self.offload(self.missing, name):
                continue  # the file pass names what is missing
            try:
                await self._unit_update(name, config)
            except CgroupError as err:
                message = f"Failed to enforce {what} Cgroup Limits on {json.dumps(cgroup)}: {err}"
                event = ("Warning", FAILED_NODE_ALLOCATABLE, message)
                raise ReservedCgroupError(message, [event]) from err

    async def _qos_units(
        self, active: Sequence[tuple[Pod, str]], allocatable_memory: int | None
    ) -> None:
        configs = self._qos_configs(active, allocatable_memory)
        for qos_class, name in self._qos_targets().items():
            await self._unit_update(name, configs[qos_class])

    # -- asynchronous operations ------------------------------------------------------------

    async def start(self, internal_capacity: Mapping[str, Fraction]) -> list[Event]:
        """Set up the tree; the events to record. ``CgroupError`` when the kubelet must
        not start (root missing); ``ReservedCgroupError`` (with the events so far) when a
        reserved cgroup cannot be limited."""
        if not self.settings.cgroups_per_qos:
            return []
        allocatable = node_allocatable(
            internal_capacity, self.settings.system_reserved, self.settings.kube_reserved
        )
        if "memory" in allocatable:
            self.allocatable_memory = int(allocatable["memory"])
        if self.slices is None:
            await self.offload(self._setup, internal_capacity)
        else:
            await self._setup_slices(internal_capacity)
        event = await self._enforce_kubepods_now(internal_capacity)
        self._kubepods_enforced = event[1] == NODE_ALLOCATABLE_ENFORCED
        if self.slices is not None:
            await self._reserved_units()
        return [event, *await self.offload(self._enforce_reserved)]

    async def run(
        self,
        internal_capacity: Mapping[str, Fraction],
        active_pods: Callable[[], Sequence[tuple[Pod, str]]],
        record: Callable[[Event], None],
        *,
        allocatable_memory: Callable[[], int | None] = lambda: None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """After ``start``: keep the QoS cgroups current (every minute) and retry a failed
        ``kubepods`` update (every minute) until it succeeds."""
        task_status.started()
        if not self.settings.cgroups_per_qos:
            await trio.sleep_forever()
        next_enforce = trio.current_time() + ENFORCE_RETRY_INTERVAL
        while True:
            await trio.sleep(QOS_UPDATE_INTERVAL)
            try:
                await self.update_qos(active_pods(), allocatable_memory())
            except CgroupError as err:
                log.info("Failed to reserve QoS requests: %s", err)  # again next round
            if not self._kubepods_enforced and trio.current_time() >= next_enforce:
                event = await self._enforce_kubepods_now(internal_capacity)
                record(event)
                self._kubepods_enforced = event[1] == NODE_ALLOCATABLE_ENFORCED
                next_enforce = trio.current_time() + ENFORCE_RETRY_INTERVAL

    async def update_qos(
        self, active: Sequence[tuple[Pod, str]], allocatable_memory: int | None = None
    ) -> None:
        if not self.settings.cgroups_per_qos:
            return
        if self.slices is not None:
            await self._qos_units(active, allocatable_memory)
        await self.offload(self._update_qos, active, allocatable_memory)

    def pod_config(self, pod: Pod, qos_class: str) -> ResourceConfig:
        """The values of ``pod``'s cgroup, from its (allocated) resources."""
        return resource_config_for_pod(
            pod,
            qos_class,
            enforce_cpu_limits=self.settings.cpu_cfs_quota,
            cpu_period=self.settings.cpu_cfs_quota_period,
            pod_level_resources=self.settings.pod_level_resources,
            pids_limit=self.settings.pod_pids_limit,
        )

    async def ensure_pod(
        self,
        pod: Pod,
        qos_class: str,
        active: Sequence[tuple[Pod, str]],
        *,
        allocatable_memory: int | None = None,
    ) -> bool:
        """Before the sandbox: the pod's cgroup with its values (QoS cgroups updated first
        when it is new). True when it was created; an existing one is left as it is."""
        if not self.settings.cgroups_per_qos:
            return False
        name = self.pod_cgroup(pod, qos_class)
        config = self.pod_config(pod, qos_class)

        if self.slices is not None:
            if await self.offload(self.exists, name):
                return False
            try:
                await self.update_qos(active, allocatable_memory)
            except CgroupError as err:  # as upstream: logged, the pod cgroup matters more
                log.info("Failed to update QoS cgroups while syncing pod: %s", err)
            await self.apply(name, config, create=True)
            return True

        def work() -> bool:
            if self.exists(name):
                return False
            try:
                self._update_qos(active, allocatable_memory)
            except CgroupError as err:  # as upstream: logged, the pod cgroup matters more
                log.info("Failed to update QoS cgroups while syncing pod: %s", err)
            self._create(name, config)
            return True

        created: bool = await self.offload(work)
        return created

    async def remove_pod(self, name: CgroupName) -> None:
        """After the pod's teardown: kill what is left in it, remove it (idempotent)."""
        await self.offload(self._kill_all, name)
        with self._timed(DESTROY):
            await self._destroy(name)

    async def _destroy(self, name: CgroupName) -> None:
        """Stop the slice (systemd driver) and remove the directories, retried while a
        killed process is still leaving."""
        literal = self.literal(name)
        if self.slices is not None:
            await self.slices.stop_unit(slice_of(name)[0])
        delay = REMOVE_FIRST_DELAY
        left: list[str] = []
        for attempt in range(REMOVE_ATTEMPTS):
            if attempt:
                await trio.sleep(delay)
                delay *= 2
            left = await self.offload(self.fs.remove, literal)
            if not left:
                return
        raise CgroupError(
            f"failed to delete cgroup paths for {literal} : failed to remove paths: "
            + ", ".join(left)
        )

    async def reduce_cpu_limits(self, name: CgroupName) -> None:
        await self.apply(name, ResourceConfig(cpu_shares=2))

    async def pod_cgroups(self) -> dict[str, CgroupName]:
        """UID → pod cgroup for every pod cgroup on the host (housekeeping's orphan scan,
        every 2 s). Each hierarchy is listed on the first call and every
        ``FULL_SCAN_EVERY``-th; in between one is, while the others count as many pod
        cgroups (``CgroupFs.children``)."""
        if not self.settings.cgroups_per_qos:
            return {}
        every_hierarchy = self._scans % FULL_SCAN_EVERY == 0
        self._scans += 1

        def scan() -> dict[str, CgroupName]:
            found: dict[str, CgroupName] = {}
            for parent in self.qos.roots():
                parent_literal = self.literal(parent)
                listed = self.fs.children(parent_literal, every_hierarchy=every_hierarchy)
                for child in sorted(listed):
                    name = names.parse(parent_literal.rstrip("/") + "/" + child, self.driver)
                    full = (*parent, name[-1])
                    uid = names.pod_uid_of(full, self.qos)
                    if uid:
                        found[uid] = full
            return found

        found: dict[str, CgroupName] = await self.offload(scan)
        return found


def read_pid_max(proc: Path = Path("/proc/sys/kernel")) -> int | None:
    """The host's process limit: ``pid_max``, or ``threads-max`` when lower (upstream's
    ``pidlimit.Stats``); None when unreadable."""
    try:
        pid_max = int((proc / "pid_max").read_text())
    except (OSError, ValueError):
        return None
    try:
        return min(pid_max, int((proc / "threads-max").read_text()))
    except (OSError, ValueError):
        return pid_max


def internal_capacity(capacity: Mapping[str, str], pid_max: int | None) -> dict[str, Fraction]:
    """Capacity (cpu, memory, hugepages-*) plus ``pid``: what ``kubepods`` is sized from."""
    out = _amounts(capacity)
    out.pop("pods", None)
    if pid_max is not None:
        out[PIDS] = Fraction(pid_max)
    return out


_UNLIMITED = 1 << 62
"""a v1 limit at or above this reads back as the kernel's "no limit" (-1 written)"""


def _limit(text: str) -> float:
    """A cgroup file's number, "max", -1 and the v1 page-rounded maximum as infinity."""
    first = text.split()[0] if text.split() else ""
    if first == "max":
        return float("inf")
    try:
        value = int(first)
    except ValueError:
        return float("inf")
    return float("inf") if value < 0 or value >= _UNLIMITED else float(value)


def _same_value(now: str, wanted: str) -> bool:
    if now == wanted:
        return True
    if len(now.split()) != len(wanted.split()):
        return False
    return all(_limit(a) == _limit(b) for a, b in zip(now.split(), wanted.split(), strict=True))
