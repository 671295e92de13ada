"""The eviction manager's typed summary (``SummaryProvider.usage``) against the JSON one.

``usage`` builds the typed figures directly; ``from_json`` of ``/stats/summary`` is what
they stood for until then. Over pods of different shapes (a pod cgroup or none, containers
with and without stats or a writable layer, volumes local and not, a restarted sandbox,
no containers at all; sandbox stats from the runtime or not) both must give the eviction
manager the same figures, so the two paths cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import attrs
import pytest

from kubelet.cri import ImageClient, RuntimeClient, api, labels
from kubelet.stats import HostStats, Pacer, SummaryProvider, UsageReader, from_json

from .test_stats import UID, ScriptedImages, fixed_filesystem, fixture_host

NOW = 1_800_000_000.7
"""a clock between two seconds: the summary's stamps are whole seconds"""
NO_CGROUP = "9d1a2b3c-0000-4000-8000-000000000002"
VOLUMES = "9d1a2b3c-0000-4000-8000-000000000003"
RESTARTED = "9d1a2b3c-0000-4000-8000-000000000004"


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _sandbox(ident: str, uid: str, name: str, age: float) -> api.PodSandbox:
    return api.PodSandbox(
        id=ident,
        metadata=api.PodSandboxMetadata(name=name, namespace="default", uid=uid),
        labels={labels.POD_UID: uid, labels.POD_NAME: name, labels.POD_NAMESPACE: "ns"},
        created_at=_ns(NOW - age),
        state=api.SANDBOX_READY,
    )


def _container(ident: str, sandbox: str, uid: str, name: str, age: float) -> api.Container:
    return api.Container(
        id=ident,
        pod_sandbox_id=sandbox,
        metadata=api.ContainerMetadata(name=name),
        labels={labels.POD_UID: uid},
        created_at=_ns(NOW - age),
        state=api.CONTAINER_RUNNING,
    )


