"""/stats/summary field by field against upstream's stats/v1alpha1 schema (v1.36).

The schema below restates upstream's Go types (json names; fields without ``omitempty``
are required). Every key the summary provider emits must be one of them with the right
type, every required one must be there, and the fields we fill must all be present in a
summary with sandbox stats, volumes and a pod cgroup.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, cast

import attrs

from kubelet.cri import ImageClient, RuntimeClient, api
from kubelet.goformat import rfc3339
from kubelet.server.resource import resource_metrics
from kubelet.stats import SummaryProvider, SystemContainerNames

from .test_stats import NOW, UID, ScriptedRuntime, provider
from .test_summary_psi import v2_provider

TIME, UINT, STR, FLOAT, BOOL = "time", "uint", "str", "float", "bool"
Spec = Any


def obj(required: tuple[str, ...] = (), **fields: Spec) -> dict[str, Any]:
    return {"fields": fields, "required": set(required)}


PSI_DATA = obj(("total", "avg10", "avg60", "avg300"), total=UINT, avg10=FLOAT, avg60=FLOAT,
               avg300=FLOAT)  # fmt: skip
PSI = obj(("full", "some"), full=PSI_DATA, some=PSI_DATA)
IO = obj(("time",), time=TIME, psi=PSI)
FS = obj(("time",), time=TIME, availableBytes=UINT, capacityBytes=UINT, usedBytes=UINT,
         inodesFree=UINT, inodes=UINT, inodesUsed=UINT)  # fmt: skip
CPU = obj(("time",), time=TIME, usageNanoCores=UINT, usageCoreNanoSeconds=UINT, psi=PSI)
MEMORY = obj(("time",), time=TIME, availableBytes=UINT, usageBytes=UINT, workingSetBytes=UINT,
             rssBytes=UINT, pageFaults=UINT, majorPageFaults=UINT, psi=PSI)  # fmt: skip
SWAP = obj(("time",), time=TIME, swapAvailableBytes=UINT, swapUsageBytes=UINT)
_IFACE = {"name": STR, "rxBytes": UINT, "rxErrors": UINT, "txBytes": UINT, "txErrors": UINT}
IFACE = obj(("name",), **_IFACE)
NETWORK = obj(("time",), time=TIME, interfaces=[IFACE], **_IFACE)
ACCELERATOR = obj(("make", "model", "id", "memoryTotal", "memoryUsed", "dutyCycle"), make=STR,
                  model=STR, id=STR, memoryTotal=UINT, memoryUsed=UINT, dutyCycle=UINT)  # fmt: skip
USER_METRIC = obj(("name", "type", "units", "time", "value"), name=STR, type=STR, units=STR,
                  labels=obj(), time=TIME, value=FLOAT)  # fmt: skip
CONTAINER = obj(("name", "startTime"), name=STR, startTime=TIME, cpu=CPU, memory=MEMORY, io=IO,
                swap=SWAP, accelerators=[ACCELERATOR], rootfs=FS, logs=FS,
                userDefinedMetrics=[USER_METRIC])  # fmt: skip
VOLUME = obj(("time",), name=STR, pvcRef=obj(("name", "namespace"), name=STR, namespace=STR),
             volumeHealthStats=obj(("abnormal",), abnormal=BOOL), **FS["fields"])  # fmt: skip
POD = obj(
    ("podRef", "startTime", "containers"),
    podRef=obj(("name", "namespace", "uid"), name=STR, namespace=STR, uid=STR),
    startTime=TIME, containers=[CONTAINER], cpu=CPU, memory=MEMORY, io=IO, network=NETWORK,
    volume=[VOLUME], swap=SWAP, process_stats=obj((), process_count=UINT),
    **{"ephemeral-storage": FS},
)  # fmt: skip
NODE = obj(
    ("nodeName", "startTime"),
    nodeName=STR, systemContainers=[CONTAINER], startTime=TIME, cpu=CPU, memory=MEMORY, io=IO,
    network=NETWORK, fs=FS, runtime=obj((), imageFs=FS, containerFs=FS), swap=SWAP,
    rlimit=obj(("time",), time=TIME, maxpid=UINT, curproc=UINT),
)  # fmt: skip
SUMMARY = obj(("node", "pods"), node=NODE, pods=[POD])
"""Restated from staging/src/k8s.io/kubelet/pkg/apis/stats/v1alpha1/types.go (v1.36)."""

NOT_FILLED = {
    "accelerators": "upstream no longer fills it (accelerator metrics were removed from the "
    "kubelet in 1.25; the CRI stats provider never did)",
    "userDefinedMetrics": "not supported by the CRI, as upstream's CRI stats provider says",
    "pvcRef": "persistentVolumeClaim volumes are not provided by this kubelet",
    "volumeHealthStats": "CSIVolumeHealth (alpha, off): CSI is not provided",
    ".node.systemContainers[].rootfs": "upstream: system containers have no filesystem",
    ".node.systemContainers[].logs": "upstream: system containers have no filesystem",
}
"""Upstream fields the summary leaves out, each with why; every other field is filled."""


def leaves(spec: Spec, path: str = "") -> set[str]:
    """Every field path upstream's schema allows (lists as ``[]``), maps not descended."""
    if isinstance(spec, list):
        return leaves(spec[0], f"{path}[]")
    if not isinstance(spec, dict) or not spec["fields"]:
        return {path}
    out: set[str] = set()
    for key, item in spec["fields"].items():
        out.add(f"{path}.{key}")
        out |= leaves(item, f"{path}.{key}")
    return out


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
    if spec == FLOAT:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{where}: not a number: {value!r}"]
    if spec == BOOL:
        return [] if isinstance(value, bool) else [f"{where}: not a boolean: {value!r}"]
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


