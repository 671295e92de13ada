"""The static policy's decisions: which NUMA nodes each Guaranteed container's memory
and hugepages come from, and what is left on each node. Pure: no I/O, no clock.

As upstream's ``staticPolicy``: a container's request (``memory``, ``hugepages-*``) is
placed on the NUMA nodes of its topology affinity (or, without one, on the narrowest
set that fits), as one block per memory type; a node used for a single-node allocation
is never part of a group, and a node in a group is only used with that same group
(``cells``). An init container's memory is reused by the containers after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubelet.api import Container, Format, Pod, format_quantity, parse_quantity
from kubelet.decisions import pod_qos

from ..hints import TopologyHint, TopologyHints, is_narrower, iterate_masks, mask_bits, mask_of
from .state import Block, MachineState, MemoryState, MemoryTable, NodeState, clone_machine

MEMORY = "memory"
HUGEPAGES_PREFIX = "hugepages-"

Requested = dict[str, int]
"""memory type → bytes"""


class AllocationError(Exception):
    """A container the policy cannot place (upstream's error text)."""


class StateMismatch(Exception):
    """A checkpoint that does not fit this machine and reservation."""


def is_memory_type(name: str) -> bool:
    return name == MEMORY or name.startswith(HUGEPAGES_PREFIX)


def hugepage_resource(page_size: int) -> str:
    """``hugepages-2Mi`` for a page of 2 MiB (upstream's ``HugePageResourceName``)."""
    return HUGEPAGES_PREFIX + format_quantity(page_size, Format.BINARY_SI)


def requested(container: Container) -> Requested:
    """The container's memory and hugepages requests in bytes (limits when a request is
    missing, as the API server defaults them)."""
    res = container.resources
    if res is None:
        return {}
    out: Requested = {}
    for name in {*res.requests, *res.limits}:
        if not is_memory_type(name):
            continue
        q = parse_quantity(res.requests.get(name) or res.limits[name])
        if q.amount.denominator != 1:
            raise AllocationError("[memorymanager] failed to represent quantity as int64")
        out[name] = int(q.amount)
    return out


def pod_requested(pod: Pod) -> Requested:
    """The pod's peak: its largest init container (beside the sidecars before it), or
    its app containers with its sidecars (upstream's ``getPodRequestedResources``)."""
    init_peak: Requested = {}
    sidecars: Requested = {}
    for c in pod.spec.init_containers:
        for name, size in requested(c).items():
            init_peak.setdefault(name, 0)
            if c.restart_policy == "Always":
                sidecars[name] = sidecars.get(name, 0) + size
            elif sidecars.get(name, 0) + size > init_peak[name]:
                init_peak[name] = sidecars.get(name, 0) + size
    apps: Requested = {}
    for c in pod.spec.containers:
        for name, size in requested(c).items():
            apps[name] = apps.get(name, 0) + size
    return {
        name: max(size + sidecars.get(name, 0), init_peak.get(name, 0))
        for name, size in apps.items()
    }


def _is_subset(hint: Sequence[int], group: Sequence[int]) -> bool:
    return set(hint) <= set(group)


def best_hint(hints: Sequence[TopologyHint]) -> TopologyHint | None:
    """A preferred hint over a non-preferred one, then the narrowest (``findBestHint``)."""
    best: TopologyHint | None = None
    for hint in hints:
        if best is None or _better(hint, best):
            best = hint
    return best


def _better(hint: TopologyHint, best: TopologyHint) -> bool:
    if hint.preferred != best.preferred:
        return hint.preferred
    return is_narrower(hint.numa_affinity or 0, best.numa_affinity or 0)


class StaticPolicy:
    """The machine state and the containers' blocks, kept in memory (the manager writes
    them to the checkpoint)."""

    name = "Static"

    def __init__(
        self,
        nodes: Mapping[int, tuple[int, Mapping[int, int]]],
        reserved: Mapping[int, Mapping[str, int]],
    ) -> None:
        """``nodes``: NUMA node → (memory bytes, hugepage size → pages); ``reserved``:
        NUMA node → memory type → bytes reserved for the system."""
        self.nodes = nodes
        self.reserved = reserved
        self.machine: MachineState = self.default_machine()
        self.entries: dict[str, dict[str, list[Block]]] = {}
        self.reusable: dict[str, dict[tuple[int, ...], dict[str, int]]] = {}
        """pod UID → NUMA nodes → memory type → bytes its init containers left"""

    def default_machine(self) -> MachineState:
        out: MachineState = {}
        for n, (memory, hugepages) in sorted(self.nodes.items()):
            tables: dict[str, MemoryTable] = {}
            in_hugepages = 0
            for size, pages in sorted(hugepages.items()):
                name = hugepage_resource(size)
                total = size * pages
                reserved = self._reserved(n, name)
                tables[name] = MemoryTable(total, reserved, total - reserved, 0, total - reserved)
                in_hugepages += total
            reserved = self._reserved(n, MEMORY)
            allocatable = memory - reserved - in_hugepages
            tables[MEMORY] = MemoryTable(memory, reserved, allocatable, 0, allocatable)
            out[n] = NodeState(0, tables, [n])
        return out

    def _reserved(self, node: int, name: str) -> int:
        return self.reserved.get(node, {}).get(name, 0)

    def state(self) -> MemoryState:
        return MemoryState(self.name, self.machine, self.entries)

    # -- restore ----------------------------------------------------------------------

    def restore(self, state: MemoryState) -> None:
        """Take a checkpoint's state, checked as upstream's ``validateState``."""
        if not state.machine:
            if state.entries:
                raise StateMismatch(
                    "[memorymanager] machine state can not be empty when it has memory assignments"
                )
            return
        expected = self.default_machine()
        for uid, containers in state.entries.items():
            for name, blocks in containers.items():
                for b in blocks:
                    self._replay(expected, uid, name, b)
        if not _machines_equal(state.machine, expected):
            raise StateMismatch(
                "[memorymanager] the expected machine state is different from the real one"
            )
        self.machine = clone_machine(state.machine)
        self.entries = {uid: {n: list(b) for n, b in c.items()} for uid, c in state.entries.items()}

    @staticmethod
    def _replay(machine: MachineState, uid: str, name: str, b: Block) -> None:
        where = f"(pod: {uid}, container: {name})"
        for n in b.numa_affinity:
            if n not in machine:
                raise StateMismatch(
                    f"[memorymanager] {where} the memory assignment uses the NUMA that does "
                    "not exist"
                )
            if b.type not in machine[n].memory:
                raise StateMismatch(
                    f"[memorymanager] {where} the memory assignment uses memory resource "
                    "that does not exist"
                )
        _take(machine, list(b.numa_affinity), b.type, b.size)

    # -- hints ------------------------------------------------------------------------

    def hints(self, pod: Pod, container: Container) -> TopologyHints:
        if pod_qos(pod) != "Guaranteed":
            return {}
        try:
            wanted = requested(container)
        except AllocationError:
            return {}
        blocks = self.entries.get(pod.metadata.uid, {}).get(container.name)
        if blocks is not None:
            return _regenerated(blocks, wanted)
        return self.calculate_hints(pod, wanted)

    def pod_hints(self, pod: Pod) -> TopologyHints:
        if pod_qos(pod) != "Guaranteed":
            return {}
        try:
            wanted = pod_requested(pod)
        except AllocationError:
            return {}
        have = self.entries.get(pod.metadata.uid, {})
        for c in (*pod.spec.init_containers, *pod.spec.containers):
            if c.name in have:
                return _regenerated(have[c.name], wanted)
        return self.calculate_hints(pod, wanted)

    def calculate_hints(self, pod: Pod, wanted: Requested) -> dict[str, list[TopologyHint]]:
        """Every NUMA node set whose free memory of every type holds the request, under
        the group rules; preferred when as narrow as the narrowest set that could hold
        it (upstream's ``calculateHints``)."""
        machine = self.machine
        nodes = sorted(machine)
        narrowest = len(nodes)
        found: list[int] = []
        for mask in iterate_masks(nodes):
            bits = mask_bits(mask)
            single = len(bits) == 1

            def total(name: str, field: str, bits: tuple[int, ...] = bits) -> int:
                return sum(int(getattr(_table(machine, n, name), field)) for n in bits)

            if any(total(name, "allocatable") < size for name, size in wanted.items()):
                continue
            narrowest = min(narrowest, len(bits))
            if single and len(machine[bits[0]].cells) > 1:
                continue
            if not single and any(
                machine[n].assignments > 0
                and (len(machine[n].cells) == 1 or sorted(machine[n].cells) != list(bits))
                for n in bits
            ):
                continue
            if any(
                total(name, "free") + self._reusable(pod.metadata.uid, bits, name) < size
                for name, size in wanted.items()
            ):
                continue
            found.append(mask)
        return {
            name: [TopologyHint(m, len(mask_bits(m)) == narrowest) for m in found]
            for name in wanted
            if found
        }

    def _reusable(self, uid: str, bits: tuple[int, ...], name: str) -> int:
        return self.reusable.get(uid, {}).get(bits, {}).get(name, 0)

    # -- allocation -------------------------------------------------------------------

    def allocate(self, pod: Pod, container: Container, affinity: TopologyHint | None) -> bool:
        """Give the container its blocks (``AllocationError`` when they do not fit);
        whether it asked for any (a Guaranteed pod's container)."""
        if pod_qos(pod) != "Guaranteed":
            return False
        uid = pod.metadata.uid
        blocks = self.entries.get(uid, {}).get(container.name)
        if blocks is not None:
            self._update_reusable(pod, container, blocks)
            return True
        wanted = requested(container)
        hint = affinity or TopologyHint(None, False)
        if hint.numa_affinity is None:
            default = best_hint(self.calculate_hints(pod, wanted).get(MEMORY, []))
            if default is None:
                raise AllocationError(
                    "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes "
                    "with enough memory is available"
                )
            if not default.preferred and hint.preferred:
                raise AllocationError("[memorymanager] failed to find the default preferred hint")
            hint = default
        mask = hint.numa_affinity or 0
        if not self._satisfies(mask, wanted):
            hint = self._extend(pod, wanted, mask, hint.preferred)
            mask = hint.numa_affinity or 0
        bits = list(mask_bits(mask))
        if self._violates_groups(bits):
            raise AllocationError("[memorymanager] preferred hint violates NUMA node allocation")
        blocks = []
        for name, size in wanted.items():
            blocks.append(Block(tuple(bits), name, size))
            reuse = self._reusable(uid, tuple(bits), name)
            _take(self.machine, bits, name, max(size - reuse, 0))
        self._update_reusable(pod, container, blocks)
        self.entries.setdefault(uid, {})[container.name] = blocks
        self._shrink_init_blocks(pod, container, blocks)
        return True

    def _satisfies(self, mask: int, wanted: Requested) -> bool:
        return all(
            sum(_table(self.machine, n, name).free for n in mask_bits(mask)) >= size
            for name, size in wanted.items()
        )

    def _extend(self, pod: Pod, wanted: Requested, mask: int, preferred: bool) -> TopologyHint:
        """The narrowest hint that holds the request and includes ``mask``'s nodes
        (``extendTopologyManagerHint``)."""
        bits = mask_bits(mask)
        wider = [
            h
            for h in self.calculate_hints(pod, wanted).get(MEMORY, [])
            if _is_subset(bits, h.nodes)
        ]
        extended = best_hint(wider)
        if extended is None:
            raise AllocationError(
                "[memorymanager] failed to find NUMA nodes to extend the current topology hint"
            )
        if not extended.preferred and preferred:
            raise AllocationError("[memorymanager] failed to find the extended preferred hint")
        return extended

    def _violates_groups(self, bits: list[int]) -> bool:
        if len(bits) == 1:
            return False
        for n in bits:
            state = self.machine[n]
            if state.assignments == 0:
                continue
            if len(state.cells) == 1 or sorted(state.cells) != sorted(bits):
                return True
        return False

    def _update_reusable(self, pod: Pod, container: Container, blocks: Sequence[Block]) -> None:
        uid = pod.metadata.uid
        for other in [u for u in self.reusable if u != uid]:
            del self.reusable[other]
        regular_init = any(
            c.name == container.name and c.restart_policy != "Always"
            for c in pod.spec.init_containers
        )
        pod_reuse = self.reusable.setdefault(uid, {})
        for b in blocks:
            by_type = pod_reuse.setdefault(b.numa_affinity, {})
            if regular_init:
                by_type[b.type] = max(by_type.get(b.type, 0), b.size)
            elif by_type.get(b.type):
                by_type[b.type] = max(by_type[b.type] - b.size, 0)

    def _shrink_init_blocks(self, pod: Pod, container: Container, blocks: Sequence[Block]) -> None:
        """Init containers' blocks shrink by what this container reused, so that the
        pod's blocks add up to what it holds (``updateInitContainersMemoryBlocks``)."""
        have = self.entries.get(pod.metadata.uid, {})
        for block in blocks:
            size = block.size
            for init in pod.spec.init_containers:
                if init.name == container.name or size == 0:
                    break
                if init.restart_policy == "Always" or not have.get(init.name):
                    continue
                updated = []
                for b in have[init.name]:
                    if b.size and b.type == block.type and b.numa_affinity == block.numa_affinity:
                        used = min(b.size, size)
                        size -= used
                        b = Block(b.numa_affinity, b.type, b.size - used)
                    updated.append(b)
                have[init.name] = updated

    # -- release and reading ----------------------------------------------------------

    def remove(self, pod_uid: str, container: str) -> bool:
        """Give back a container's blocks; whether it had any."""
        blocks = self.entries.get(pod_uid, {}).pop(container, None)
        if blocks is None:
            return False
        if not self.entries[pod_uid]:
            del self.entries[pod_uid]
        for b in blocks:
            released = b.size
            for n in b.numa_affinity:
                node = self.machine[n]
                node.assignments -= 1
                if node.assignments == 0:
                    node.cells = [n]
                table = node.memory[b.type]
                give = min(table.reserved, released)
                table.reserved -= give
                table.free += give
                released -= give
        return True

    def release(self, pod_uids: Sequence[str] | set[str]) -> bool:
        changed = False
        for uid in list(pod_uids):
            for name in list(self.entries.get(uid, {})):
                changed |= self.remove(uid, name)
            self.reusable.pop(uid, None)
        return changed

    def blocks(self, pod_uid: str, container: str) -> list[Block]:
        return list(self.entries.get(pod_uid, {}).get(container, ()))

    def numa_nodes(self, pod_uid: str, container: str) -> list[int]:
        return sorted({n for b in self.blocks(pod_uid, container) for n in b.numa_affinity})

    def allocatable(self) -> list[Block]:
        """Each node's allocatable bytes per memory type (``GetAllocatableMemory``)."""
        return [
            Block((n,), name, t.allocatable)
            for n, state in sorted(self.machine.items())
            for name, t in sorted(state.memory.items())
            if t.allocatable
        ]


def _table(machine: MachineState, node: int, name: str) -> MemoryTable:
    return machine[node].memory.get(name) or MemoryTable()


def _take(machine: MachineState, bits: list[int], name: str, size: int) -> None:
    """Reserve ``size`` bytes of ``name`` from ``bits`` in order, counting one more
    assignment on each (upstream's ``updateMachineState``)."""
    for n in bits:
        node = machine[n]
        node.assignments += 1
        node.cells = list(bits)
        table = node.memory.get(name)
        if size == 0 or table is None or table.free <= 0:
            continue
        used = min(table.free, size)
        table.reserved += used
        table.free -= used
        size -= used


def _regenerated(blocks: Sequence[Block], wanted: Requested) -> TopologyHints:
    """The hints of memory already given (after a restart): its own nodes, preferred."""
    if len(blocks) != len(wanted):
        return {}
    out: dict[str, list[TopologyHint]] = {name: [] for name in wanted}
    for b in blocks:
        if b.type not in wanted or b.size != wanted[b.type]:
            return {}
        out[b.type].append(TopologyHint(mask_of(b.numa_affinity), True))
    return out


def _machines_equal(a: MachineState, b: MachineState) -> bool:
    """As upstream's ``areMachineStatesEqual``: same nodes, assignments, groups and
    tables, and the same free and reserved bytes over each group."""
    if a.keys() != b.keys():
        return False
    for n, sa in a.items():
        sb = b[n]
        if sa.assignments != sb.assignments or sorted(sa.cells) != sorted(sb.cells):
            return False
        if sa.memory.keys() != sb.memory.keys():
            return False
        for name, ta in sa.memory.items():
            tb = sb.memory[name]
            if (ta.total, ta.system_reserved, ta.allocatable) != (
                tb.total,
                tb.system_reserved,
                tb.allocatable,
            ):
                return False
            for field in ("free", "reserved"):
                sum_a = sum(getattr(_table(a, c, name), field) for c in sa.cells if c in a)
                sum_b = sum(getattr(_table(b, c, name), field) for c in sa.cells if c in b)
                if sum_a != sum_b:
                    return False
    return True