@attrs.define
class ShapedRuntime:
    """Five pods: ``web`` (the fixture host's pod cgroup; a container with stats and a
    writable layer, one without stats), one without a cgroup (two containers, one
    without a writable layer, one whose runtime gives available bytes), one with volumes
    and no container, one whose sandbox was restarted (the newest counts); with
    ``sandbox_stats``, ListPodSandboxStats gives CPU and memory, CPU alone, or nothing."""

    sandbox_stats: bool = False
    clock: float = NOW
    web_memory: bool = True
    """whether the runtime's sandbox stats of ``web`` have memory (else CPU alone)"""

    async def list_pod_sandbox(self, **_: Any) -> list[api.PodSandbox]:
        return [
            _sandbox("s1", UID, "web", 50),
            _sandbox("s2", NO_CGROUP, "bare", 40),
            _sandbox("s3", VOLUMES, "vols", 30),
            _sandbox("s4-old", RESTARTED, "again", 20),
            _sandbox("s4", RESTARTED, "again", 10),
        ]

    async def list_containers(self, **_: Any) -> list[api.Container]:
        return [
            _container("c1", "s1", UID, "app", 45),
            _container("c1-nostats", "s1", UID, "side", 44),
            _container("c2a", "s2", NO_CGROUP, "a", 35),
            _container("c2b", "s2", NO_CGROUP, "b", 34),
            _container("c4-old", "s4-old", RESTARTED, "app", 15),
            _container("c4", "s4", RESTARTED, "app", 5),
        ]

    async def list_container_stats(self, **_: Any) -> list[api.ContainerStats]:
        ts = _ns(self.clock - 0.4)
        rows = []
        for ident, usage, layer, available in (
            ("c1", 1000, 4096, None),
            ("c2a", 300, 8192, None),
            ("c2b", 200, None, 5000),
            ("c4-old", 50, 100, None),
            ("c4", 70, 200, None),
        ):
            stats = api.ContainerStats(
                attributes=api.ContainerAttributes(id=ident),
                cpu=api.CpuUsage(
                    timestamp=ts, usage_core_nano_seconds=api.UInt64Value(value=_ns(self.clock))
                ),
                memory=api.MemoryUsage(
                    timestamp=ts,
                    working_set_bytes=api.UInt64Value(value=usage),
                    usage_bytes=api.UInt64Value(value=usage + 100),
                ),
            )
            if layer is not None:
                stats.writable_layer.CopyFrom(
                    api.FilesystemUsage(
                        timestamp=ts,
                        used_bytes=api.UInt64Value(value=layer),
                        inodes_used=api.UInt64Value(value=layer // 1024),
                    )
                )
            if available is not None:
                stats.memory.available_bytes.value = available
            rows.append(stats)
        return rows

    async def list_pod_sandbox_stats(self, **_: Any) -> list[api.PodSandboxStats]:
        ts = _ns(self.clock - 0.2)
        cpu = api.CpuUsage(timestamp=ts, usage_core_nano_seconds=api.UInt64Value(value=77))
        memory = api.MemoryUsage(timestamp=ts, working_set_bytes=api.UInt64Value(value=4321))
        return [
            api.PodSandboxStats(
                attributes=api.PodSandboxAttributes(id="s1"),
                linux=api.LinuxPodSandboxStats(cpu=cpu, memory=memory)
                if self.web_memory
                else api.LinuxPodSandboxStats(cpu=cpu),
            ),
            api.PodSandboxStats(
                attributes=api.PodSandboxAttributes(id="s2"),
                linux=api.LinuxPodSandboxStats(cpu=cpu),
            ),
            api.PodSandboxStats(attributes=api.PodSandboxAttributes(id="s3")),
        ]


def shaped_provider(
    tmp_path: Path, runtime: ShapedRuntime, clock: list[float] | None = None
) -> SummaryProvider:
    logs = tmp_path / "logs"
    for uid, name, container, size in (
        (UID, "web", "app", 10),
        (NO_CGROUP, "bare", "a", 20),
        (NO_CGROUP, "bare", "b", 30),
        (RESTARTED, "again", "app", 40),
    ):
        directory = logs / f"ns_{name}_{uid}" / container
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "0.log").write_text("x" * size)
    volumes = tmp_path / "pods" / VOLUMES / "volumes"
    for plugin, name, size in (
        ("kubernetes.io~empty-dir", "scratch", 3000),
        ("kubernetes.io~configmap", "config", 500),
        ("kubernetes.io~secret", "token", 100),  # not local ephemeral storage
    ):
        (volumes / plugin / name).mkdir(parents=True)
        (volumes / plugin / name / "data").write_bytes(b"v" * size)
    now = clock if clock is not None else [NOW]
    return SummaryProvider(
        cast(RuntimeClient, runtime),
        cast(ImageClient, ScriptedImages(str(tmp_path))),
        node_name="node1",
        root_dir=str(tmp_path),
        pod_logs_dir=str(logs),
        host=HostStats(fixture_host(tmp_path / "host").root, statvfs=fixed_filesystem),
        wall_clock=lambda: now[0],
        sandbox_stats=runtime.sandbox_stats,
    )


async def test_the_typed_summary_is_the_json_summary_read_back(tmp_path: Path) -> None:
    stats = shaped_provider(tmp_path, ShapedRuntime())
    typed = await UsageReader(stats).summary()
    assert typed == from_json(await stats.summary())
    assert typed == from_json(await stats.summary(lean=True))
    # the shapes are there: what would make the two paths differ is exercised
    web, bare, vols, again = typed.pods
    assert [p.uid for p in typed.pods] == [UID, NO_CGROUP, VOLUMES, RESTARTED]
    assert web.memory is not None and web.memory.available == 4096 - 2000  # the cgroup's
    assert [c.name for c in web.containers] == ["app", "side"]
    assert web.containers[1].memory is None and web.containers[1].logs is None
    assert web.process_count == 3 and bare.process_count is None
    assert bare.memory is not None and bare.memory.working_set == 500  # summed
    assert bare.containers[1].rootfs is None and bare.containers[1].memory is not None
    assert bare.containers[1].memory.available == 5000
    assert bare.ephemeral_storage is not None and bare.ephemeral_storage.used == 8192 + 50
    assert {v.name for v in vols.volumes} == {"scratch", "config", "token"}
    assert vols.containers == () and vols.ephemeral_storage is not None
    assert again.containers[0].memory is not None
    assert again.containers[0].memory.working_set == 70  # the newest sandbox's container
    assert web.memory.time == 1_800_000_000.0  # whole seconds, as the JSON's stamps