KUBELET_CGROUP = "/system.slice/kubelet.service"
RICH_HOST_FILES = {
    "proc/meminfo": "MemTotal: 4000000 kB\nMemFree: 1000000 kB\nInactive(file): 500000 kB\n"
    "SwapTotal: 1000 kB\nSwapFree: 600 kB\n",
    "proc/self/cgroup": f"11:memory:{KUBELET_CGROUP}\n4:cpu,cpuacct:{KUBELET_CGROUP}\n"
    f"1:name=systemd:{KUBELET_CGROUP}\n0::/\n",
    "proc/sys/kernel/threads-max": "63000\n",
    "sys/fs/cgroup/memory/memory.stat": "total_inactive_file 1000000000\ntotal_rss 800000000\n"
    "total_pgfault 10\ntotal_pgmajfault 1\n",
    f"sys/fs/cgroup/memory/{KUBELET_CGROUP}/memory.usage_in_bytes": "5000\n",
    f"sys/fs/cgroup/memory/{KUBELET_CGROUP}/memory.stat": "total_inactive_file 1000\n"
    "total_rss 3000\ntotal_pgfault 7\ntotal_pgmajfault 0\n",
    f"sys/fs/cgroup/memory/{KUBELET_CGROUP}/memory.memsw.usage_in_bytes": "5100\n",
    f"sys/fs/cgroup/memory/{KUBELET_CGROUP}/memory.memsw.limit_in_bytes": "10000\n",
    f"sys/fs/cgroup/cpuacct/{KUBELET_CGROUP}/cpuacct.usage": "900\n",
    f"sys/fs/cgroup/memory/kubepods/besteffort/pod{UID}/memory.memsw.usage_in_bytes": "2100\n",
    f"sys/fs/cgroup/memory/kubepods/besteffort/pod{UID}/memory.memsw.limit_in_bytes": "8192\n",
}


class RichRuntime(ScriptedRuntime):
    """Every figure the CRI can carry, with timestamps that move between scrapes."""

    ts: int = int(NOW * 1e9)

    def _stats(self) -> list[api.PodSandboxStats]:
        [stats] = super()._stats()
        self.ts += 10**9
        linux = stats.linux
        linux.memory.CopyFrom(_memory(self.ts))
        linux.cpu.timestamp = linux.network.timestamp = self.ts
        eth0 = api.NetworkInterfaceUsage(name="eth0", **{k: api.UInt64Value(value=1) for k in (
            "rx_bytes", "rx_errors", "tx_bytes", "tx_errors")})  # fmt: skip
        linux.network.default_interface.CopyFrom(eth0)
        linux.network.interfaces.append(eth0)
        return [stats]

    async def list_container_stats(self, **_: Any) -> list[api.ContainerStats]:
        [stats] = await super().list_container_stats()
        stats.cpu.timestamp = self.ts
        stats.cpu.usage_nano_cores.value = 3
        stats.memory.CopyFrom(_memory(self.ts))
        stats.writable_layer.inodes_used.value = 2
        return [stats]


