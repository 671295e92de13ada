"""The device manager: device plugins' devices as extended resources, given to pods.

Plugins register on the registration socket; each gets a task in the container
manager's nursery that reads its ListAndWatch stream (``_run_plugin``). Admission picks
a pod's devices from the healthy free ones (``allocation.plan_pod``, pure, on the sync
loop: no plugin call there, so a hung plugin never holds admission); the plugin's
Allocate is called before the pod's sandbox (``prepare_pod``, in the pod's worker, under
a deadline), its answer checkpointed and given to each container's CRI config
(``contribute``); PreStartContainer runs between create and start when the plugin asks.
A plugin that goes away leaves its devices counted but unhealthy (capacity kept,
allocatable drops) for upstream's grace period, then its resource is removed; running
pods keep their devices throughout. With gate ResourceHealthStatus each regular
container's status names its devices' health (``resource_health``), and a change of it
is told to the container manager with the pods that hold the devices.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import stat
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

from kubelet.api import Container, Pod, ResourceHealth, ResourceStatus
from kubelet.atomicfile import replace_file
from kubelet.boundedio import InputRefused, RunSync, loads_json, read_regular_file
from kubelet.decisions import ContainerContribution, DeviceSpec, MountSpec
from kubelet.metrics import KubeletMetrics

from ..capabilities import (
    Admits,
    Binds,
    ContributesConfig,
    ExtendsNode,
    HintProvider,
    PreparesPod,
    PreStartHook,
    ReleasesPod,
    ReportsDevices,
    ReportsHealth,
    ResourceManager,
)
from ..hints import TopologyHints
from ..resources import NO_RESOURCES, AssignedDevice, NodeResources, Refusal, ResourceError
from ..topology import TopologyManager
from . import deviceplugin_api_pb2 as pb
from .allocation import AllocationError, Granted, PodDevices, device_requests, held, plan_pod
from .checkpoint import FILE_NAME, Checkpoint, CheckpointError, decode, encode
from .endpoint import Endpoint, PluginError
from .hints import DeviceNodes, by_affinity, device_hints, has_topology, pod_device_requests
from .names import HEALTHY, endpoint_path
from .registration import RegistrationRefused

log = logging.getLogger(__name__)

GRACE_PERIOD = 300.0
"""how long a plugin's resource outlives the plugin (upstream's endpointStopGracePeriod)"""
MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024
MAX_DEVICES = 10_000
"""devices one resource may list: a longer list fails the plugin's stream (a real node has
hundreds at most; each device is node status, checkpoint and pod-resources text)"""
MAX_DIALS = 64
"""registrations being dialled at once: more are refused at once, so a flood of them costs
the kubelet neither connections nor tasks"""
MAX_RESOURCES = 256
"""resources registered at once: more are refused (each is a task, a connection and an
entry of the node's capacity)"""
ADMISSION_ERROR = "UnexpectedAdmissionError"


def admission_message(err: object) -> str:
    return f"Allocate failed due to {err}, which is unexpected"


@attrs.define
class Device:
    healthy: bool
    numa: tuple[int, ...] = ()


@attrs.define
class Resource:
    """One extended resource and the plugin serving it (None: disconnected)."""

    devices: dict[str, Device] = attrs.field(factory=dict)
    endpoint: Endpoint | None = None
    options: Any = None
    scope: trio.CancelScope | None = None
    generation: int = 0

    def healthy(self) -> set[str]:
        return {d for d, dev in self.devices.items() if dev.healthy}


class DeviceManager(
    ResourceManager,
    ExtendsNode,
    Admits,
    HintProvider,
    PreparesPod,
    ReleasesPod,
    ContributesConfig,
    PreStartHook,
    ReportsDevices,
    ReportsHealth,
    Binds,
):
    """The ``ResourceManager`` of device plugins."""

    name = "devices"

    def __init__(
        self,
        directory: str,
        nursery: trio.Nursery,
        *,
        changed: Callable[[], None] = lambda: None,
        file_io: RunSync,
        metrics: KubeletMetrics | None = None,
        health_changed: Callable[[frozenset[str]], None] | None = None,
    ) -> None:
        self.directory = directory
        self._nursery = nursery
        self._changed = changed
        self._file_io = file_io
        self._metrics = metrics
        self._health_changed = health_changed
        """told the pods whose devices changed health (None: gate ResourceHealthStatus off)"""
        self.resources: dict[str, Resource] = {}
        self.allocations: PodDevices = {}
        self._dirty = trio.Event()
        self._generation = 0
        self._dialling = 0
        self._counted: set[str] = set()
        self.topology: TopologyManager | None = None
        """whose NUMA nodes hints cover and whose affinities allocations follow"""

    # -- state -----------------------------------------------------------------------

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.directory, FILE_NAME)

    def _checkpoint(self) -> Checkpoint:
        return Checkpoint(
            devices={u: {c: dict(g) for c, g in p.items()} for u, p in self.allocations.items()},
            registered={r: tuple(sorted(res.devices)) for r, res in self.resources.items()},
            numa={
                r: {d: v.numa for d, v in res.devices.items()} for r, res in self.resources.items()
            },
        )

    def _save(self) -> None:
        self._dirty.set()

    async def write_checkpoints(self) -> None:
        """The checkpoint writer: one write after each burst of changes."""
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            write = functools.partial(
                replace_file, self.checkpoint_path, encode(self._checkpoint())
            )
            try:
                await self._file_io(write)
            except OSError as exc:
                log.error("device manager checkpoint not written: %s", exc)

    async def restore(self) -> None:
        """Last run's allocations and resources: the resources count, unhealthy, until
        their plugins register again or the grace period ends."""
        path = self.checkpoint_path
        try:
            cp = await self._file_io(functools.partial(_read_checkpoint, path))
        except FileNotFoundError:
            return
        except (OSError, InputRefused, CheckpointError) as exc:
            log.warning("device manager checkpoint %s not read: %s", path, exc)
            return
        self.allocations = cp.devices
        for resource, ids in cp.registered.items():
            res = self.resources[resource] = Resource({d: Device(False) for d in ids})
            res.generation = self._next_generation()
            self._nursery.start_soon(self._expire, resource, res.generation)
        log.info("device manager: restored %d pods' devices", len(self.allocations))

    def _next_generation(self) -> int:
        self._generation += 1
        return self._generation

    # -- plugins ---------------------------------------------------------------------

    def count_registration(self, resource: str) -> None:
        """Every request is counted by its resource name (upstream's metric), but only the
        first ``MAX_RESOURCES`` names get a series: a flood of made-up names stays small."""
        if self._metrics is None:
            return
        if resource not in self._counted:
            if len(self._counted) >= MAX_RESOURCES:
                return
            self._counted.add(resource)
        self._metrics.observe_device_plugin_registration(resource)

    async def register(self, request: Any) -> None:
        """A valid registration: connect, then serve the plugin in its own task,
        replacing the resource's previous plugin."""
        name = request.resource_name
        path = endpoint_path(self.directory, request.endpoint)
        if path is None:
            raise RegistrationRefused(f'endpoint "{request.endpoint}" is outside {self.directory}')
        if name not in self.resources and len(self.resources) >= MAX_RESOURCES:
            raise RegistrationRefused(f"more than {MAX_RESOURCES} device plugin resources")
        why = _not_a_socket(path)
        if why is not None:
            raise RegistrationRefused(f'endpoint "{request.endpoint}" {why}')
        if self._dialling >= MAX_DIALS:
            raise RegistrationRefused(f"more than {MAX_DIALS} registrations in progress")
        endpoint = Endpoint(path)
        self._dialling += 1
        try:
            options = await endpoint.options()
        except PluginError as exc:
            endpoint.close()
            raise RegistrationRefused(f"failed to dial device plugin: {exc}") from exc
        finally:
            self._dialling -= 1
        res = self.resources.setdefault(name, Resource())
        if res.scope is not None:
            res.scope.cancel()
        if res.endpoint is not None:
            res.endpoint.close()
        res.endpoint, res.options, res.scope = endpoint, options, trio.CancelScope()
        res.generation = self._next_generation()
        log.info("Registered device plugin for resource %s at %s", name, endpoint.path)
        self._nursery.start_soon(self._run_plugin, name, res, res.generation, endpoint, res.scope)

    async def _run_plugin(
        self, name: str, res: Resource, generation: int, endpoint: Endpoint, scope: trio.CancelScope
    ) -> None:
        """Read the plugin's device lists until it goes away or is replaced."""
        with scope:
            try:
                async with contextlib.aclosing(endpoint.list_and_watch()) as replies:
                    async for reply in replies:
                        if res.generation != generation:
                            return
                        if len(reply.devices) > MAX_DEVICES:
                            raise PluginError(
                                f"ListAndWatch: {len(reply.devices)} devices, "
                                f"more than {MAX_DEVICES}"
                            )
                        self._update_devices(name, res, reply.devices)
                log.warning("device plugin %s ended its ListAndWatch stream", name)
            except PluginError as exc:
                log.warning("device plugin %s: %s", name, exc)
        if res.generation != generation:
            return  # replaced by a new registration
        endpoint.close()
        res.endpoint = res.scope = None
        before = _health(res)
        for dev in res.devices.values():
            dev.healthy = False
        self._tell_health(name, before)
        self._changed()
        await self._expire(name, generation)

    async def _expire(self, name: str, generation: int) -> None:
        await trio.sleep(GRACE_PERIOD)
        res = self.resources.get(name)
        if res is not None and res.generation == generation and res.endpoint is None:
            log.info("device plugin for %s gone for %gs: resource removed", name, GRACE_PERIOD)
            del self.resources[name]
            self._tell_health(name, _health(res))
            self._changed()
            self._save()

    def _update_devices(self, name: str, res: Resource, devices: Sequence[Any]) -> None:
        fresh = {
            d.ID: Device(d.health == HEALTHY, tuple(n.ID for n in d.topology.nodes))
            for d in devices
        }
        if fresh != res.devices:
            before, res.devices = _health(res), fresh
            self._tell_health(name, before)
            healthy = sum(1 for d in fresh.values() if d.healthy)
            log.info("device plugin %s: %d devices, %d healthy", name, len(fresh), healthy)
            self._changed()
            self._save()

    def _tell_health(self, resource: str, before: dict[str, bool]) -> None:
        """The pods holding a device of ``resource`` whose reported health changed get a
        new status (a device no longer listed reads healthy, as upstream)."""
        if self._health_changed is None:
            return
        res = self.resources.get(resource)
        after = _health(res) if res is not None else {}
        changed = {
            d for d in before.keys() | after.keys() if before.get(d, True) != after.get(d, True)
        }
        if not changed:
            return
        self._health_changed(
            frozenset(
                uid
                for uid, containers in self.allocations.items()
                for grants in containers.values()
                if resource in grants and changed & set(grants[resource].device_ids)
            )
        )

    def resource_health(self, pod: Pod, container: Container) -> Sequence[ResourceStatus]:
        """Per resource a regular container holds: its device IDs, each Healthy or
        Unhealthy as the plugin last listed it (one it no longer lists: Healthy, as
        upstream); init containers get none."""
        if self._health_changed is None or all(
            c.name != container.name for c in pod.spec.containers
        ):
            return ()
        out: list[ResourceStatus] = []
        for resource, grant in sorted(self.granted(pod.uid, container.name).items()):
            res = self.resources.get(resource)
            devices = res.devices if res is not None else {}
            out.append(
                ResourceStatus(
                    name=resource,
                    resources=tuple(
                        ResourceHealth(
                            resource_id=d,
                            health="Unhealthy"
                            if d in devices and not devices[d].healthy
                            else "Healthy",
                        )
                        for d in grant.device_ids
                    ),
                )
            )
        return out

    # -- the ResourceManager protocol -------------------------------------------------

    def extended_resources(self) -> NodeResources:
        if not self.resources:
            return NO_RESOURCES
        return NodeResources(
            capacity={r: str(len(res.devices)) for r, res in self.resources.items()},
            allocatable={r: str(len(res.healthy())) for r, res in self.resources.items()},
        )

    def healthy(self) -> dict[str, set[str]]:
        return {r: res.healthy() for r, res in self.resources.items()}

    def admit(self, pod: Pod, others: Sequence[Pod]) -> Refusal | None:
        """Pick the pod's devices (upstream allocates at admission); devices of pods no
        longer active are given back first, as upstream's ``updateAllocatedDevices``."""
        active = {p.uid for p in others} | {pod.uid}
        gone = [uid for uid in self.allocations if uid not in active]
        for uid in gone:
            del self.allocations[uid]
        if gone:
            self._save()
        try:
            plan = plan_pod(
                pod,
                self.allocations,
                self.healthy(),
                self.resources,
                functools.partial(self._order, pod.uid),
            )
        except AllocationError as exc:
            return ADMISSION_ERROR, admission_message(exc)
        if plan:
            self.allocations[pod.uid] = plan
        return None

    # -- topology ----------------------------------------------------------------------

    def bind(self, peers: Sequence[ResourceManager]) -> None:
        found = [p for p in peers if isinstance(p, TopologyManager)]
        self.topology = found[0] if found else None

    def _nodes(self, resource: str) -> DeviceNodes:
        res = self.resources.get(resource)
        return {d: dev.numa for d, dev in res.devices.items()} if res is not None else {}

    def _affinity(self, pod_uid: str, container: str) -> tuple[int, ...] | None:
        hint = self.topology.affinity(pod_uid, container) if self.topology else None
        return hint.nodes if hint is not None and hint.numa_affinity is not None else None

    def _order(self, pod_uid: str, container: str, resource: str, free: set[str]) -> list[str]:
        """Free devices on the container's NUMA affinity first (``filterByAffinity``)."""
        nodes = self._nodes(resource)
        affinity = self._affinity(pod_uid, container) if has_topology(nodes) else None
        return by_affinity(nodes, free, affinity)

    def _hints(self, resource: str, requested: int, allocated: set[str]) -> list[Any] | None:
        """One resource's hints (None: no preference): from what the pod already holds
        (a restarted kubelet), else from the healthy devices nobody holds."""
        nodes = self._nodes(resource)
        if self.topology is None or not has_topology(nodes):
            return None
        machine = self.topology.numa.nodes
        if allocated:
            if len(allocated) != requested:
                return []
            return device_hints(machine, nodes, allocated, requested)
        res = self.resources[resource]
        available = res.healthy() - held(self.allocations, resource)
        if len(available) < requested:
            return []
        return device_hints(machine, nodes, available, requested)

    def topology_hints(self, pod: Pod, container: Container) -> TopologyHints:
        """Upstream's device manager ``GetTopologyHints``."""
        mine = self.granted(pod.uid, container.name)
        out: dict[str, Any] = {}
        for resource, count in device_requests(container, self.resources).items():
            have = set(mine[resource].device_ids) if resource in mine else set()
            out[resource] = self._hints(resource, count, have)
        return {r: h for r, h in out.items() if h is not None}

    def pod_topology_hints(self, pod: Pod) -> TopologyHints:
        """Upstream's ``GetPodTopologyHints``: the pod's peak request per resource."""
        per = {c.name: device_requests(c, self.resources) for c in _all(pod)}
        out: dict[str, Any] = {}
        for resource, count in pod_device_requests(pod, per).items():
            have = {
                d
                for granted in self.allocations.get(pod.uid, {}).values()
                if resource in granted
                for d in granted[resource].device_ids
            }
            out[resource] = self._hints(resource, count, have)
        return {r: h for r, h in out.items() if h is not None}

    async def prepare_pod(self, pod: Pod) -> None:
        """The plugins' Allocate for each container's devices not yet answered."""
        if pod.uid not in self.allocations:
            if not any(device_requests(c, self.resources) for c in _all(pod)):
                return
            refusal = self.admit(pod, [])  # never admitted here (a checkpoint lost)
            if refusal is not None:
                raise ResourceError(*refusal)
        for container, granted in list(self.allocations.get(pod.uid, {}).items()):
            for resource, grant in list(granted.items()):
                if grant.response is None:
                    ids = await self._preferred(pod.uid, container, resource, grant.device_ids)
                    granted[resource] = Granted(ids)
                    answer = await self._allocate(resource, ids)
                    granted[resource] = Granted(ids, answer)
                    self._save()
            log.debug("pod %s container %s: devices allocated", pod.key, container)

    def _taken(self, resource: str, pod_uid: str, container: str) -> set[str]:
        """Devices of ``resource`` held by any container but this one."""
        return {
            d
            for uid, containers in self.allocations.items()
            for name, granted in containers.items()
            if (uid, name) != (pod_uid, container) and resource in granted
            for d in granted[resource].device_ids
        }

    async def _preferred(
        self, pod_uid: str, container: str, resource: str, ids: tuple[str, ...]
    ) -> tuple[str, ...]:
        """The plugin's preferred devices in place of admission's pick, when it offers
        GetPreferredAllocation: chosen among the pick and the free healthy devices, the
        devices reused from the pod's init containers included; an answer that is not
        such a set (or a device another pod took meanwhile) keeps admission's pick."""
        res = self.resources.get(resource)
        if res is None or res.endpoint is None or res.options is None:
            return ids
        if not res.options.get_preferred_allocation_available:
            return ids
        taken = self._taken(resource, pod_uid, container)
        available = sorted((res.healthy() - taken) | set(ids))
        must = sorted(set(ids) & taken)  # shared with the pod's init containers
        available = self._aligned(pod_uid, container, resource, available, len(ids), must)
        try:
            chosen = await res.endpoint.preferred(available, must, len(ids))
        except PluginError as exc:
            log.warning("device plugin %s: %s", resource, exc)
            return ids
        fresh = self._taken(resource, pod_uid, container) - set(must)
        valid = len(set(chosen)) == len(ids) and set(chosen) <= set(available)
        if not valid or set(chosen) & fresh or not set(must) <= set(chosen):
            return ids
        return tuple(chosen)

    def _aligned(
        self,
        pod_uid: str,
        container: str,
        resource: str,
        available: list[str],
        n: int,
        must: list[str],
    ) -> list[str]:
        """The devices the plugin may choose from: those on the container's NUMA
        affinity when they are enough (upstream lets it choose among the aligned only)."""
        nodes = self._nodes(resource)
        affinity = self._affinity(pod_uid, container) if has_topology(nodes) else None
        if affinity is None:
            return available
        aligned = {d for d in available if set(nodes.get(d, ())) & set(affinity)} | set(must)
        return sorted(aligned) if len(aligned) >= n else available

    async def _allocate(self, resource: str, ids: tuple[str, ...]) -> bytes:
        res = self.resources.get(resource)
        if res is None or res.endpoint is None:
            raise ResourceError(
                ADMISSION_ERROR, admission_message(f"device plugin for {resource} is not connected")
            )
        started = trio.current_time()
        try:
            answer = await res.endpoint.allocate(ids)
        except PluginError as exc:
            raise ResourceError(ADMISSION_ERROR, admission_message(exc)) from exc
        finally:
            if self._metrics is not None:
                self._metrics.observe_device_plugin_alloc(resource, trio.current_time() - started)
        return bytes(answer.SerializeToString())

    async def release_pod(self, pod: Pod) -> None:
        if self.allocations.pop(pod.uid, None) is not None:
            self._save()

    def granted(self, pod_uid: str, container: str) -> dict[str, Granted]:
        """What ``container`` of the pod holds, by resource."""
        return dict(self.allocations.get(pod_uid, {}).get(container, {}))

    def _assigned(self, resource: str, device: str) -> list[AssignedDevice]:
        """One entry per NUMA node of the device (one without topology: None)."""
        res = self.resources.get(resource)
        dev = res.devices.get(device) if res is not None else None
        nodes: tuple[int | None, ...] = (dev.numa if dev is not None else ()) or (None,)
        return [AssignedDevice(resource, device, node) for node in nodes]

    def container_devices(self, pod_uid: str, container: str) -> list[AssignedDevice]:
        return [
            a
            for resource, grant in sorted(self.granted(pod_uid, container).items())
            for device in grant.device_ids
            for a in self._assigned(resource, device)
        ]

    def allocatable_devices(self) -> list[AssignedDevice]:
        return [
            a
            for resource, res in sorted(self.resources.items())
            for device in sorted(res.healthy())
            for a in self._assigned(resource, device)
        ]

    def contribute(self, pod: Pod, container: Container) -> ContainerContribution:
        out = ContainerContribution()
        for _, grant in sorted(self.granted(pod.uid, container.name).items()):
            if grant.response is not None:
                out = out.merged(_contribution(grant.response))
        return out

    async def pre_start(self, pod: Pod, container: Container, container_id: str) -> None:
        for resource, grant in sorted(self.granted(pod.uid, container.name).items()):
            res = self.resources.get(resource)
            if res is None or res.options is None or not res.options.pre_start_required:
                continue
            if res.endpoint is None:
                raise ResourceError("PreStartHookError", f"device plugin {resource} is gone")
            try:
                await res.endpoint.pre_start(grant.device_ids)
            except PluginError as exc:
                raise ResourceError("PreStartHookError", str(exc)) from exc