async def test_the_typed_summary_with_sandbox_stats_from_the_runtime(tmp_path: Path) -> None:
    stats = shaped_provider(tmp_path, ShapedRuntime(sandbox_stats=True))
    typed = await UsageReader(stats).summary()
    assert typed == from_json(await stats.summary())
    web, bare, vols, _ = typed.pods
    assert web.memory is not None and web.memory.working_set == 4321  # the runtime's
    assert bare.memory is not None and bare.memory.working_set == 500  # CPU alone: summed
    assert vols.memory is None


async def test_the_typed_pass_advances_the_cpu_rates_as_the_json_pass(tmp_path: Path) -> None:
    """The eviction pass takes a CPU sample of each pod and container, as upstream's does:
    ``/stats/summary``'s nano-cores after it are the rate since that pass."""
    clock = [NOW]
    runtime = ShapedRuntime()
    stats = shaped_provider(tmp_path, runtime, clock)
    await UsageReader(stats).summary()
    cpuacct = tmp_path / f"host/sys/fs/cgroup/cpuacct/kubepods/besteffort/pod{UID}/cpuacct.usage"
    cpuacct.write_text(str(7000 + 2 * 10**8) + "\n")
    clock[0] = runtime.clock = NOW + 2
    [web, *_] = (await stats.summary())["pods"]
    assert web["cpu"]["usageNanoCores"] == 10**8  # 0.2 s of CPU over 2 s
    assert web["containers"][0]["cpu"]["usageNanoCores"] == 10**9  # one core


async def test_the_typed_pass_gives_the_loop_back_between_pods(tmp_path: Path) -> None:
    stats = shaped_provider(tmp_path, ShapedRuntime())
    pacers: list[Pacer] = []

    def pacer() -> Pacer:
        pacers.append(Pacer(0.0))  # a slice used up at every pod
        return pacers[-1]

    stats.pacer = pacer
    summary = await UsageReader(stats).summary()
    assert len(summary.pods) == 4
    assert await stats.pods_usage(frozenset()) == ()
    assert [p.yields for p in pacers] == [5, 5]  # one per sandbox, the restarted one's too


async def test_the_pods_asked_for_have_the_figures_of_a_full_read(tmp_path: Path) -> None:
    stats = shaped_provider(tmp_path, ShapedRuntime())
    everything = await stats.usage()
    asked = await stats.pods_usage({UID, VOLUMES, "not-a-pod"})
    assert asked == tuple(p for p in everything.pods if p.uid in (UID, VOLUMES))
    assert await stats.pods_usage(frozenset()) == ()
    assert await stats.node_usage() == everything.node


@pytest.mark.parametrize(
    ("sandbox_stats", "web_memory"), [(False, True), (True, True), (True, False)]
)
async def test_a_pass_without_pods_leaves_the_summary_as_a_full_pass(
    tmp_path: Path, sandbox_stats: bool, web_memory: bool
) -> None:
    """The eviction pass that reads no pod's figures still samples their CPU as a full
    read does (the pod cgroup's too when the runtime's sandbox stats lack memory):
    ``/stats/summary`` after it (rates, volumes measured by the pass, all) is the same
    document."""
    documents = []
    for name, wanted in (("full", None), ("lean", frozenset[str]())):
        clock = [NOW]
        runtime = ShapedRuntime(sandbox_stats=sandbox_stats, web_memory=web_memory)
        (tmp_path / name).mkdir()
        stats = shaped_provider(tmp_path / name, runtime, clock)
        await stats.node_usage()
        await stats.pods_usage(wanted)
        cgroup = tmp_path / name / "host/sys/fs/cgroup/cpuacct/kubepods/besteffort"
        (cgroup / f"pod{UID}/cpuacct.usage").write_text(str(7000 + 2 * 10**8) + "\n")
        scratch = tmp_path / name / "pods" / VOLUMES / "volumes/kubernetes.io~empty-dir/scratch"
        (scratch / "more").write_bytes(b"v" * 5000)  # the summary shows the pass's measure
        clock[0] = runtime.clock = NOW + 2
        documents.append(await stats.summary())
    full, lean = documents
    assert lean == full
    [web, *_] = lean["pods"]
    if not sandbox_stats:
        assert web["cpu"]["usageNanoCores"] == 10**8  # 0.2 s of CPU over 2 s
    assert web["containers"][0]["cpu"]["usageNanoCores"] == 10**9  # one core
