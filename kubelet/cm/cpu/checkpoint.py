"""``<root-dir>/cpu_manager_state``: the CPU manager's assignments, in upstream's format.

The file is upstream's v2 checkpoint, so a node can move between this kubelet and
upstream's: ``{"policyName", "defaultCpuSet", "entries": {podUID: {container: cpus}},
"checksum"}``. The checksum is upstream's: FNV-32a over the go-spew ``%#v`` rendering of
the checkpoint struct with the checksum zeroed (``_spew`` writes the same text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from kubelet.boundedio import loads_json
from kubelet.goformat import spew_checksum

from .cpuset import CpuSetError, format_cpuset, parse_cpuset

CHECKPOINT_NAME = "cpu_manager_state"
MAX_BYTES = 4 * 1024 * 1024
MAX_CPUS = 1 << 20
"""CPUs all the file's sets name together: a large node's checkpoint names each CPU once
or a few times; more is a file made to exhaust memory"""


class CorruptCheckpoint(Exception):
    pass


@attrs.frozen
class CpuState:
    """The policy's name, the shared pool, and each container's exclusive CPUs."""

    policy: str
    default: frozenset[int] = frozenset()
    assignments: Mapping[str, Mapping[str, frozenset[int]]] = attrs.field(factory=dict)
    """pod UID → container name → CPUs"""


def _spew(policy: str, default: str, entries: Mapping[str, Mapping[str, str]]) -> str:
    """go-spew's ``%#v`` of ``*state.CPUManagerCheckpoint`` (map keys sorted, map
    entries untyped, strings unquoted) with a zero checksum."""
    pods = " ".join(
        f"{uid}:map[" + " ".join(f"{n}:{c}" for n, c in sorted(entries[uid].items())) + "]"
        for uid in sorted(entries)
    )
    return (
        f"(*state.CPUManagerCheckpoint){{PolicyName:(string){policy} "
        f"DefaultCPUSet:(string){default} "
        f"Entries:(map[string]map[string]string)map[{pods}] Checksum:(checksum.Checksum)0}}"
    )


def checksum(policy: str, default: str, entries: Mapping[str, Mapping[str, str]]) -> int:
    return spew_checksum(_spew(policy, default, entries))


def encode(state: CpuState) -> bytes:
    """The file's bytes, as upstream's ``json.Marshal`` writes them."""
    default = format_cpuset(state.default)
    entries = {
        uid: {name: format_cpuset(cpus) for name, cpus in containers.items()}
        for uid, containers in state.assignments.items()
        if containers
    }
    doc: dict[str, Any] = {"policyName": state.policy, "defaultCpuSet": default}
    if entries:
        doc["entries"] = {uid: dict(sorted(c.items())) for uid, c in sorted(entries.items())}
    doc["checksum"] = checksum(state.policy, default, entries)
    return json.dumps(doc, separators=(",", ":")).encode()


def decode(data: bytes) -> CpuState:
    """The state in a checkpoint file; ``CorruptCheckpoint`` when it does not parse or
    its checksum does not match (a zero checksum is accepted, as upstream)."""
    try:
        doc = loads_json(data, max_bytes=MAX_BYTES)
    except ValueError as exc:
        raise CorruptCheckpoint(str(exc)) from None
    if not isinstance(doc, dict):
        raise CorruptCheckpoint("not a JSON object")
    fields = {k.lower(): v for k, v in doc.items()}  # Go's decoder ignores the keys' case
    policy, default = fields.get("policyname", ""), fields.get("defaultcpuset", "")
    entries = fields.get("entries") or {}
    if not (isinstance(policy, str) and isinstance(default, str) and _entries_ok(entries)):
        raise CorruptCheckpoint("unexpected field types")
    given = fields.get("checksum", 0)
    if given and given != checksum(policy, default, entries):
        raise CorruptCheckpoint("checkpoint is corrupted")
    budget = [MAX_CPUS]

    def cpus(text: str) -> frozenset[int]:
        out = parse_cpuset(text, limit=budget[0])
        budget[0] -= len(out)
        return out

    try:
        return CpuState(
            policy=policy,
            default=cpus(default),
            assignments={
                uid: {name: cpus(text) for name, text in containers.items()}
                for uid, containers in entries.items()
            },
        )
    except CpuSetError as exc:
        raise CorruptCheckpoint(str(exc)) from None


def _entries_ok(entries: Any) -> bool:
    return isinstance(entries, dict) and all(
        isinstance(c, dict) and all(isinstance(v, str) for v in c.values())
        for c in entries.values()
    )