def _health(res: Resource) -> dict[str, bool]:
    return {d: dev.healthy for d, dev in res.devices.items()}


def _not_a_socket(path: str) -> str | None:
    """Why the plugin socket at ``path`` is not dialled (None: it is a socket). A symbolic
    link is refused: it could lead the kubelet to any socket on the host."""
    try:
        mode = os.lstat(path).st_mode  # a local stat: no reason to leave the loop
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    return None if stat.S_ISSOCK(mode) else "is not a unix socket"


def _all(pod: Pod) -> tuple[Container, ...]:
    return (*pod.spec.init_containers, *pod.spec.containers)


def _contribution(blob: bytes) -> ContainerContribution:
    """A plugin's ``ContainerAllocateResponse`` as the container's CRI config takes it."""
    resp = pb.ContainerAllocateResponse.FromString(blob)
    return ContainerContribution(
        devices=tuple(
            DeviceSpec(d.container_path, d.host_path, d.permissions or "rwm") for d in resp.devices
        ),
        mounts=tuple(MountSpec(m.container_path, m.host_path, m.read_only) for m in resp.mounts),
        env=tuple(sorted(resp.envs.items())),
        annotations=tuple(sorted(resp.annotations.items())),
        cdi_devices=tuple(c.name for c in resp.cdi_devices),
    )


def _read_checkpoint(path: str) -> Checkpoint:
    """Read and decode, bounded (the file is outside data: any process as root may write it)."""
    blob = read_regular_file(path, MAX_CHECKPOINT_BYTES)
    return decode(loads_json(blob, max_bytes=MAX_CHECKPOINT_BYTES))