def _memory(ts: int) -> api.MemoryUsage:
    return api.MemoryUsage(timestamp=ts, **{k: api.UInt64Value(value=1) for k in (
        "working_set_bytes", "available_bytes", "usage_bytes", "rss_bytes", "page_faults",
        "major_page_faults")})  # fmt: skip


@attrs.define
class RichImages:
    mountpoint: str

    async def image_fs_info(self) -> api.ImageFsInfoResponse:
        usage = api.FilesystemUsage(
            timestamp=int(NOW * 1e9),
            fs_id=api.FilesystemIdentifier(mountpoint=self.mountpoint),
            used_bytes=api.UInt64Value(value=999),
            inodes_used=api.UInt64Value(value=9),
        )
        return api.ImageFsInfoResponse(image_filesystems=[usage], container_filesystems=[usage])


def rich_provider(tmp_path: Path) -> SummaryProvider:
    base = provider(tmp_path, ScriptedRuntime())
    host = base.host
    for name, text in RICH_HOST_FILES.items():
        (host.root / name).parent.mkdir(parents=True, exist_ok=True)
        (host.root / name).write_text(text)
    clock = iter(range(10**6))
    return SummaryProvider(
        cast(RuntimeClient, RichRuntime()),
        cast(ImageClient, RichImages(str(tmp_path))),
        node_name="node1",
        root_dir=str(tmp_path),
        pod_logs_dir=base.pod_logs_dir,
        host=host,
        wall_clock=lambda: NOW + next(clock),
        sandbox_stats=True,  # PodAndContainerStatsFromCRI: every pod field from the runtime
    )


def _named(path: str) -> str | None:
    """The NOT_FILLED entry covering ``path``: a field name anywhere, or a path prefix."""
    fields = path.replace("[]", "").split(".")
    return next(
        (k for k in NOT_FILLED if k in fields or (k.startswith(".") and path.startswith(k))),
        None,
    )


async def test_every_upstream_field_is_filled_or_named(tmp_path: Path) -> None:
    stats = rich_provider(tmp_path)
    volume = tmp_path / "pods" / UID / "volumes" / "kubernetes.io~empty-dir" / "cache"
    volume.mkdir(parents=True)
    (volume / "f").write_bytes(b"x" * 5000)
    await stats.summary()
    summary = await stats.summary()  # rates need a second sample
    assert check(summary, SUMMARY, "summary") == []
    psi = await v2_provider(tmp_path / "v2").summary()  # PSI (io, psi): cgroup v2 only
    assert check(psi, SUMMARY, "summary") == []
    wanted = {p for p in leaves(SUMMARY) if _named(p) is None}
    missing = sorted(wanted - present(summary) - present(psi))
    assert missing == [], "\n".join(missing)
    names = [c["name"] for c in summary["node"]["systemContainers"]]
    assert sorted(names) == ["kubelet", "pods"]  # runtime and misc: only when configured
    only = await stats.summary(only_cpu_and_memory=True)
    assert check(only, SUMMARY, "summary") == []


async def test_swap_system_containers_rlimit_and_image_fs_values(tmp_path: Path) -> None:
    stats = rich_provider(tmp_path)
    summary = await stats.summary()
    node = summary["node"]
    assert node["swap"] == {
        "time": node["memory"]["time"], "swapUsageBytes": 400 * 1024,
        "swapAvailableBytes": 600 * 1024,
    }  # fmt: skip
    assert node["rlimit"]["maxpid"] == 63000  # min(pid_max, threads-max), as pidlimit_linux
    kubelet = next(c for c in node["systemContainers"] if c["name"] == "kubelet")
    assert kubelet["startTime"] == rfc3339(NOW)  # when the provider was made
    assert (
        kubelet["memory"]["workingSetBytes"] == 4000
        and kubelet["cpu"]["usageCoreNanoSeconds"] == 900
    )
    assert kubelet["swap"]["swapUsageBytes"] == 100
    assert kubelet["swap"]["swapAvailableBytes"] == 10000 - 100  # memsw limit − swap, as cAdvisor
    assert "rootfs" not in kubelet and "logs" not in kubelet
    [pod] = summary["pods"]
    assert (
        pod["swap"]["swapUsageBytes"] == 2100 - 2048
        and pod["swap"]["swapAvailableBytes"] == 8192 - 52
    )
    [app] = pod["containers"]
    assert app["swap"]["swapUsageBytes"] == 0 and app["swap"]["swapAvailableBytes"] == 0
    assert node["runtime"]["imageFs"]["time"] == rfc3339(NOW)  # the runtime's timestamp
    assert node["runtime"]["imageFs"]["inodesUsed"] == 9
    only = await stats.summary(only_cpu_and_memory=True)
    assert "swap" not in only["pods"][0]["containers"][0]  # no CRI figure: left out there


