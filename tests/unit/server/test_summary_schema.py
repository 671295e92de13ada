"""/stats/summary field by field against upstream's stats/v1alpha1 schema (v1.36).

The schema below restates upstream's Go types (json names; fields without ``omitempty``
are required). Every key the summary provider emits must be one of them with the right
type, every required one must be there, and the fields we fill must all be present in a
summary with sandbox stats, volumes and a pod cgroup.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from .test_stats import ScriptedRuntime, provider

TIME, UINT, STR = "time", "uint", "str"
Spec = Any


def obj(required: tuple[str, ...] = (), **fields: Spec) -> dict[str, Any]:
    return {"fields": fields, "required": set(required)}


FS = obj(("time",), time=TIME, availableBytes=UINT, capacityBytes=UINT, usedBytes=UINT,
         inodesFree=UINT, inodes=UINT, inodesUsed=UINT)  # fmt: skip
CPU = obj(("time",), time=TIME, usageNanoCores=UINT, usageCoreNanoSeconds=UINT)
MEMORY = obj(("time",), time=TIME, availableBytes=UINT, usageBytes=UINT, workingSetBytes=UINT,
             rssBytes=UINT, pageFaults=UINT, majorPageFaults=UINT)  # fmt: skip
SWAP = obj(("time",), time=TIME, swapAvailableBytes=UINT, swapUsageBytes=UINT)
_IFACE = {"name": STR, "rxBytes": UINT, "rxErrors": UINT, "txBytes": UINT, "txErrors": UINT}
IFACE = obj(("name",), **_IFACE)
NETWORK = obj(("time",), time=TIME, interfaces=[IFACE], **_IFACE)
CONTAINER = obj(("name", "startTime"), name=STR, startTime=TIME, cpu=CPU, memory=MEMORY,
                swap=SWAP, accelerators=[obj()], rootfs=FS, logs=FS,
                userDefinedMetrics=[obj()])  # fmt: skip
VOLUME = obj(("time",), name=STR, pvcRef=obj(("name", "namespace"), name=STR, namespace=STR),
             **FS["fields"])  # fmt: skip
POD = obj(
    ("podRef", "startTime", "containers"),
    podRef=obj(("name", "namespace", "uid"), name=STR, namespace=STR, uid=STR),
    startTime=TIME, containers=[CONTAINER], cpu=CPU, memory=MEMORY, network=NETWORK,
    volume=[VOLUME], swap=SWAP, process_stats=obj((), process_count=UINT),
    **{"ephemeral-storage": FS},
)  # fmt: skip
NODE = obj(
    ("nodeName", "startTime"),
    nodeName=STR, systemContainers=[CONTAINER], startTime=TIME, cpu=CPU, memory=MEMORY,
    network=NETWORK, fs=FS, runtime=obj((), imageFs=FS, containerFs=FS), swap=SWAP,
    rlimit=obj(("time",), time=TIME, maxpid=UINT, curproc=UINT),
)  # fmt: skip
SUMMARY = obj(("node", "pods"), node=NODE, pods=[POD])


def check(value: Any, spec: Spec, where: str) -> list[str]:
    """Problems of ``value`` against ``spec`` (empty: it conforms)."""
    if spec == TIME:
        try:
            dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return [f"{where}: not a time: {value!r}"]
        return [] if isinstance(value, str) else [f"{where}: not a time: {value!r}"]
    if spec == UINT:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return [] if ok else [f"{where}: not an unsigned integer: {value!r}"]
    if spec == STR:
        return [] if isinstance(value, str) else [f"{where}: not a string: {value!r}"]
    if isinstance(spec, list):
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        return [p for i, item in enumerate(value) for p in check(item, spec[0], f"{where}[{i}]")]
    if not isinstance(value, dict):
        return [f"{where}: not an object"]
    problems = [f"{where}.{k}: required" for k in spec["required"] if k not in value]
    for key, item in value.items():
        if key not in spec["fields"]:
            problems.append(f"{where}.{key}: not in upstream's schema")
        else:
            problems += check(item, spec["fields"][key], f"{where}.{key}")
    return problems


def present(value: Any, path: str = "") -> set[str]:
    """Every key path in ``value`` (lists flattened as ``[]``)."""
    if isinstance(value, list):
        return {p for item in value for p in present(item, f"{path}[]")}
    if not isinstance(value, dict):
        return set()
    out = set()
    for key, item in value.items():
        out.add(f"{path}.{key}")
        out |= present(item, f"{path}.{key}")
    return out


async def test_summary_conforms_to_upstreams_schema(tmp_path: Path) -> None:
    stats = provider(tmp_path, ScriptedRuntime())
    uid = "0b6c1f0e-1111-2222-3333-444455556666"
    volume = tmp_path / "pods" / uid / "volumes" / "kubernetes.io~empty-dir" / "cache"
    volume.mkdir(parents=True)
    (volume / "f").write_bytes(b"x" * 5000)
    summary = await stats.summary()
    assert check(summary, SUMMARY, "summary") == []
    fields = present(summary)
    for expected in (
        ".node.nodeName", ".node.startTime", ".node.cpu.usageCoreNanoSeconds",
        ".node.memory.workingSetBytes", ".node.memory.availableBytes", ".node.network.interfaces",
        ".node.fs.availableBytes", ".node.fs.inodesFree", ".node.runtime.imageFs.usedBytes",
        ".node.runtime.containerFs.usedBytes", ".node.rlimit.maxpid", ".node.rlimit.curproc",
        ".node.systemContainers[].memory.workingSetBytes", ".pods[].podRef.uid",
        ".pods[].cpu.usageNanoCores", ".pods[].memory.workingSetBytes", ".pods[].network.rxBytes",
        ".pods[].containers[].rootfs.usedBytes", ".pods[].containers[].logs.usedBytes",
        ".pods[].containers[].memory.usageBytes", ".pods[].volume[].name",
        ".pods[].volume[].usedBytes", ".pods[].volume[].inodesUsed",
        ".pods[].ephemeral-storage.usedBytes", ".pods[].process_stats.process_count",
    ):  # fmt: skip
        assert expected in fields, expected
    only = await stats.summary(only_cpu_and_memory=True)
    assert check(only, SUMMARY, "summary") == []


def test_the_checker_catches_what_upstream_would_not_decode() -> None:
    bad = {"node": {"nodeName": "n", "startTime": "x", "cpu": {"usageNanoCores": -1}}}
    assert check(bad, SUMMARY, "s") == [
        "s.pods: required",
        "s.node.startTime: not a time: 'x'",
        "s.node.cpu.time: required",
        "s.node.cpu.usageNanoCores: not an unsigned integer: -1",
    ]
