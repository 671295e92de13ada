"""The memory manager's state and ``<root-dir>/memory_manager_state``, in upstream's format.

The machine state is, per NUMA node, the number of memory assignments on it, the group
of nodes it is allocated with (``cells``) and a table per memory type (``memory``,
``hugepages-2Mi``, ...) of its total, system-reserved, allocatable, reserved and free
bytes. The entries are each container's blocks: a memory type, a size and the NUMA
nodes it comes from. The file is upstream's v2 checkpoint (``policyName``,
``machineState``, ``entries``, ``checksum``) with upstream's checksum, FNV-32a over the
go-spew ``%#v`` text of the checkpoint struct (``_spew``), so that a node can move
between this kubelet and upstream's.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from kubelet.boundedio import loads_json

CHECKPOINT_NAME = "memory_manager_state"
MAX_BYTES = 4 * 1024 * 1024


class CorruptCheckpoint(Exception):
    pass


@attrs.define
class MemoryTable:
    """One memory type on one NUMA node, in bytes."""

    total: int = 0
    system_reserved: int = 0
    allocatable: int = 0
    reserved: int = 0
    free: int = 0


@attrs.define
class NodeState:
    """One NUMA node: its assignments, its group (``cells``) and its memory tables."""

    assignments: int = 0
    memory: dict[str, MemoryTable] = attrs.field(factory=dict)
    cells: list[int] = attrs.field(factory=list)


@attrs.frozen
class Block:
    """Memory given to a container: ``size`` bytes of ``type`` from ``numa_affinity``."""

    numa_affinity: tuple[int, ...]
    type: str
    size: int


MachineState = dict[int, NodeState]
Assignments = dict[str, dict[str, list[Block]]]
"""pod UID → container name → its blocks"""


@attrs.define
class MemoryState:
    policy: str
    machine: MachineState = attrs.field(factory=dict)
    entries: Assignments = attrs.field(factory=dict)


def clone_machine(machine: MachineState) -> MachineState:
    return {
        n: NodeState(
            s.assignments,
            {k: attrs.evolve(t) for k, t in s.memory.items()},
            list(s.cells),
        )
        for n, s in machine.items()
    }


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def _ints(values: list[int]) -> str:
    return "([]int)[" + " ".join(str(v) for v in values) + "]"


def _spew(state: MemoryState) -> str:
    """go-spew's ``%#v`` of ``*state.MemoryManagerCheckpoint`` with a zero checksum:
    map keys sorted, map entries and slice elements untyped, pointers as ``<*>``."""
    nodes = []
    for n in sorted(state.machine):
        s = state.machine[n]
        tables = " ".join(
            f"{name}:<*>{{TotalMemSize:(uint64){t.total} SystemReserved:(uint64)"
            f"{t.system_reserved} Allocatable:(uint64){t.allocatable} Reserved:(uint64)"
            f"{t.reserved} Free:(uint64){t.free}}}"
            for name, t in sorted(s.memory.items())
        )
        nodes.append(
            f"{n}:<*>{{NumberOfAssignments:(int){s.assignments} MemoryMap:"
            f"(map[v1.ResourceName]*state.MemoryTable)map[{tables}] Cells:{_ints(s.cells)}}}"
        )
    pods = []
    for uid in sorted(state.entries):
        containers = " ".join(
            f"{name}:["
            + " ".join(
                f"{{NUMAAffinity:{_ints(list(b.numa_affinity))} Type:(v1.ResourceName)"
                f"{b.type} Size:(uint64){b.size}}}"
                for b in blocks
            )
            + "]"
            for name, blocks in sorted(state.entries[uid].items())
        )
        pods.append(f"{uid}:map[{containers}]")
    return (
        f"(*state.MemoryManagerCheckpoint){{PolicyName:(string){state.policy} "
        f"MachineState:(state.NUMANodeMap)map[{' '.join(nodes)}] "
        f"Entries:(state.ContainerMemoryAssignments)map[{' '.join(pods)}] "
        "Checksum:(checksum.Checksum)0}"
    )


def checksum(state: MemoryState) -> int:
    return _fnv32a(_spew(state).encode())


def encode(state: MemoryState) -> bytes:
    """The file's bytes, as upstream's ``json.Marshal`` writes them."""
    machine = {
        str(n): {
            "numberOfAssignments": s.assignments,
            "memoryMap": {
                name: {
                    "total": t.total,
                    "systemReserved": t.system_reserved,
                    "allocatable": t.allocatable,
                    "reserved": t.reserved,
                    "free": t.free,
                }
                for name, t in sorted(s.memory.items())
            },
            "cells": list(s.cells),
        }
        for n, s in sorted(state.machine.items(), key=lambda kv: str(kv[0]))
    }
    doc: dict[str, Any] = {"policyName": state.policy, "machineState": machine}
    if state.entries:
        doc["entries"] = {
            uid: {
                name: [
                    {"numaAffinity": list(b.numa_affinity), "type": b.type, "size": b.size}
                    for b in blocks
                ]
                for name, blocks in sorted(containers.items())
            }
            for uid, containers in sorted(state.entries.items())
        }
    doc["checksum"] = checksum(state)
    return json.dumps(doc, separators=(",", ":")).encode()


def decode(data: bytes) -> MemoryState:
    """The state in a checkpoint file; ``CorruptCheckpoint`` when it does not parse or
    its checksum does not match (a zero checksum is accepted, as upstream)."""
    try:
        doc = loads_json(data, max_bytes=MAX_BYTES)
        if not isinstance(doc, dict):
            raise CorruptCheckpoint("not a JSON object")
        fields = {k.lower(): v for k, v in doc.items()}  # Go's decoder ignores the keys' case
        state = MemoryState(
            policy=_str(fields.get("policyname", "")),
            machine=_machine(fields.get("machinestate") or {}),
            entries=_entries(fields.get("entries") or {}),
        )
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise CorruptCheckpoint(f"unexpected content: {exc}") from None
    given = fields.get("checksum", 0)
    if given and given != checksum(state):
        raise CorruptCheckpoint("checkpoint is corrupted")
    return state


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _uint(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError("expected an unsigned integer")
    return value


def _lower(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise TypeError("expected an object")
    return {k.lower(): v for k, v in doc.items()}


def _map(doc: Any) -> dict[str, Any]:
    """A JSON object that is a Go map: its keys are kept as they are."""
    if not isinstance(doc, dict):
        raise TypeError("expected an object")
    return doc


_TABLE_FIELDS = ("total", "systemreserved", "allocatable", "reserved", "free")


def _machine(doc: Any) -> MachineState:
    out: MachineState = {}
    for key, raw in _map(doc).items():
        node = _lower(raw)
        tables = {}
        for name, table in _map(node.get("memorymap") or {}).items():
            t = _lower(table)
            tables[name] = MemoryTable(*(_uint(t.get(f, 0)) for f in _TABLE_FIELDS))
        cells = [_uint(c) for c in (node.get("cells") or [])]
        out[int(key)] = NodeState(_uint(node.get("numberofassignments", 0)), tables, cells)
    return out


def _entries(doc: Any) -> Assignments:
    out: Assignments = {}
    for uid, containers in _map(doc).items():
        pod: dict[str, list[Block]] = {}
        for name, blocks in _map(containers).items():
            if not isinstance(blocks, list):
                raise TypeError("expected a list of blocks")
            pod[name] = [_block(_lower(b)) for b in blocks]
        out[uid] = pod
    return out


def _block(b: dict[str, Any]) -> Block:
    return Block(
        numa_affinity=tuple(_uint(n) for n in (b.get("numaaffinity") or [])),
        type=_str(b.get("type", "")),
        size=_uint(b.get("size", 0)),
    )