async def test_configured_system_cgroups_are_reported(tmp_path: Path) -> None:
    stats = rich_provider(tmp_path)
    stats.system_cgroups = SystemContainerNames(runtime=KUBELET_CGROUP, misc="/nowhere")
    names = [c["name"] for c in (await stats.summary())["node"]["systemContainers"]]
    assert names == ["kubelet", "runtime", "pods"]  # misc's cgroup does not exist: skipped


async def test_container_swap_from_the_runtime(tmp_path: Path) -> None:
    class SwapRuntime(RichRuntime):
        async def list_container_stats(self, **kw: Any) -> list[api.ContainerStats]:
            [stats] = await super().list_container_stats(**kw)
            stats.swap.CopyFrom(api.SwapUsage(timestamp=self.ts, swap_usage_bytes=api.UInt64Value(
                value=30), swap_available_bytes=api.UInt64Value(value=70)))  # fmt: skip
            return [stats]

    stats = rich_provider(tmp_path)
    stats.runtime = cast(RuntimeClient, SwapRuntime())
    for cgroup_file in (tmp_path / "host/sys/fs/cgroup/memory").glob(
        "kubepods/*/pod*/memory.memsw.*"
    ):
        cgroup_file.unlink()  # no pod cgroup swap: the pod sums its containers
    [pod] = (await stats.summary())["pods"]
    assert pod["containers"][0]["swap"]["swapUsageBytes"] == 30
    assert pod["swap"]["swapUsageBytes"] == 30 and pod["swap"]["swapAvailableBytes"] == 70


def test_the_checker_catches_what_upstream_would_not_decode() -> None:
    bad = {"node": {"nodeName": "n", "startTime": "x", "cpu": {"usageNanoCores": -1}}}
    assert check(bad, SUMMARY, "s") == [
        "s.pods: required",
        "s.node.startTime: not a time: 'x'",
        "s.node.cpu.time: required",
        "s.node.cpu.usageNanoCores: not an unsigned integer: -1",
    ]


async def test_resource_metrics_carry_the_swap_figures(tmp_path: Path) -> None:
    summary = await rich_provider(tmp_path).summary(only_cpu_and_memory=True)
    pod = summary["pods"][0]
    pod["containers"][0]["swap"] = {"time": pod["swap"]["time"], "swapUsageBytes": 60,
                                    "swapAvailableBytes": 40}  # fmt: skip
    text = resource_metrics(summary).decode()
    assert f"node_swap_usage_bytes {400 * 1024:.1f}" in text
    assert 'pod_swap_usage_bytes{namespace="default",pod="web"} 52.0' in text
    assert 'container_swap_usage_bytes{container="app",namespace="default",pod="web"} 60.0' in text
    assert 'container_swap_limit_bytes{container="app",namespace="default",pod="web"} 100.0' in text
    assert "# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. " in text


async def test_container_swap_from_its_cgroup_before_the_runtime(tmp_path: Path) -> None:
    stats = rich_provider(tmp_path)
    c1 = stats.host.root / f"sys/fs/cgroup/memory/kubepods/besteffort/pod{UID}/c1"
    c1.mkdir(parents=True)
    for name, text in (("memory.usage_in_bytes", "100\n"), ("memory.memsw.usage_in_bytes", "130\n"),
                       ("memory.memsw.limit_in_bytes", "1000\n")):  # fmt: skip
        (c1 / name).write_text(text)
    summary = await stats.summary()
    [app] = summary["pods"][0]["containers"]
    assert (app["swap"]["swapUsageBytes"], app["swap"]["swapAvailableBytes"]) == (30, 970)
    only = await stats.summary(only_cpu_and_memory=True)

    def kubelet(s: dict[str, Any]) -> dict[str, Any]:
        return next(c for c in s["node"]["systemContainers"] if c["name"] == "kubelet")

    assert "swap" in kubelet(summary) and "swap" not in kubelet(only)  # CPU and memory only
