"""The CPU manager: a resource manager that pins containers to CPUs.

With ``cpuManagerPolicy: none`` it only keeps the checkpoint (so that a later change of
policy is noticed). With ``static`` it allocates at admission (a refusal is the pod's
admission error), gives each container its cpuset in the CRI config (``contribute``),
frees a pod's CPUs when the pod is gone, and every ``cpuManagerReconcilePeriod`` (or
at once when the shared pool changed) drops the assignments of pods no longer active
and brings running containers' cpusets in line (``UpdateContainerResources``).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence

import trio

from kubelet.api import (
    Container,
    Pod,
    is_restartable_init_container,
    parse_quantity,
    to_millicores,
)
from kubelet.atomicfile import replace_file
from kubelet.boundedio import InputRefused, RunSync, read_checkpoint_file
from kubelet.cri import RuntimeClient, api, labels
from kubelet.decisions import NO_CONTRIBUTION, ContainerContribution, pod_qos
from kubelet.errors import ConfigError

from ..capabilities import (
    Admits,
    AdmitsResize,
    Binds,
    ContributesConfig,
    HintProvider,
    PreparesPod,
    ReleasesPod,
    ReportsCpus,
    ResourceManager,
)
from ..parts import CmParts
from ..resources import Refusal, ResizeRefusal
from ..topology import TopologyHint, TopologyHints, TopologyManager
from .checkpoint import CHECKPOINT_NAME, MAX_BYTES, CorruptCheckpoint, CpuState, decode, encode
from .cpuset import format_cpuset, parse_cpuset
from .policy import (
    AllocationError,
    PolicyOptions,
    StateMismatch,
    StaticPolicy,
    guaranteed_cpus,
    machine_conflict,
    pick_cpus,
)
from .takeby import NotEnoughCpus
from .topology import Topology, TopologyError, read_topology

log = logging.getLogger(__name__)

Counter = Callable[[str], None]
"""a metric to count: "requests" or "errors" of CPU pinning"""


STATIC_CPU_RESIZE = (
    "guaranteed_pod_cpu_manager_static_policy",
    'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
)


def _cpu_request(container: Container) -> int:
    asked = container.resources.requests.get("cpu") if container.resources else None
    return 0 if asked is None else parse_quantity(asked).milli_value()


def resizable_containers(pod: Pod) -> list[Container]:
    """The containers a resize changes: sidecars (restartable init containers) and the
    regular ones."""
    sidecars = [c for c in pod.spec.init_containers if is_restartable_init_container(c)]
    return [*sidecars, *pod.spec.containers]


class CpuManager(
    ResourceManager,
    Admits,
    AdmitsResize,
    HintProvider,
    PreparesPod,
    ReleasesPod,
    ContributesConfig,
    ReportsCpus,
    Binds,
):
    """The CPU manager over one policy (None: ``none``)."""

    name = "cpu"

    def __init__(
        self,
        policy: StaticPolicy | None,
        *,
        path: str,
        runtime: RuntimeClient,
        active: Callable[[], Sequence[Pod]],
        io: RunSync,
        period: float,
        count: Counter | None = None,
    ) -> None:
        self.policy = policy
        self.path = path
        self.runtime = runtime
        self.active = active
        self.io = io
        self.period = period
        self.count = count or (lambda _: None)
        self.applied: dict[str, str] = {}
        """container ID → the cpuset last sent to it"""
        self._recent: set[str] = set()
        """pods admitted since the last reconcile (not yet in the active list)"""
        self._dirty = False
        self._wake = trio.Event()
        self.topology: TopologyManager | None = None
        """whose affinities allocations follow (``bind``)"""

    # -- the resource manager protocol ------------------------------------------------

    def admit(self, pod: Pod, others: Sequence[Pod]) -> Refusal | None:
        if self.policy is None:
            return None
        containers = (*pod.spec.init_containers, *pod.spec.containers)
        pinned = [c for c in containers if guaranteed_cpus(pod, c)]
        uid = pod.metadata.uid
        try:
            changed = self.policy.allocate(pod, lambda name: self._affinity(uid, name))
        except AllocationError as exc:
            self.count("requests")
            self.count("errors")
            if self.policy.options.full_pcpus_only:
                self.count("unaligned")
            log.info("CPU manager refused pod %s: %s", pod.metadata.uid, exc.message)
            return exc.reason, exc.message
        for _ in pinned:
            self.count("requests")
            if self.policy.options.full_pcpus_only:
                self.count("aligned")  # whole physical cores, by construction
        self._recent.add(pod.metadata.uid)
        if changed:
            self._changed()
        return None

    def admit_resize(self, pod: Pod, allocated: Pod) -> ResizeRefusal | None:
        """Upstream (``InPlacePodVerticalScalingExclusiveCPUs`` off, its 1.36 default):
        the static policy refuses any CPU resize of a Guaranteed pod."""
        if self.policy is None or pod_qos(pod) != "Guaranteed":
            return None
        was = {c.name: c for c in (*allocated.spec.init_containers, *allocated.spec.containers)}
        for container in resizable_containers(pod):
            old = was.get(container.name)
            if _cpu_request(container) != (_cpu_request(old) if old is not None else 0):
                return STATIC_CPU_RESIZE
        return None

    async def prepare_pod(self, pod: Pod) -> None:
        await self.save()

    def bind(self, peers: Sequence[ResourceManager]) -> None:
        found = [p for p in peers if isinstance(p, TopologyManager)]
        self.topology = found[0] if found else None

    def _affinity(self, pod_uid: str, container: str) -> TopologyHint | None:
        return self.topology.affinity(pod_uid, container) if self.topology else None

    def exclusive_cpus(self, pod_uid: str, container: str) -> frozenset[int]:
        return self.policy.exclusive(pod_uid, container) if self.policy else frozenset()

    def allocatable_cpus(self) -> frozenset[int]:
        return self.policy.allocatable if self.policy is not None else frozenset()

    def topology_hints(self, pod: Pod, container: Container) -> TopologyHints:
        return self.policy.hints(pod, container) if self.policy is not None else {}

    def pod_topology_hints(self, pod: Pod) -> TopologyHints:
        return self.policy.pod_hints(pod) if self.policy is not None else {}

    def contribute(self, pod: Pod, container: Container) -> ContainerContribution:
        if self.policy is None:
            return NO_CONTRIBUTION
        cpus = self.policy.cpus_for(pod.metadata.uid, container.name)
        return ContainerContribution(cpuset_cpus=format_cpuset(cpus))

    async def release_pod(self, pod: Pod) -> None:
        if self.policy is not None and self.policy.release([pod.metadata.uid]):
            self._changed()
            await self.save()

    # -- state ----------------------------------------------------------------------

    def state(self) -> CpuState:
        if self.policy is None:
            return CpuState(policy="none")
        return self.policy.state()

    def _changed(self) -> None:
        self._dirty = True
        self._wake.set()

    async def save(self, force: bool = False) -> None:
        """Write the checkpoint when something changed since the last write."""
        if not (self._dirty or force):
            return
        self._dirty = False
        data = encode(self.state())
        await self.io(lambda: replace_file(self.path, data))

    # -- reconcile ------------------------------------------------------------------

    async def run(self) -> None:
        """Reconcile every period, and soon after the shared pool changes."""
        while True:
            with trio.move_on_after(self.period):
                await self._wake.wait()
            self._wake = trio.Event()
            try:
                await self.reconcile()
            except Exception:  # a failing runtime must not end the manager
                log.exception("CPU manager reconcile failed")

    async def reconcile(self) -> None:
        """Drop stale assignments, then send running containers their cpusets."""
        policy = self.policy
        if policy is None:
            return
        active = {p.metadata.uid for p in self.active()}
        stale = set(policy.pods()) - active - self._recent
        self._recent.clear()
        if policy.release(stale):
            self._dirty = True
        await self.save()
        running = await self.runtime.list_containers(state=api.CONTAINER_RUNNING)
        seen: set[str] = set()
        for c in running:
            uid, name = c.labels.get(labels.POD_UID), c.labels.get(labels.CONTAINER_NAME)
            if uid not in active or not name:
                continue
            seen.add(c.id)
            cpus = format_cpuset(policy.cpus_for(uid, name))
            if self.applied.get(c.id) == cpus:
                continue
            await self.runtime.update_container_resources(
                c.id, api.LinuxContainerResources(cpuset_cpus=cpus)
            )
            self.applied[c.id] = cpus
        for gone in set(self.applied) - seen:
            del self.applied[gone]


def _load_state(path: str) -> CpuState | None:
    """Read and decode together, off the loop: the checksum and the sets cost time."""
    data = read_checkpoint_file(path, MAX_BYTES)
    return decode(data) if data is not None else None


def _restore_error(path: str, problem: str) -> ConfigError:
    return ConfigError.single(
        "",
        "",
        f"could not restore state from checkpoint: {problem}, please drain this node and "
        f'delete the CPU manager checkpoint file "{path}" before restarting Kubelet',
    )


async def start_cpu_manager(parts: CmParts, nursery: trio.Nursery) -> ResourceManager:
    """The CPU manager of ``cpuManagerPolicy``, its checkpoint checked and written."""
    cfg, io = parts.options.config, parts.host.io
    path = os.path.join(parts.options.root_dir, CHECKPOINT_NAME)
    try:
        stored = await io(lambda: _load_state(path))
    except (CorruptCheckpoint, InputRefused, OSError) as exc:
        raise _restore_error(path, str(exc)) from None
    policy_name = cfg.cpu_manager_policy
    if stored is not None and stored.policy != policy_name:
        raise _restore_error(
            path,
            f'configured policy "{policy_name}" differs from state checkpoint policy '
            f'"{stored.policy}"',
        )
    policy = None
    if policy_name == "static":
        policy = await _static_policy(parts, stored)
    manager = CpuManager(
        policy,
        path=path,
        runtime=parts.runtime,
        active=parts.active,
        io=io,
        period=cfg.cpu_manager_reconcile_period,
        count=parts.count_cpu_pinning,
    )
    await manager.save(force=True)
    if policy is not None:
        nursery.start_soon(manager.run)
    return manager


async def _static_policy(parts: CmParts, stored: CpuState | None) -> StaticPolicy:
    cfg = parts.options.config
    try:
        topo = await parts.host.io(lambda: read_topology(parts.sys_root))
    except TopologyError as exc:
        raise ConfigError.single("", "", f"new static policy error: {exc}") from None
    options = PolicyOptions.parse(cfg.cpu_manager_policy_options)
    conflict = machine_conflict(options, topo, cfg.topology_manager_policy)
    if conflict is not None:
        raise ConfigError.single("", "", f"new static policy error: {conflict}")
    reserved = reserved_cpus(
        topo,
        cfg.reserved_system_cpus,
        cfg.kube_reserved.get("cpu"),
        cfg.system_reserved.get("cpu"),
        options,
    )
    policy = StaticPolicy(topo, reserved, options)
    if stored is not None:
        try:
            policy.restore(stored)
        except StateMismatch as exc:
            path = os.path.join(parts.options.root_dir, CHECKPOINT_NAME)
            raise _restore_error(path, str(exc)) from None
    log.info(
        "CPU manager: static policy, reserved CPUs %s, shared pool %s",
        format_cpuset(reserved),
        format_cpuset(policy.default),
    )
    return policy


def reserved_cpus(
    topo: Topology,
    listed: str,
    kube_cpu: str | None,
    system_cpu: str | None,
    options: PolicyOptions | None = None,
) -> frozenset[int]:
    """``reservedSystemCPUs``, else kube + system reserved CPU rounded up, taken from
    all CPUs as the policy takes them; ``ConfigError`` when there are none or too many."""
    if listed:
        reserved = parse_cpuset(listed)
        if not reserved <= topo.all_cpus:
            raise ConfigError.single(
                "",
                "reservedSystemCPUs",
                f"reserved CPUs {format_cpuset(reserved)} are not all on this machine "
                f"({format_cpuset(topo.all_cpus)})",
            )
        return reserved
    count = math.ceil((to_millicores(kube_cpu) + to_millicores(system_cpu)) / 1000)
    if count == 0:
        raise ConfigError.single(
            "",
            "",
            "new static policy error: the static policy requires systemreserved.cpu + "
            "kubereserved.cpu to be greater than zero",
        )
    try:
        return pick_cpus(topo, options or PolicyOptions(), topo.all_cpus, count)
    except NotEnoughCpus as exc:
        raise ConfigError.single("", "", f"new static policy error: {exc}") from None
