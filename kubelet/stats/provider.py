"""``/stats/summary``: the stats/v1alpha1 ``Summary`` from the CRI, /proc and cgroup v1.

Node figures come from the root cgroup (falling back to /proc), ``statvfs`` of the root
directory, /proc/net/dev and the runtime's ``ImageFsInfo``. Containers come from the
runtime's ``ListContainerStats``. Pods, as upstream's CRI stats provider without the
``PodAndContainerStatsFromCRI`` gate (its default): CPU and memory from the pod's cgroup
(``/kubepods/.../pod<uid>``), else the sum of its containers; the network from
/proc/<pid>/net/dev of the sandbox's first process (cAdvisor's reading of the sandbox
container). With the gate, the runtime's ``ListPodSandboxStats`` gives them, the cgroup
standing in when it does not implement it (UNIMPLEMENTED). That call is costly: containerd
1.6 takes 12-18 s of its own CPU for it at 500 pods, and answers the PLEG's lists several
times slower meanwhile. Only ready sandboxes and running containers (the newest per name)
are reported, as upstream.

``usageNanoCores`` needs two samples: the runtime's figure is used when it gives one,
otherwise the rate since the previous scrape (so the first scrape omits it).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Set
from typing import Any

import attrs
import trio

from kubelet.cgroups import NODE_ALLOCATABLE, CgroupName
from kubelet.cri import CriError, ImageClient, RuntimeClient, Unimplemented, api, labels
from kubelet.goformat import rfc3339

from .cgroupfigures import container_cgroup
from .claimrecords import claim_record_path
from .host import (
    CpuSample,
    FsSample,
    HostStats,
    InterfaceSample,
    MemorySample,
    PodCgroupFinder,
    files_usage,
)
from .pace import Pacer
from .psi import add_psi
from .summary import (
    ContainerUsage,
    FsUsage,
    MemoryUsage,
    NodeUsage,
    PodUsage,
    Summary,
    VolumeUsage,
    from_json,
)
from .syscontainers import SystemContainerNames, swap_json, system_containers, zero_swap
from .volumes import AGG_PERIOD, PodVolume, ReportedVolumes, VolumeUsageCache

log = logging.getLogger(__name__)

LOCAL_EPHEMERAL_PLUGINS = (
    "kubernetes.io~empty-dir",
    "kubernetes.io~configmap",
    "kubernetes.io~git-repo",
)

Json = dict[str, Any]

DEFAULT_INTERFACE = "eth0"
"""The pod interface whose figures stand at the top of its ``network`` (upstream's)."""
IGNORED_DEVICES = ("lo", "veth", "docker", "nerdctl")
"""Devices cAdvisor leaves out of a container's network figures (name prefixes)."""


def _prune(obj: Json) -> Json:
    return {k: v for k, v in obj.items() if v is not None}


def _stamp(seconds: float) -> float:
    """A time as the typed figures hold it: what ``rfc3339`` writes (whole seconds), read
    back as ``from_json`` reads it."""
    return float(int(seconds))


def fs_usage(
    time: float | None,
    fs: FsSample | None,
    used: int | None = None,
    inodes_used: int | None = None,
) -> FsUsage:
    """A filesystem's figures: size from ``fs`` (statvfs), use as given (a writable layer,
    log files, a volume) or, when not given, the filesystem's own."""
    if fs is None:
        return FsUsage(time=time, used=used, inodes_used=inodes_used)
    if used is None:
        used, inodes_used = fs.used, fs.inodes - fs.inodes_free
    return FsUsage(
        time=time,
        available=fs.available,
        capacity=fs.capacity,
        used=used,
        inodes_free=fs.inodes_free,
        inodes=fs.inodes,
        inodes_used=inodes_used,
    )


def fs_json(
    when: str, fs: FsSample | None, used: int | None = None, inodes_used: int | None = None
) -> Json:
    """``fs_usage`` as stats/v1alpha1 ``FsStats``."""
    u = fs_usage(None, fs, used, inodes_used)
    return _prune(
        {
            "time": when,
            "usedBytes": u.used,
            "inodesUsed": u.inodes_used,
            "availableBytes": u.available,
            "capacityBytes": u.capacity,
            "inodesFree": u.inodes_free,
            "inodes": u.inodes,
        }
    )


def _available(m: MemorySample, capacity: int | None) -> int | None:
    """Memory left to the cgroup: its limit (the machine's capacity when it has none)
    minus its working set."""
    limit = m.limit if m.limit is not None else capacity
    return max(limit - m.working_set, 0) if limit is not None else None


def memory_usage(
    time: float | None, m: MemorySample, capacity: int | None, available: int | None = None
) -> MemoryUsage:
    """``memory_json``'s figures that the eviction manager reads; ``available``: the
    runtime's own figure, when it gives one."""
    if available is None:
        available = _available(m, capacity)
    return MemoryUsage(time=time, available=available, usage=m.usage, working_set=m.working_set)


def memory_json(when: str, m: MemorySample, capacity: int | None) -> Json:
    return _prune(
        {
            "time": when,
            "availableBytes": _available(m, capacity),
            "usageBytes": m.usage,
            "workingSetBytes": m.working_set,
            "rssBytes": m.rss,
            "pageFaults": m.page_faults,
            "majorPageFaults": m.major_page_faults,
        }
    )


class RateCache:
    """Previous cumulative CPU samples, to turn them into nano-cores."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[int, int]] = {}

    def rate(self, key: str, ts_ns: int, usage_ns: int) -> int | None:
        previous = self._last.get(key)
        self._last[key] = (ts_ns, usage_ns)
        if previous is None or ts_ns <= previous[0] or usage_ns < previous[1]:
            return None
        return int((usage_ns - previous[1]) * 1e9 / (ts_ns - previous[0]))

    def keep(self, keys: Iterable[str]) -> None:
        wanted = set(keys)
        self._last = {k: v for k, v in self._last.items() if k in wanted}


def _cpu_json(when: str, ts_ns: int, usage: int, nano_cores: int | None) -> Json:
    return _prune({"time": when, "usageCoreNanoSeconds": usage, "usageNanoCores": nano_cores})


def pod_log_dirs(root: str) -> dict[str, list[str]]:
    """The pod log directories under ``root`` (``<namespace>_<name>_<uid>``) by UID, as
    the glob ``root/*_<uid>`` finds them: one listing per summary, not one per container
    (that made a pass over N pods cost O(N²))."""
    found: dict[str, list[str]] = {}
    try:
        entries = os.listdir(root)
    except OSError:
        return found
    for entry in entries:
        if entry.startswith("."):  # what the glob's * leaves out
            continue
        _, sep, uid = entry.rpartition("_")
        if sep:
            found.setdefault(uid, []).append(os.path.join(root, entry))
    return found


def _claim_pods(pods: str) -> list[str]:
    """The pods (uids) that have claim volumes: the others are not measured for them."""
    return [
        uid
        for uid in sorted(_listdir(pods))
        if os.path.isdir(os.path.dirname(claim_record_path(os.path.join(pods, uid), "-")))
    ]


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _value(message: Any, field: str) -> int | None:
    """An optional ``UInt64Value`` field of a CRI message (None when unset)."""
    return message.__getattribute__(field).value if message.HasField(field) else None


class SummaryProvider:
    """Builds Summary objects; keeps the previous CPU samples between scrapes."""

    def __init__(
        self,
        runtime: RuntimeClient,
        images: ImageClient | None,
        *,
        node_name: str,
        root_dir: str,
        pod_logs_dir: str,
        host: HostStats | None = None,
        wall_clock: Callable[[], float] = time.time,
        system_cgroups: SystemContainerNames | None = None,
        volume_stats_period: float = AGG_PERIOD,
        volume_walks_in_threads: bool = True,
        pods_root: CgroupName = (NODE_ALLOCATABLE,),
        psi: bool = True,
        sandbox_stats: bool = False,
        reported_volumes: ReportedVolumes | None = None,
    ) -> None:
        self.runtime = runtime
        self.images = images
        self.node_name = node_name
        self.root_dir = root_dir
        self.pod_logs_dir = pod_logs_dir
        self.host = host or HostStats()
        self.wall_clock = wall_clock
        self.system_cgroups = system_cgroups or SystemContainerNames()
        self.pods_root = pods_root
        """the parent of the pod cgroups: ``cgroupRoot`` + ``kubepods`` (cgroupsPerQOS)"""
        self.psi = psi
        """KubeletPSI: pressure (cgroup v2 only) in ``cpu``, ``memory`` and ``io``"""
        self.started_at = wall_clock()
        """the ``kubelet`` system container's start: when the summary provider was made"""
        self.rates = RateCache()
        self.volumes = VolumeUsageCache(
            root_dir,
            trio.current_time,
            volume_stats_period,
            in_threads=volume_walks_in_threads,
            reported=reported_volumes,
        )
        self._sandbox_stats_supported = sandbox_stats
        """PodAndContainerStatsFromCRI: pod figures from ListPodSandboxStats (until the
        runtime says UNIMPLEMENTED)"""
        self.pacer: Callable[[], Pacer] = Pacer
        """Makes the pacer of each pass over the pods (tests give one that always yields)."""

    async def summary(self, only_cpu_and_memory: bool = False, lean: bool = False) -> Json:
        """The summary; ``lean`` leaves out the pods' and containers' network, swap and
        pressure, which the eviction manager reads none of (at 500 pods: the sandboxes'
        /proc/<pid>/net/dev, and some ten cgroup files and stats per pod, every 10 s):
        the JSON of what ``usage`` gives it. The figures it keeps are those of the full
        summary, CPU included: its rates advance as upstream's eviction pass advances them."""
        node = await self.node_stats(only_cpu_and_memory)
        pods = await self.pod_stats(only_cpu_and_memory, lean)
        return {"node": node, "pods": pods}

    # -- node -----------------------------------------------------------------------------

    def _node_cpu(self, when: str, now_ns: int) -> Json | None:
        sample = self.host.cgroup_cpu("/")
        usage = sample.usage_ns if sample is not None else self.host.proc_cpu_ns()
        if usage is None:
            return None
        return _cpu_json(when, now_ns, usage, self.rates.rate("node", now_ns, usage))

    async def node_stats(self, only_cpu_and_memory: bool = False) -> Json:
        now = self.wall_clock()
        when, now_ns = rfc3339(now), int(now * 1e9)
        capacity = self.host.memory_capacity()
        memory = self.host.cgroup_memory("/") or self.host.proc_memory()
        boot = self.host.boot_time()
        node: Json = {
            "nodeName": self.node_name,
            "startTime": rfc3339(boot if boot is not None else now),
            "cpu": self._node_cpu(when, now_ns),
            "memory": memory_json(when, memory, capacity) if memory else None,
        }
        node["swap"] = self._node_swap(when)
        self._add_psi(node, "/", not only_cpu_and_memory)
        node["systemContainers"] = system_containers(
            self.host, self.system_cgroups, when=when, kubelet_start=self.started_at,
            pods_root=self.pods_root, with_swap=not only_cpu_and_memory, psi=self.psi,
            cpu=self._cgroup_cpu, memory=lambda w, m: memory_json(w, m, capacity),
        ) or None  # fmt: skip
        if not only_cpu_and_memory:
            node["network"] = self._node_network(when)
            node["fs"] = fs_json(when, self.host.filesystem(self.root_dir))
            node["runtime"] = await self.runtime_fs(when)
            rlimit = self.host.cgroups.rlimit()
            node["rlimit"] = _prune(
                {"time": when, "maxpid": rlimit.max_pid, "curproc": rlimit.num_processes}
            )
        return _prune(node)

    def _cgroup_cpu(self, key: str, cgroup: str) -> Json | None:
        now = self.wall_clock()
        sample = self.host.cgroup_cpu(cgroup)
        if sample is None:
            return None
        now_ns = int(now * 1e9)
        rate = self.rates.rate(key, now_ns, sample.usage_ns)
        return _cpu_json(rfc3339(now), now_ns, sample.usage_ns, rate)

    def _node_swap(self, when: str) -> Json | None:
        """The machine's swap (/proc/meminfo), as upstream's root-cgroup figure."""
        swap = self.host.cgroups.meminfo_swap()
        return swap_json(when, swap) if swap is not None else None

    def _node_network(self, when: str) -> Json | None:
        interfaces = self.host.interfaces()
        if not interfaces:
            return None
        default = self.host.default_interface() or interfaces[0].name
        rows = [_interface_json(i) for i in interfaces]
        main = next((r for r in rows if r["name"] == default), rows[0])
        return {"time": when, **main, "interfaces": rows}

    async def runtime_fs(self, when: str) -> Json | None:
        """``imageFs`` and ``containerFs`` as the runtime reports them (ImageFsInfo), sized
        by the filesystem holding each mountpoint."""
        if self.images is None:
            return None
        try:
            info = await self.images.image_fs_info()
        except CriError as exc:
            log.debug("ImageFsInfo failed: %s", exc)
            return None
        if not info.image_filesystems:
            return None
        out: Json = {"imageFs": self._fs_usage(when, info.image_filesystems[0])}
        containers = info.container_filesystems or info.image_filesystems
        out["containerFs"] = self._fs_usage(when, containers[0])
        return out

    def _fs_usage(self, when: str, usage: api.FilesystemUsage) -> Json:
        """One ImageFsInfo filesystem: used figures and time from the runtime, size from
        statvfs of its mountpoint (omitted when that is not on this node, as upstream)."""
        mount = usage.fs_id.mountpoint
        fs = self.host.filesystem(mount) if mount else None
        stamp = rfc3339(usage.timestamp / 1e9) if usage.timestamp else when
        return fs_json(stamp, fs, _value(usage, "used_bytes") or 0, _value(usage, "inodes_used"))

    # -- pods -----------------------------------------------------------------------------

    async def _sandbox_stats(self, ids: list[str]) -> dict[str, api.PodSandboxStats] | None:
        """Stats of the given sandboxes; None when the runtime has no sandbox stats at all.

        containerd 1.6 fails the whole list when one sandbox has no cgroup (e.g. created
        without a cgroup parent); then each sandbox is asked on its own.
        """
        if not self._sandbox_stats_supported:
            return None
        try:
            stats = await self.runtime.list_pod_sandbox_stats()
        except Unimplemented:
            log.info("runtime does not implement ListPodSandboxStats; using pod cgroups")
            self._sandbox_stats_supported = False
            return None
        except CriError as exc:
            log.debug("ListPodSandboxStats failed (%s); asking sandbox by sandbox", exc)
            out: dict[str, api.PodSandboxStats] = {}
            for sandbox_id in ids:
                with contextlib.suppress(CriError):
                    out[sandbox_id] = await self.runtime.pod_sandbox_stats(sandbox_id)
            return out
        return {s.attributes.id: s for s in stats}

    async def _container_stats(self) -> dict[str, api.ContainerStats]:
        try:
            stats = await self.runtime.list_container_stats()
        except CriError as exc:
            log.debug("ListContainerStats failed: %s", exc)
            return {}
        return {s.attributes.id: s for s in stats}

    async def _pod_pass(self, only_cpu_and_memory: bool) -> _PodPass:
        """What a pass over the pods reads once for all of them."""
        sandboxes = [
            s
            for s in await self.runtime.list_pod_sandbox(state=api.SANDBOX_READY)
            if s.labels.get(labels.POD_UID)
        ]
        containers = await self.runtime.list_containers(state=api.CONTAINER_RUNNING)
        sandbox_stats = await self._sandbox_stats([s.id for s in sandboxes])
        container_stats = await self._container_stats()
        full = not only_cpu_and_memory
        by_sandbox: dict[str, dict[str, api.Container]] = {}
        for c in sorted(containers, key=lambda c: c.created_at):
            by_sandbox.setdefault(c.pod_sandbox_id, {})[c.metadata.name] = c  # newest wins
        return _PodPass(
            sandboxes=sorted(sandboxes, key=lambda s: s.created_at),
            containers=containers,
            by_sandbox=by_sandbox,
            sandbox_stats=sandbox_stats,
            container_stats=container_stats,
            capacity=self.host.memory_capacity(),
            logs_fs=self.host.filesystem(self.pod_logs_dir) if full else None,
            image_fs=await self._image_fs() if full else None,
            log_dirs=pod_log_dirs(self.pod_logs_dir) if full else None,
            cgroups=self.host.pod_cgroups(self.pods_root),
        )

    def _end_pass(self, p: _PodPass, only_cpu_and_memory: bool) -> None:
        """Forget the volumes and CPU samples of pods and containers that are gone."""
        if not only_cpu_and_memory:
            self.volumes.keep({s.labels[labels.POD_UID] for s in p.sandboxes})
        self.rates.keep(
            ["node", "kubelet", "runtime", "misc", "pods"]
            + [f"pod/{s.labels[labels.POD_UID]}" for s in p.sandboxes]
            + [f"container/{c.id}" for c in p.containers]
        )

    async def pod_stats(self, only_cpu_and_memory: bool = False, lean: bool = False) -> list[Json]:
        p = await self._pod_pass(only_cpu_and_memory)
        out: list[Json] = []
        pacer = self.pacer()
        for sandbox in p.sandboxes:
            await pacer.tick()  # 500 pods take 100 ms and more: the loop runs between them
            pod_containers = [
                self._container_json(c, p.container_stats.get(c.id), p, lean)
                for c in p.by_sandbox.get(sandbox.id, {}).values()
            ]
            stats = p.sandbox_stats.get(sandbox.id) if p.sandbox_stats is not None else None
            pod = self._pod_json(
                sandbox, stats, pod_containers, p.capacity, only_cpu_and_memory, p.cgroups, lean
            )
            if not only_cpu_and_memory:
                await self._add_volumes(pod)
            out.append(pod)
        self._end_pass(p, only_cpu_and_memory)
        # newest sandbox per pod uid wins (a pod restarted its sandbox)
        newest: dict[str, Json] = {p["podRef"]["uid"]: p for p in out}
        return list(newest.values())

    # -- the eviction manager's summary: typed figures, built directly ---------------------

    async def usage(self) -> Summary:
        """The figures of ``summary(lean=True)`` that ``from_json`` keeps, made without the
        JSON in between: formatting it and reading it back were a fifth of the pass's CPU
        at 500 pods, every 10 s. The reads and the rules are the JSON's (``_PodPass``,
        ``fs_usage``, ``memory_usage``...); the CPU rates advance as that summary advances
        them. The eviction manager reads the same in two steps (``node_usage``, then
        ``pods_usage`` of the pods its decision needs)."""
        node = await self.node_usage()
        return Summary(node=node, pods=await self.pods_usage())

    async def node_usage(self) -> NodeUsage:
        """The node's figures of ``usage`` (all that the eviction signals are made of)."""
        return from_json({"node": await self.node_stats()}).node

    async def pods_usage(self, wanted: Set[str] | None = None) -> tuple[PodUsage, ...]:
        """The pods' figures of ``usage``: of the pods whose UID is in ``wanted`` (None:
        all). The others are only sampled for CPU, as a full read samples them (one cgroup
        file per pod, the runtime's container stats): ``/stats/summary``'s nano-cores stay
        the rate since this pass, while their memory, pids, logs and writable layers (some
        ten reads per pod, every 10 s) are not read for nothing. Their volumes are measured
        when their figures are a period old, as in a full read."""
        p = await self._pod_pass(only_cpu_and_memory=wanted is not None and not wanted)
        newest: dict[str, PodUsage] = {}  # the newest sandbox of a pod wins, as above
        pacer = self.pacer()
        for sandbox in p.sandboxes:
            await pacer.tick()
            if wanted is None or sandbox.labels[labels.POD_UID] in wanted:
                pod = await self._pod_usage(sandbox, p)
                newest[pod.uid] = pod
            else:
                self._sample_pod_cpu(sandbox, p)
                # the volumes are measured at the pass's cadence all the same (each once a
                # period, as upstream's background measurement): a scrape reads them cached
                await self.volumes.pod_volumes(sandbox.labels[labels.POD_UID])
        self._end_pass(p, only_cpu_and_memory=False)
        return tuple(newest.values())

    async def _pod_usage(self, sandbox: api.PodSandbox, p: _PodPass) -> PodUsage:
        uid = sandbox.labels.get(labels.POD_UID, sandbox.metadata.uid)
        now = self.wall_clock()
        stamp = _stamp(now)
        containers = [
            self._container_usage(c, p.container_stats.get(c.id), p, stamp)
            for c in p.by_sandbox.get(sandbox.id, {}).values()
        ]
        stats = p.sandbox_stats.get(sandbox.id) if p.sandbox_stats is not None else None
        cpu = False
        memory = None
        if stats is not None and stats.HasField("linux"):
            cpu = self._cri_cpu(f"pod/{uid}", stats.linux.cpu) is not None
            memory = _cri_memory_usage(stats.linux.memory)
        cgroup = p.cgroups.find(uid)
        if (not cpu or memory is None) and cgroup is not None:
            sample = self._pod_cgroup_samples(uid, cgroup, now)[1]
            if memory is None and sample is not None:
                memory = memory_usage(stamp, sample, p.capacity)
        if memory is None:
            memory = _sum_memory(containers)
        ephemeral = _ephemeral_usage(
            [f for c in containers for f in (c.rootfs, c.logs) if f is not None]
        )
        volumes, ephemeral = await self._volumes_usage(uid, ephemeral, stamp)
        return PodUsage(
            uid=uid,
            name=sandbox.labels.get(labels.POD_NAME, sandbox.metadata.name),
            namespace=sandbox.labels.get(labels.POD_NAMESPACE, sandbox.metadata.namespace),
            memory=memory,
            containers=tuple(containers),
            volumes=volumes,
            ephemeral_storage=ephemeral,
            process_count=self.host.cgroup_pids(cgroup) if cgroup is not None else None,
        )

    def _sample_pod_cpu(self, sandbox: api.PodSandbox, p: _PodPass) -> None:
        """The CPU samples ``_pod_usage`` takes of the pod and its containers (the same
        rates advance, from the same sources), without its other reads."""
        uid = sandbox.labels[labels.POD_UID]
        for c in p.by_sandbox.get(sandbox.id, {}).values():
            container = p.container_stats.get(c.id)
            if container is not None:
                self._cri_cpu(f"container/{c.id}", container.cpu)
        stats = p.sandbox_stats.get(sandbox.id) if p.sandbox_stats is not None else None
        cpu = memory = False
        if stats is not None and stats.HasField("linux"):
            cpu = self._cri_cpu(f"pod/{uid}", stats.linux.cpu) is not None
            memory = _cri_memory(stats.linux.memory) is not None
        cgroup = p.cgroups.find(uid)
        if (not cpu or not memory) and cgroup is not None:
            self._pod_cgroup_cpu(uid, cgroup, int(self.wall_clock() * 1e9))

    def _container_usage(
        self, c: api.Container, stats: api.ContainerStats | None, p: _PodPass, stamp: float
    ) -> ContainerUsage:
        name = c.metadata.name
        if stats is None:
            return ContainerUsage(name=name)
        self._cri_cpu(f"container/{c.id}", stats.cpu)
        rootfs = logs = None
        if p.logs_fs is not None or p.image_fs is not None:
            if stats.HasField("writable_layer"):
                rootfs = _layer_usage(stamp, p.image_fs, stats.writable_layer)
            logs = fs_usage(stamp, p.logs_fs, *self._log_files(c, p.log_dirs))
        return ContainerUsage(
            name=name, memory=_cri_memory_usage(stats.memory), rootfs=rootfs, logs=logs
        )

    async def _volumes_usage(
        self, uid: str, ephemeral: FsUsage | None, stamp: float
    ) -> tuple[tuple[VolumeUsage, ...], FsUsage | None]:
        """``_add_volumes``'s figures: the pod's volumes, and its ephemeral storage with
        the local ephemeral ones added."""
        volumes = await self.volumes.pod_volumes(uid)
        if not volumes:
            return (), ephemeral
        rows = tuple(VolumeUsage(name=v.name, fs=self._volume_usage(stamp, v)) for v in volumes)
        local = [r.fs for v, r in zip(volumes, rows, strict=True) if self._local_ephemeral(v)]
        if local:
            parts = local if ephemeral is None else [ephemeral, *local]
            ephemeral = _with_use(
                ephemeral or local[0],
                sum(f.used or 0 for f in parts),
                sum(f.inodes_used or 0 for f in parts),
            )
        return rows, ephemeral

    async def _add_volumes(self, pod: Json) -> None:
        """The pod's ``volume`` list, and its local ephemeral volumes in ``ephemeral-storage``."""
        when = rfc3339(self.wall_clock())
        volumes = await self.volumes.pod_volumes(pod["podRef"]["uid"])
        if not volumes:
            return
        rows = [self._volume_json(when, v) for v in volumes]
        pod["volume"] = rows
        local = [r for v, r in zip(volumes, rows, strict=True) if self._local_ephemeral(v)]
        if local:
            base = dict(pod.get("ephemeral-storage") or local[0])
            base["usedBytes"] = sum(r["usedBytes"] for r in local) + (
                pod.get("ephemeral-storage") or {}
            ).get("usedBytes", 0)
            base["inodesUsed"] = sum(r["inodesUsed"] for r in local) + (
                pod.get("ephemeral-storage") or {}
            ).get("inodesUsed", 0)
            pod["ephemeral-storage"] = base

    async def claim_volume_rows(self) -> list[Json]:
        """The summary rows of every pod's claim volumes (``kubelet_volume_stats_*``)."""
        when = rfc3339(self.wall_clock())
        rows = []
        for uid in _claim_pods(os.path.join(self.root_dir, "pods")):
            for volume in await self.volumes.pod_volumes(uid):
                if volume.pvc is not None:
                    rows.append(self._volume_json(when, volume))
        return rows

    def _volume_fs(self, volume: PodVolume) -> FsSample | None:
        """The volume's filesystem: as its driver reports it, else statvfs of its path."""
        r = volume.reported
        if r is None:
            return self.host.filesystem(volume.path)
        return FsSample(r.capacity, r.available, r.used, r.inodes, r.inodes_free)

    def _volume_json(self, when: str, volume: PodVolume) -> Json:
        row = fs_json(when, self._volume_fs(volume), volume.usage.bytes, volume.usage.inodes)
        row["name"] = volume.name
        if volume.pvc is not None:
            row["pvcRef"] = {"name": volume.pvc[0], "namespace": volume.pvc[1]}
        if volume.reported is not None and volume.reported.abnormal is not None:
            row["volumeHealthStats"] = {"abnormal": volume.reported.abnormal}
        return row

    def _volume_usage(self, time: float, volume: PodVolume) -> FsUsage:
        return fs_usage(time, self._volume_fs(volume), volume.usage.bytes, volume.usage.inodes)

    def _local_ephemeral(self, volume: PodVolume) -> bool:
        """emptyDir on disk, configMap, gitRepo: upstream's ``IsLocalEphemeralVolume``
        (a memory-backed emptyDir is a tmpfs: another device than ``--root-dir``)."""
        if volume.plugin not in LOCAL_EPHEMERAL_PLUGINS:
            return False
        try:
            return os.stat(volume.path).st_dev == os.stat(self.root_dir).st_dev
        except OSError:
            return False

    async def _image_fs(self) -> FsSample | None:
        if self.images is None:
            return None
        try:
            info = await self.images.image_fs_info()
        except CriError:
            return None
        if info.container_filesystems:
            mount = info.container_filesystems[0].fs_id.mountpoint
        elif info.image_filesystems:
            mount = info.image_filesystems[0].fs_id.mountpoint
        else:
            return None
        return self.host.filesystem(mount) if mount else None

    def _container_json(
        self, c: api.Container, stats: api.ContainerStats | None, p: _PodPass, lean: bool
    ) -> Json:
        out: Json = {"name": c.metadata.name, "startTime": rfc3339(c.created_at / 1e9)}
        if stats is not None:
            out.update(self._cpu_memory(f"container/{c.id}", stats.cpu, stats.memory, p.capacity))
            logs_fs, image_fs = p.logs_fs, p.image_fs
            full = logs_fs is not None or image_fs is not None
            when = rfc3339(self.wall_clock())
            if not lean:  # the container's cgroup gives only swap and pressure
                cgroup = self._container_cgroup(c, p.cgroups)
                out["swap"] = self._cgroup_swap(cgroup, when) or _container_swap(stats, when, full)
                self._add_psi(out, cgroup, full)
            if full:
                when = rfc3339(self.wall_clock())
                if stats.HasField("writable_layer"):
                    layer = stats.writable_layer
                    out["rootfs"] = fs_json(
                        when,
                        image_fs,
                        _value(layer, "used_bytes") or 0,
                        _value(layer, "inodes_used"),
                    )
                out["logs"] = fs_json(when, logs_fs, *self._log_files(c, p.log_dirs))
        return _prune(out)

    def _log_files(
        self, c: api.Container, log_dirs: Mapping[str, list[str]] | None = None
    ) -> tuple[int, int]:
        """(bytes, inodes) of the container's log files."""
        uid = c.labels.get(labels.POD_UID, "")
        if log_dirs is None:
            name = glob.escape(c.metadata.name)
            files = glob.glob(f"{self.pod_logs_dir}/*_{uid}/{name}/*")
        else:  # what the glob of each pod directory finds, listed without glob's machinery
            files = [
                f"{directory}/{entry}"
                for directory in [f"{d}/{c.metadata.name}" for d in log_dirs.get(uid, ())]
                for entry in _listdir(directory)
                if not entry.startswith(".")
            ]
        return files_usage(files)

    def _cri_cpu(self, key: str, cpu: api.CpuUsage) -> tuple[int, int | None] | None:
        """The runtime's cumulative CPU and nano-cores (its own, else the rate since the
        previous sample, which this advances); None when it gives no CPU figure."""
        if not (cpu.timestamp and cpu.HasField("usage_core_nano_seconds")):
            return None
        usage = cpu.usage_core_nano_seconds.value
        computed = self.rates.rate(key, cpu.timestamp, usage)
        return usage, _value(cpu, "usage_nano_cores") or computed

    def _cpu_memory(
        self, key: str, cpu: api.CpuUsage, memory: api.MemoryUsage, capacity: int | None
    ) -> Json:
        out: Json = {}
        figures = self._cri_cpu(key, cpu)
        if figures is not None:
            usage, nano_cores = figures
            out["cpu"] = _cpu_json(rfc3339(cpu.timestamp / 1e9), cpu.timestamp, usage, nano_cores)
        found = _cri_memory(memory)
        if found is not None:
            sample, available = found
            mem = memory_json(rfc3339(memory.timestamp / 1e9), sample, None)
            if available is not None:
                mem["availableBytes"] = available
            out["memory"] = mem
        return out

    def _pod_json(
        self,
        sandbox: api.PodSandbox,
        stats: api.PodSandboxStats | None,
        containers: list[Json],
        capacity: int | None,
        only_cpu_and_memory: bool,
        cgroups: PodCgroupFinder,
        lean: bool = False,
    ) -> Json:
        uid = sandbox.labels.get(labels.POD_UID, sandbox.metadata.uid)
        pod: Json = {
            "podRef": {
                "name": sandbox.labels.get(labels.POD_NAME, sandbox.metadata.name),
                "namespace": sandbox.labels.get(labels.POD_NAMESPACE, sandbox.metadata.namespace),
                "uid": uid,
            },
            "startTime": rfc3339(sandbox.created_at / 1e9),
            "containers": containers,
        }
        if stats is not None and stats.HasField("linux"):
            pod.update(
                self._cpu_memory(f"pod/{uid}", stats.linux.cpu, stats.linux.memory, capacity)
            )
            if not only_cpu_and_memory and stats.linux.HasField("network"):
                pod["network"] = _network_json(stats.linux.network)
        cgroup = cgroups.find(uid)
        if not lean and not only_cpu_and_memory and "network" not in pod:
            pod["network"] = self._pod_network(sandbox.id, cgroup)
        if "cpu" not in pod or "memory" not in pod:
            found = self._pod_cgroup(uid, capacity, cgroup)
            pod.update({k: v for k, v in found.items() if k not in pod})
        if "cpu" not in pod or "memory" not in pod:
            pod.update({k: v for k, v in _sum_containers(containers).items() if k not in pod})
        if not lean:
            pod["swap"] = self._pod_swap(cgroup) or _sum_swap(containers)
            self._add_psi(pod, cgroup, not only_cpu_and_memory)
        if not only_cpu_and_memory:
            pod["ephemeral-storage"] = _ephemeral(containers)
            pod["process_stats"] = self._process_stats(cgroup)
        return _prune(pod)

    def _container_cgroup(self, c: api.Container, cgroups: PodCgroupFinder) -> str | None:
        pod = cgroups.find(c.labels.get(labels.POD_UID, ""))
        return container_cgroup(self.host, pod, c.id) if pod is not None else None

    def _add_psi(self, row: Json, cgroup: str | None, io: bool) -> None:
        """The cgroup's pressure into ``row`` (KubeletPSI; upstream reads it from cAdvisor,
        which has it on cgroup v2 only)."""
        if self.psi and cgroup is not None:
            add_psi(row, self.host.cgroups.pressure(cgroup), rfc3339(self.wall_clock()), io)

    def _cgroup_swap(self, cgroup: str | None, when: str) -> Json | None:
        """The container cgroup's swap: upstream reads it through cAdvisor before the CRI."""
        swap = self.host.cgroups.swap(cgroup) if cgroup is not None else None
        return swap_json(when, swap) if swap is not None else None

    def _pod_swap(self, cgroup: str | None) -> Json | None:
        """The pod cgroup's swap (upstream reads it through cAdvisor before the CRI)."""
        swap = self.host.cgroups.swap(cgroup) if cgroup is not None else None
        return swap_json(rfc3339(self.wall_clock()), swap) if swap is not None else None

    def _process_stats(self, cgroup: str | None) -> Json | None:
        """The pod's task count from its cgroup (pid.available ranks pods by it)."""
        count = self.host.cgroup_pids(cgroup) if cgroup is not None else None
        return {"process_count": count} if count is not None else None

    def _pod_network(self, sandbox_id: str, cgroup: str | None) -> Json | None:
        """The interfaces of the sandbox's network namespace as cAdvisor reads them for
        the sandbox container: /proc/<pid>/net/dev of the first process of its cgroup,
        without loopback and host-side devices; ``eth0`` is the default interface."""
        sandbox = container_cgroup(self.host, cgroup, sandbox_id) if cgroup else None
        pid = self.host.cgroups.first_pid(sandbox) if sandbox is not None else None
        if pid is None:
            return None
        rows = [
            _interface_json(i)
            for i in self.host.interfaces(str(pid))
            if not i.name.startswith(IGNORED_DEVICES)
        ]
        if not rows:
            return None
        default = next((r for r in rows if r["name"] == DEFAULT_INTERFACE), {})
        return {"time": rfc3339(self.wall_clock()), **default, "interfaces": rows}

    def _pod_cgroup(self, uid: str, capacity: int | None, cgroup: str | None) -> Json:
        if cgroup is None:
            return {}
        now = self.wall_clock()
        cpu, memory = self._pod_cgroup_samples(uid, cgroup, now)
        when = rfc3339(now)
        out: Json = {}
        if cpu is not None:
            out["cpu"] = _cpu_json(when, int(now * 1e9), *cpu)
        if memory is not None:
            out["memory"] = memory_json(when, memory, capacity)
        return out

    def _pod_cgroup_samples(
        self, uid: str, cgroup: str, now: float
    ) -> tuple[tuple[int, int | None] | None, MemorySample | None]:
        """((cumulative CPU, its rate since the previous sample), memory) of the pod's
        cgroup read at ``now``; the rate advances."""
        return self._pod_cgroup_cpu(uid, cgroup, int(now * 1e9)), self.host.cgroup_memory(cgroup)

    def _pod_cgroup_cpu(self, uid: str, cgroup: str, now_ns: int) -> tuple[int, int | None] | None:
        """(cumulative CPU, its rate since the previous sample) of the pod's cgroup; the
        rate advances."""
        sample: CpuSample | None = self.host.cgroup_cpu(cgroup)
        if sample is None:
            return None
        return sample.usage_ns, self.rates.rate(f"pod/{uid}", now_ns, sample.usage_ns)


@attrs.frozen(kw_only=True)
class _PodPass:
    """What one pass over the pods reads once: the ready sandboxes (oldest first), the
    running containers (the newest of each name by sandbox), their stats, the capacity
    and filesystems; ``logs_fs``, ``image_fs`` and ``log_dirs`` only in a full pass."""

    sandboxes: list[api.PodSandbox]
    containers: list[api.Container]
    by_sandbox: dict[str, dict[str, api.Container]]
    sandbox_stats: dict[str, api.PodSandboxStats] | None
    container_stats: dict[str, api.ContainerStats]
    capacity: int | None
    logs_fs: FsSample | None
    image_fs: FsSample | None
    log_dirs: dict[str, list[str]] | None
    cgroups: PodCgroupFinder


def _cri_memory(memory: api.MemoryUsage) -> tuple[MemorySample, int | None] | None:
    """The runtime's memory figures and its available bytes (None: it gives none)."""
    if not (memory.timestamp and memory.HasField("working_set_bytes")):
        return None
    sample = MemorySample(
        usage=_value(memory, "usage_bytes") or 0,
        working_set=memory.working_set_bytes.value,
        rss=_value(memory, "rss_bytes"),
        page_faults=_value(memory, "page_faults"),
        major_page_faults=_value(memory, "major_page_faults"),
    )
    return sample, _value(memory, "available_bytes")


def _cri_memory_usage(memory: api.MemoryUsage) -> MemoryUsage | None:
    found = _cri_memory(memory)
    if found is None:
        return None
    sample, available = found
    return memory_usage(_stamp(memory.timestamp / 1e9), sample, None, available)


def _layer_usage(time: float, image_fs: FsSample | None, layer: api.FilesystemUsage) -> FsUsage:
    """A container's writable layer on the runtime's filesystem (its ``rootfs``)."""
    return fs_usage(time, image_fs, _value(layer, "used_bytes") or 0, _value(layer, "inodes_used"))


def _sum_memory(containers: list[ContainerUsage]) -> MemoryUsage | None:
    """``_sum_containers``' memory: the pod's as the sum of its containers'."""
    rows = [c.memory for c in containers if c.memory is not None]
    if not rows:
        return None
    return MemoryUsage(
        time=max(m.time or 0.0 for m in rows),
        usage=sum(m.usage or 0 for m in rows),
        working_set=sum(m.working_set or 0 for m in rows),
    )


def _ephemeral_usage(parts: list[FsUsage]) -> FsUsage | None:
    """``_ephemeral``: the containers' writable layers and logs together."""
    if not parts:
        return None
    return _with_use(
        parts[0], sum(p.used or 0 for p in parts), sum(p.inodes_used or 0 for p in parts)
    )


def _with_use(fs: FsUsage, used: int, inodes_used: int) -> FsUsage:
    """``fs`` with other use figures (``attrs.evolve`` costs several times as much)."""
    return FsUsage(
        time=fs.time,
        available=fs.available,
        capacity=fs.capacity,
        used=used,
        inodes_free=fs.inodes_free,
        inodes=fs.inodes,
        inodes_used=inodes_used,
    )


def _network_json(net: api.NetworkUsage) -> Json:
    def row(i: api.NetworkInterfaceUsage) -> Json:
        return _prune(
            {
                "name": i.name,
                "rxBytes": _value(i, "rx_bytes"),
                "rxErrors": _value(i, "rx_errors"),
                "txBytes": _value(i, "tx_bytes"),
                "txErrors": _value(i, "tx_errors"),
            }
        )

    default = row(net.default_interface) if net.HasField("default_interface") else {}
    return _prune(
        {
            "time": rfc3339(net.timestamp / 1e9),
            **default,
            "interfaces": [row(i) for i in net.interfaces] or None,
        }
    )


def _container_swap(stats: api.ContainerStats, when: str, full: bool) -> Json | None:
    """A container's ``swap`` from the runtime; zeros when it gives none (upstream's
    full summary does so; its CPU-and-memory summary leaves it out)."""
    if not stats.HasField("swap"):
        return zero_swap(when) if full else None
    swap = stats.swap
    stamp = rfc3339(swap.timestamp / 1e9) if swap.timestamp else when
    return _prune(
        {
            "time": stamp,
            "swapUsageBytes": _value(swap, "swap_usage_bytes"),
            "swapAvailableBytes": _value(swap, "swap_available_bytes"),
        }
    )


def _sum_swap(containers: list[Json]) -> Json | None:
    """Pod swap as the sum of its containers' (no pod cgroup to read)."""
    rows = [c["swap"] for c in containers if "swap" in c]
    if not rows:
        return None
    return {
        "time": max(r["time"] for r in rows),
        "swapUsageBytes": sum(r.get("swapUsageBytes", 0) for r in rows),
        "swapAvailableBytes": sum(r.get("swapAvailableBytes", 0) for r in rows),
    }


def _sum_containers(containers: list[Json]) -> Json:
    """Pod CPU and memory as the sum of its containers (no pod-level figure available)."""
    with_cpu = [c["cpu"] for c in containers if "cpu" in c]
    with_mem = [c["memory"] for c in containers if "memory" in c]
    out: Json = {}
    if with_cpu:
        out["cpu"] = _prune(
            {
                "time": max(c["time"] for c in with_cpu),
                "usageCoreNanoSeconds": sum(c.get("usageCoreNanoSeconds", 0) for c in with_cpu),
                "usageNanoCores": sum(c.get("usageNanoCores", 0) for c in with_cpu)
                if all("usageNanoCores" in c for c in with_cpu)
                else None,
            }
        )
    if with_mem:
        out["memory"] = {
            "time": max(m["time"] for m in with_mem),
            "usageBytes": sum(m.get("usageBytes", 0) for m in with_mem),
            "workingSetBytes": sum(m.get("workingSetBytes", 0) for m in with_mem),
        }
    return out


def _ephemeral(containers: list[Json]) -> Json | None:
    parts = [c[k] for c in containers for k in ("rootfs", "logs") if k in c]
    if not parts:
        return None
    base = dict(parts[0])
    base["usedBytes"] = sum(p.get("usedBytes", 0) for p in parts)
    base["inodesUsed"] = sum(p.get("inodesUsed", 0) for p in parts)
    return base


def _interface_json(i: InterfaceSample) -> Json:
    """One interface's counters as stats/v1alpha1 names them (node and pod network)."""
    return {
        "name": i.name,
        "rxBytes": i.rx_bytes,
        "rxErrors": i.rx_errors,
        "txBytes": i.tx_bytes,
        "txErrors": i.tx_errors,
    }
