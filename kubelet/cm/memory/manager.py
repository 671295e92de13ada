"""The memory manager: a resource manager that binds Guaranteed containers' memory to
NUMA nodes.

With ``memoryManagerPolicy: None`` it only keeps the checkpoint (so that a later change
of policy is noticed). With ``Static`` it offers hints to the topology manager, places
each Guaranteed container's memory and hugepages at admission (within the container's
topology affinity; a refusal is the pod's admission error), gives the container its
``cpuset.mems`` in the CRI config, reports the blocks to the pod-resources API, and
gives them back when the pod is gone or no longer active.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

import trio

from kubelet.api import Container, Pod
from kubelet.atomicfile import replace_file
from kubelet.boundedio import InputRefused, RunSync, read_checkpoint_file
from kubelet.decisions import NO_CONTRIBUTION, ContainerContribution
from kubelet.errors import ConfigError

from ..capabilities import (
    Admits,
    Binds,
    ContributesConfig,
    HintProvider,
    PreparesPod,
    ReleasesPod,
    ReportsMemory,
    ResourceManager,
)
from ..cpu import TopologyError, read_topology
from ..parts import CmParts
from ..resources import AssignedMemory, Refusal
from ..topology import TopologyHint, TopologyHints, TopologyManager
from .policy import AllocationError, StateMismatch, StaticPolicy
from .reserved import (
    ReservedMemoryError,
    check_reservations,
    node_reservation,
    reserved_memory_total,
    system_reserved,
)
from .state import CHECKPOINT_NAME, MAX_BYTES, CorruptCheckpoint, MemoryState, decode, encode

log = logging.getLogger(__name__)

NONE, STATIC = "None", "Static"

Counter = Callable[[str], None]
"""a metric to count: "requests" or "errors" of memory pinning"""


class MemoryManager(
    ResourceManager,
    Admits,
    HintProvider,
    PreparesPod,
    ReleasesPod,
    ContributesConfig,
    ReportsMemory,
    Binds,
):
    """The memory manager over one policy (None: ``None``)."""

    name = "memory"

    def __init__(
        self, policy: StaticPolicy | None, *, path: str, io: RunSync, count: Counter | None = None
    ) -> None:
        self.policy = policy
        self.path = path
        self.io = io
        self.count = count or (lambda _: None)
        self._dirty = False
        self.topology: TopologyManager | None = None

    def bind(self, peers: Sequence[ResourceManager]) -> None:
        found = [p for p in peers if isinstance(p, TopologyManager)]
        self.topology = found[0] if found else None

    def _affinity(self, pod_uid: str, container: str) -> TopologyHint | None:
        return self.topology.affinity(pod_uid, container) if self.topology else None

    def admit(self, pod: Pod, others: Sequence[Pod]) -> Refusal | None:
        policy = self.policy
        if policy is None:
            return None
        uid = pod.metadata.uid
        active = {p.metadata.uid for p in others} | {uid}
        if policy.release(set(policy.entries) - active):  # upstream's removeStaleState
            self._dirty = True
        for c in (*pod.spec.init_containers, *pod.spec.containers):
            try:
                if policy.allocate(pod, c, self._affinity(uid, c.name)):
                    self.count("requests")
                    self._dirty = True
            except AllocationError as exc:
                self.count("requests")
                self.count("errors")
                policy.release([uid])
                message = f"Allocate failed due to {exc}, which is unexpected"
                log.info("Memory manager refused pod %s: %s", uid, exc)
                return "UnexpectedAdmissionError", message
        return None

    async def prepare_pod(self, pod: Pod) -> None:
        await self.save()

    async def release_pod(self, pod: Pod) -> None:
        if self.policy is not None and self.policy.release([pod.metadata.uid]):
            self._dirty = True
            await self.save()

    def topology_hints(self, pod: Pod, container: Container) -> TopologyHints:
        return self.policy.hints(pod, container) if self.policy is not None else {}

    def pod_topology_hints(self, pod: Pod) -> TopologyHints:
        return self.policy.pod_hints(pod) if self.policy is not None else {}

    def contribute(self, pod: Pod, container: Container) -> ContainerContribution:
        if self.policy is None:
            return NO_CONTRIBUTION
        nodes = self.policy.numa_nodes(pod.metadata.uid, container.name)
        if not nodes:
            return NO_CONTRIBUTION
        return ContainerContribution(cpuset_mems=",".join(str(n) for n in nodes))

    def container_memory(self, pod_uid: str, container: str) -> Sequence[AssignedMemory]:
        if self.policy is None:
            return ()
        return [
            AssignedMemory(b.type, b.size, b.numa_affinity)
            for b in self.policy.blocks(pod_uid, container)
        ]

    def allocatable_memory(self) -> Sequence[AssignedMemory]:
        if self.policy is None:
            return ()
        return [AssignedMemory(b.type, b.size, b.numa_affinity) for b in self.policy.allocatable()]

    def state(self) -> MemoryState:
        return self.policy.state() if self.policy is not None else MemoryState(NONE)

    async def save(self, force: bool = False) -> None:
        """Write the checkpoint when something changed since the last write."""
        if not (self._dirty or force):
            return
        self._dirty = False
        data = encode(self.state())
        await self.io(lambda: replace_file(self.path, data))


def _restore_error(path: str, problem: str) -> ConfigError:
    return ConfigError.single(
        "",
        "",
        f"could not restore state from checkpoint: {problem}, please drain this node and "
        f'delete the memory manager checkpoint file "{path}" before restarting Kubelet',
    )


async def start_memory_manager(parts: CmParts, nursery: trio.Nursery) -> ResourceManager:
    """The memory manager of ``memoryManagerPolicy``, its checkpoint checked and written."""
    cfg = parts.options.config
    name = cfg.memory_manager_policy or NONE
    try:
        check_reservations(cfg.reserved_memory)
    except ReservedMemoryError as exc:
        raise ConfigError.single("", "reservedMemory", str(exc)) from None
    if name not in (NONE, STATIC):
        raise ConfigError.single("", "memoryManagerPolicy", f'unknown policy: "{name}"')
    policy = await _static_policy(parts) if name == STATIC else None
    path = os.path.join(parts.options.root_dir, CHECKPOINT_NAME)
    try:
        data = await parts.host.io(lambda: read_checkpoint_file(path, MAX_BYTES))
        stored = decode(data) if data is not None else None
    except (CorruptCheckpoint, InputRefused, OSError) as exc:
        raise _restore_error(path, str(exc)) from None
    if stored is not None and stored.policy != name:
        raise _restore_error(
            path,
            f'[memorymanager] configured policy "{name}" differs from state checkpoint '
            f'policy "{stored.policy}"',
        )
    if policy is not None and stored is not None:
        try:
            policy.restore(stored)
        except StateMismatch as exc:
            raise ConfigError.single("", "", str(exc)) from None
    count = parts.metrics.memory_pinning if parts.metrics is not None else None
    manager = MemoryManager(policy, path=path, io=parts.host.io, count=count)
    await manager.save(force=True)
    log.info("Memory manager: policy %s", name)
    return manager


async def _static_policy(parts: CmParts) -> StaticPolicy:
    cfg = parts.options.config
    try:
        topo = await parts.host.io(lambda: read_topology(parts.sys_root))
        reservation = node_reservation(
            cfg.system_reserved,
            cfg.kube_reserved,
            cfg.eviction_hard,
            parts.resources.memory_capacity,
        )
        reserved = system_reserved(cfg.reserved_memory, topo.numa.keys(), reservation)
    except (TopologyError, ReservedMemoryError, ValueError) as exc:
        raise ConfigError.single("", "", str(exc)) from None
    if reserved_memory_total(reserved.values()) <= 0:
        raise ConfigError.single(
            "", "", "[memorymanager] you should specify the system reserved memory"
        )
    nodes = {n: (node.memory, node.hugepages) for n, node in topo.numa.items()}
    return StaticPolicy(nodes, reserved)
