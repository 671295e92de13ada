"""The static policy's decisions: which containers get exclusive CPUs, which ones, and
what is left for everyone else (the shared pool). Pure: no I/O, no clock.

A container gets exclusive CPUs when its pod is Guaranteed and its CPU request is a
whole number; everyone else runs on the shared pool (all CPUs less the exclusive ones;
less the reserved ones too with ``strict-cpu-reservation``). Reserved CPUs are never
given exclusively. CPUs of a pod's init containers are reused by its app containers,
as upstream does, since they never run at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from kubelet.api import Container, Pod, parse_quantity
from kubelet.decisions import pod_qos

from ..topology import TopologyHint, TopologyHints
from .checkpoint import CpuState
from .cpuset import format_cpuset
from .distribute import take_distributed
from .hints import numa_hints, pod_guaranteed_cpus
from .takeby import NotEnoughCpus, take_by_topology
from .topology import Topology

FULL_PCPUS_ONLY = "full-pcpus-only"
STRICT_CPU_RESERVATION = "strict-cpu-reservation"
DISTRIBUTE_CPUS_ACROSS_NUMA = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET = "align-by-socket"
PREFER_ALIGN_CPUS_BY_UNCORECACHE = "prefer-align-cpus-by-uncorecache"


class AllocationError(Exception):
    """A pod the policy cannot place: ``reason`` and ``message`` as upstream's admission
    result (``SMTAlignmentError``, ``UnexpectedAdmissionError``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class StateMismatch(Exception):
    """A checkpoint that does not fit this machine and reservation."""


@attrs.frozen
class PolicyOptions:
    full_pcpus_only: bool = False
    strict_cpu_reservation: bool = False
    distribute_cpus_across_numa: bool = False
    align_by_socket: bool = False
    prefer_align_cpus_by_uncorecache: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> PolicyOptions:
        """The options as ``cpuManagerPolicyOptions`` set them (already validated)."""

        def on(name: str) -> bool:
            return options.get(name) in ("1", "t", "T", "TRUE", "true", "True")

        return cls(
            full_pcpus_only=on(FULL_PCPUS_ONLY),
            strict_cpu_reservation=on(STRICT_CPU_RESERVATION),
            distribute_cpus_across_numa=on(DISTRIBUTE_CPUS_ACROSS_NUMA),
            align_by_socket=on(ALIGN_BY_SOCKET),
            prefer_align_cpus_by_uncorecache=on(PREFER_ALIGN_CPUS_BY_UNCORECACHE),
        )


def machine_conflict(options: PolicyOptions, topo: Topology, topology_policy: str) -> str | None:
    """Why the options cannot run with this machine and topology manager policy
    (upstream's ``ValidateStaticPolicyOptions``, its messages); None when they can."""
    if not options.align_by_socket:
        return None
    if topology_policy == "single-numa-node":
        return (
            "Topolgy manager single-numa-node policy is incompatible with CPUManager "
            "align-by-socket policy option"
        )
    if len(topo.sockets()) > len(topo.numa_cpus()):
        return (
            "Align by socket is not compatible with hardware where number of sockets "
            "are more than number of NUMA"
        )
    return None


def pick_cpus(
    topo: Topology, options: PolicyOptions, available: frozenset[int], count: int
) -> frozenset[int]:
    """``count`` CPUs of ``available`` as the options choose them (upstream's
    ``takeByTopology``): spread over NUMA nodes, or packed (by uncore cache too);
    ``NotEnoughCpus`` when there are fewer."""
    if options.distribute_cpus_across_numa:
        group = topo.cpus_per_core if options.full_pcpus_only else 1
        return take_distributed(topo, available, count, group)
    return take_by_topology(topo, available, count, options.prefer_align_cpus_by_uncorecache)


def guaranteed_cpus(pod: Pod, container: Container) -> int:
    """The exclusive CPUs ``container`` asks for: its whole CPU request in a Guaranteed
    pod, else 0."""
    if container.resources is None or pod_qos(pod) != "Guaranteed":
        return 0
    res = container.resources
    quantity = res.requests.get("cpu") or res.limits.get("cpu")
    if quantity is None:
        return 0
    q = parse_quantity(quantity)
    return q.value() if q.value() * 1000 == q.milli_value() else 0


class StaticPolicy:
    """The shared pool and the exclusive assignments, kept in memory (the manager
    writes them to the checkpoint)."""

    name = "static"

    def __init__(self, topo: Topology, reserved: frozenset[int], options: PolicyOptions) -> None:
        self.topo = topo
        self.reserved = reserved
        self.options = options
        self.default: frozenset[int] = self._initial_default()
        self.assignments: dict[str, dict[str, frozenset[int]]] = {}

    def _initial_default(self) -> frozenset[int]:
        if self.options.strict_cpu_reservation:
            return self.topo.all_cpus - self.reserved
        return self.topo.all_cpus

    @property
    def allocatable(self) -> frozenset[int]:
        """The CPUs that may be given exclusively (``GetAllocatableCPUs``)."""
        return self.topo.all_cpus - self.reserved

    def state(self) -> CpuState:
        return CpuState(policy=self.name, default=self.default, assignments=self.assignments)

    def restore(self, state: CpuState) -> None:
        """Take a checkpoint's assignments, checked as upstream's ``validateState``."""
        if not state.default and not state.assignments:
            return  # a new checkpoint: everything is shared
        assigned: set[int] = set()
        for containers in state.assignments.values():
            for cpus in containers.values():
                assigned |= cpus
        if not self.options.strict_cpu_reservation and not self.reserved <= state.default:
            raise StateMismatch(
                f'not all reserved cpus: "{format_cpuset(self.reserved)}" are present in '
                f'defaultCpuSet: "{format_cpuset(state.default)}"'
            )
        if assigned & state.default:
            raise StateMismatch(
                f'pod: cpus "{format_cpuset(assigned & state.default)}" are both assigned '
                f'and in defaultCpuSet: "{format_cpuset(state.default)}"'
            )
        have = state.default | assigned
        if self.options.strict_cpu_reservation:
            have |= self.reserved
        if have != self.topo.all_cpus:
            raise StateMismatch(
                f'current set of available CPUs "{format_cpuset(self.topo.all_cpus)}" '
                f'doesn\'t match with CPUs in state "{format_cpuset(have)}"'
            )
        self.default = state.default
        self.assignments = {uid: dict(c) for uid, c in state.assignments.items()}

    def cpus_for(self, pod_uid: str, container: str) -> frozenset[int]:
        """The container's exclusive CPUs, else the shared pool."""
        return self.assignments.get(pod_uid, {}).get(container) or self.default

    def exclusive(self, pod_uid: str, container: str) -> frozenset[int]:
        return self.assignments.get(pod_uid, {}).get(container, frozenset())

    def hints(self, pod: Pod, container: Container) -> TopologyHints:
        """Where the container's exclusive CPUs could be (upstream's
        ``GetTopologyHints``): {} when it gets none."""
        count = guaranteed_cpus(pod, container)
        if not count:
            return {}
        have = self.exclusive(pod.metadata.uid, container.name)
        if have:
            return {"cpu": self._hints(have, count) if len(have) == count else []}
        return {"cpu": self._hints(self.default & self.allocatable, count)}

    def pod_hints(self, pod: Pod) -> TopologyHints:
        """The same for the whole pod (the topology manager's ``pod`` scope)."""
        count = pod_guaranteed_cpus(pod, guaranteed_cpus)
        if not count:
            return {}
        have: frozenset[int] = frozenset()
        for cpus in self.assignments.get(pod.metadata.uid, {}).values():
            have |= cpus
        if have:
            return {"cpu": self._hints(have, count) if len(have) == count else []}
        return {"cpu": self._hints(self.default & self.allocatable, count)}

    def _hints(self, available: frozenset[int], count: int) -> list[TopologyHint]:
        return numa_hints(self.topo, available, count, self.options.align_by_socket)

    def allocate(
        self, pod: Pod, affinity: Callable[[str], TopologyHint | None] = lambda _: None
    ) -> bool:
        """Give ``pod``'s containers their exclusive CPUs (all or none), from the NUMA
        nodes of each one's ``affinity`` first; whether the shared pool changed.
        ``AllocationError`` when they do not fit."""
        uid = pod.metadata.uid
        have = dict(self.assignments.get(uid, {}))
        default = self.default
        reuse: frozenset[int] = frozenset()
        for container, is_init in _in_order(pod):
            count = guaranteed_cpus(pod, container)
            if not count:
                continue
            cpus = have.get(container.name)
            if cpus is None:
                free = (default | reuse) & self.allocatable
                cpus = self._take(free, count, affinity(container.name))
                have[container.name] = cpus
                default -= cpus
            reuse = reuse | cpus if is_init else reuse - cpus
        if have == self.assignments.get(uid, {}):
            return False
        self.assignments[uid] = have
        changed = default != self.default
        self.default = default
        return changed

    def _take(
        self, free: frozenset[int], count: int, hint: TopologyHint | None = None
    ) -> frozenset[int]:
        per_core = self.topo.cpus_per_core
        if self.options.full_pcpus_only:
            if count % per_core:
                raise AllocationError(
                    "SMTAlignmentError",
                    f"SMT Alignment Error: requested {count} cpus not multiple of cpus "
                    f"per core = {per_core}",
                )
            physical = sum(len(c) for c in self.topo.cores().values() if c <= free)
            if count > physical:
                raise AllocationError(
                    "SMTAlignmentError",
                    "SMT Alignment Error: not enough free physical CPUs: available physical "
                    f"CPUs = {physical}, requested CPUs = {count}, CPUs per core = {per_core}",
                )
        try:
            aligned = self._aligned(free, hint)
            first = pick_cpus(self.topo, self.options, aligned, min(count, len(aligned)))
            return first | pick_cpus(self.topo, self.options, free - first, count - len(first))
        except NotEnoughCpus as exc:
            raise AllocationError(
                "UnexpectedAdmissionError", f"Allocate failed due to {exc}, which is unexpected"
            ) from None

    def _aligned(self, free: frozenset[int], hint: TopologyHint | None) -> frozenset[int]:
        """The free CPUs on the hint's NUMA nodes, or with ``align-by-socket`` on their
        whole sockets (none without a hint)."""
        if hint is None or hint.numa_affinity is None:
            return frozenset()
        nodes = set(hint.nodes)
        if self.options.align_by_socket:
            sockets = {i.socket for i in self.topo.cpus.values() if i.numa in nodes}
            return frozenset(c for c in free if self.topo.cpus[c].socket in sockets)
        return frozenset(c for c in free if self.topo.cpus[c].numa in nodes)

    def release(self, pod_uids: Iterable[str]) -> bool:
        """Return the pods' CPUs to the shared pool; whether it changed."""
        freed: set[int] = set()
        for uid in pod_uids:
            for cpus in self.assignments.pop(uid, {}).values():
                freed |= cpus
        if not freed:
            return False
        self.default = self.default | frozenset(freed)
        return True

    def pods(self) -> Mapping[str, Mapping[str, frozenset[int]]]:
        return self.assignments


def _in_order(pod: Pod) -> Iterable[tuple[Container, bool]]:
    """Init containers first (a restartable one keeps its CPUs: it runs beside the
    app containers), then the app containers."""
    for c in pod.spec.init_containers:
        yield c, c.restart_policy != "Always"
    for c in pod.spec.containers:
        yield c, False
