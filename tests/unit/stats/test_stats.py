"""/stats/summary pieces: /proc and cgroup v1 readers on fixture files, the summary from a
scripted runtime (with and without ListPodSandboxStats), and the serving certificate."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
import trio
from cryptography import x509

from kubelet.cri import CriError, ImageClient, RuntimeClient, Unimplemented, api
from kubelet.goformat import rfc3339
from kubelet.server.cadvisor import cadvisor_metrics
from kubelet.server.servingcert import serving_cert
from kubelet.stats import HostStats, Pacer, SummaryProvider, UsageReader, from_json
from kubelet.stats.cgroupfigures import cgroup_figures
from kubelet.stats.host import FsSample
from kubelet.stats.provider import RateCache

UID = "0b6c1f0e-1111-2222-3333-444455556666"
NOW = 1_800_000_000.0


def fixture_host(root: Path) -> HostStats:
    pod = f"kubepods/besteffort/pod{UID}"
    files = {
        "proc/stat": "cpu  100 0 50 1000 10 0 0 0 0 0\nbtime 1799990000\n",
        "proc/meminfo": "MemTotal: 4000000 kB\nMemFree: 1000000 kB\nInactive(file): 500000 kB\n",
        "proc/self/net/dev": (
            "Inter-| Receive\n face |bytes packets\n"
            "    lo: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0\n"
            "  eth0: 1000 10 2 0 0 0 0 0 2000 20 3 0 0 0 0 0\n"
        ),
        "proc/net/route": "Iface\tDestination\tGateway\neth0\t00000000\t0100000A\n",
        "proc/sys/kernel/pid_max": "4194304\n",
        "proc/loadavg": "0.10 0.20 0.30 2/345 6789\n",
        "sys/fs/cgroup/cpuacct/cpuacct.usage": "5000000000\n",
        "sys/fs/cgroup/memory/memory.usage_in_bytes": "3000000000\n",
        "sys/fs/cgroup/memory/memory.stat": "total_inactive_file 1000000000\ntotal_rss 800000000\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "sys/fs/cgroup/memory/kubepods/memory.usage_in_bytes": "300\n",
        "sys/fs/cgroup/memory/kubepods/memory.stat": "total_inactive_file 100\n",
        f"sys/fs/cgroup/cpuacct/{pod}/cpuacct.usage": "7000\n",
        f"sys/fs/cgroup/memory/{pod}/memory.usage_in_bytes": "2048\n",
        f"sys/fs/cgroup/memory/{pod}/memory.stat": "total_inactive_file 48\n",
        f"sys/fs/cgroup/memory/{pod}/memory.limit_in_bytes": "4096\n",
        f"sys/fs/cgroup/pids/{pod}/pids.current": "3\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return HostStats(root)


def test_host_readers(tmp_path: Path) -> None:
    host = fixture_host(tmp_path)
    assert host.boot_time() == 1799990000
    assert host.memory_capacity() == 4_000_000 * 1024
    cpu = host.cgroup_cpu("/")
    assert cpu is not None and cpu.usage_ns == 5_000_000_000
    memory = host.cgroup_memory("/")
    assert memory is not None
    assert (memory.usage, memory.working_set, memory.rss, memory.limit) == (
        3_000_000_000,
        2_000_000_000,
        800_000_000,
        None,  # "unlimited"
    )
    assert [i.name for i in host.interfaces()] == ["eth0"]
    assert host.default_interface() == "eth0"
    assert (host.max_pid(), host.process_count()) == (4194304, 345)
    assert host.find_pod_cgroup(UID) == f"/kubepods/besteffort/pod{UID}"
    assert host.find_pod_cgroup("other") is None
    assert host.proc_cpu_ns() is not None
    empty = HostStats(tmp_path / "nothing")
    assert empty.cgroup_memory("/") is None and empty.boot_time() is None


def test_rate_cache() -> None:
    rates = RateCache()
    assert rates.rate("k", 1_000_000_000, 0) is None
    assert rates.rate("k", 3_000_000_000, 1_000_000_000) == 500_000_000  # half a core
    assert rates.rate("k", 2_000_000_000, 5) is None  # time went backwards: restart
    rates.keep([])
    assert rates.rate("k", 9_000_000_000, 9) is None


@attrs.define
class ScriptedRuntime:
    sandbox_stats: bool = True
    list_fails: bool = False
    """ListPodSandboxStats fails as containerd 1.6's does when one sandbox has no cgroup."""

    async def list_pod_sandbox(self, **_: Any) -> list[api.PodSandbox]:
        labels = {
            "io.kubernetes.pod.uid": UID,
            "io.kubernetes.pod.name": "web",
            "io.kubernetes.pod.namespace": "default",
        }
        return [
            api.PodSandbox(
                id="s1",
                metadata=api.PodSandboxMetadata(name="web", namespace="default", uid=UID),
                labels=labels,
                created_at=int(NOW * 1e9) - 10**10,
                state=api.SANDBOX_READY,
            )
        ]

    async def list_containers(self, **_: Any) -> list[api.Container]:
        return [
            api.Container(
                id="c1",
                pod_sandbox_id="s1",
                metadata=api.ContainerMetadata(name="app"),
                labels={"io.kubernetes.pod.uid": UID},
                created_at=int(NOW * 1e9) - 10**9,
                state=api.CONTAINER_RUNNING,
            )
        ]

    async def list_pod_sandbox_stats(self, **_: Any) -> list[api.PodSandboxStats]:
        if not self.sandbox_stats:
            raise Unimplemented("ListPodSandboxStats", "unknown method")
        if self.list_fails:
            raise CriError("ListPodSandboxStats", "cgroupPath is empty")
        return self._stats()

    async def pod_sandbox_stats(self, sandbox_id: str) -> api.PodSandboxStats:
        [stats] = self._stats()
        return stats

    def _stats(self) -> list[api.PodSandboxStats]:
        ts = int(NOW * 1e9)
        return [
            api.PodSandboxStats(
                attributes=api.PodSandboxAttributes(id="s1"),
                linux=api.LinuxPodSandboxStats(
                    cpu=api.CpuUsage(
                        timestamp=ts,
                        usage_core_nano_seconds=api.UInt64Value(value=42),
                        usage_nano_cores=api.UInt64Value(value=7),
                    ),
                    memory=api.MemoryUsage(
                        timestamp=ts, working_set_bytes=api.UInt64Value(value=1234)
                    ),
                    network=api.NetworkUsage(
                        timestamp=ts,
                        default_interface=api.NetworkInterfaceUsage(
                            name="eth0", rx_bytes=api.UInt64Value(value=5)
                        ),
                    ),
                ),
            )
        ]

    async def list_container_stats(self, **_: Any) -> list[api.ContainerStats]:
        ts = int(NOW * 1e9)
        return [
            api.ContainerStats(
                attributes=api.ContainerAttributes(id="c1"),
                cpu=api.CpuUsage(timestamp=ts, usage_core_nano_seconds=api.UInt64Value(value=40)),
                memory=api.MemoryUsage(
                    timestamp=ts,
                    working_set_bytes=api.UInt64Value(value=1000),
                    usage_bytes=api.UInt64Value(value=1100),
                ),
                writable_layer=api.FilesystemUsage(
                    timestamp=ts, used_bytes=api.UInt64Value(value=4096)
                ),
            )
        ]


@attrs.define
class ScriptedImages:
    mountpoint: str

    async def image_fs_info(self) -> api.ImageFsInfoResponse:
        usage = api.FilesystemUsage(
            fs_id=api.FilesystemIdentifier(mountpoint=self.mountpoint),
            used_bytes=api.UInt64Value(value=999),
        )
        return api.ImageFsInfoResponse(image_filesystems=[usage], container_filesystems=[usage])


def fixed_filesystem(path: str) -> FsSample:
    """Every filesystem alike, and unchanging: two passes compared figure by figure must
    not see the real disk move while something else on the machine writes."""
    return FsSample(capacity=10**12, available=6 * 10**11, used=4 * 10**11, inodes=10**8,
                    inodes_free=9 * 10**7)  # fmt: skip


def provider(
    tmp_path: Path, runtime: ScriptedRuntime, sandbox_stats: bool = True
) -> SummaryProvider:
    logs = tmp_path / "logs"
    (logs / f"default_web_{UID}" / "app").mkdir(parents=True)
    (logs / f"default_web_{UID}" / "app" / "0.log").write_text("x" * 10)
    return SummaryProvider(
        cast(RuntimeClient, runtime),
        cast(ImageClient, ScriptedImages(str(tmp_path))),
        node_name="node1",
        root_dir=str(tmp_path),
        pod_logs_dir=str(logs),
        host=HostStats(fixture_host(tmp_path / "host").root, statvfs=fixed_filesystem),
        wall_clock=lambda: NOW,
        sandbox_stats=sandbox_stats,
    )


async def test_summary_with_sandbox_stats(tmp_path: Path) -> None:
    summary = await provider(tmp_path, ScriptedRuntime()).summary()
    node = summary["node"]
    assert node["nodeName"] == "node1"
    assert node["startTime"] == rfc3339(1799990000)
    assert node["cpu"]["usageCoreNanoSeconds"] == 5_000_000_000
    assert node["memory"]["workingSetBytes"] == 2_000_000_000
    assert node["memory"]["availableBytes"] == 4_000_000 * 1024 - 2_000_000_000
    assert node["network"]["name"] == "eth0" and node["network"]["txBytes"] == 2000
    assert node["fs"]["capacityBytes"] > 0
    assert node["runtime"]["imageFs"]["usedBytes"] == 999
    assert node["rlimit"] == {"time": rfc3339(NOW), "maxpid": 4194304, "curproc": 345}
    assert node["systemContainers"][0]["name"] == "pods"
    [pod] = summary["pods"]
    assert pod["podRef"] == {"name": "web", "namespace": "default", "uid": UID}
    assert pod["cpu"]["usageNanoCores"] == 7 and pod["memory"]["workingSetBytes"] == 1234
    assert pod["network"]["rxBytes"] == 5
    [app] = pod["containers"]
    assert app["name"] == "app" and app["cpu"]["usageCoreNanoSeconds"] == 40
    assert "usageNanoCores" not in app["cpu"]  # one sample: no rate yet
    assert app["rootfs"]["usedBytes"] == 4096 and app["logs"]["usedBytes"] == 10
    assert pod["ephemeral-storage"]["usedBytes"] == 4106
    assert pod["process_stats"] == {"process_count": 3}


async def test_summary_without_sandbox_stats_uses_the_pod_cgroup(tmp_path: Path) -> None:
    runtime = ScriptedRuntime(sandbox_stats=False)
    stats = provider(tmp_path, runtime)
    [pod] = (await stats.summary(only_cpu_and_memory=True))["pods"]
    assert pod["cpu"]["usageCoreNanoSeconds"] == 7000
    assert pod["memory"]["workingSetBytes"] == 2000
    assert pod["memory"]["availableBytes"] == 4096 - 2000  # the pod's own limit
    assert "network" not in pod and "ephemeral-storage" not in pod
    assert set(pod["containers"][0]) == {"name", "startTime", "cpu", "memory"}


async def test_failing_sandbox_list_is_asked_one_by_one(tmp_path: Path) -> None:
    [pod] = (await provider(tmp_path, ScriptedRuntime(list_fails=True)).summary())["pods"]
    assert pod["cpu"]["usageNanoCores"] == 7  # from PodSandboxStats of that sandbox


async def test_self_signed_serving_cert(tmp_path: Path) -> None:
    cert = await serving_cert("", "", str(tmp_path / "pki"), "node1")
    assert cert.cert_file.endswith("kubelet.crt") and cert.key_file.endswith("kubelet.key")
    assert stat.S_IMODE(os.stat(cert.key_file).st_mode) == 0o600
    chain = x509.load_pem_x509_certificates(Path(cert.cert_file).read_bytes())
    serving, ca = chain
    assert serving.issuer == ca.subject
    cn = serving.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)[0].value
    assert str(cn).startswith("node1@")
    san = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["node1"]
    days = (serving.not_valid_after_utc - serving.not_valid_before_utc).days
    assert days == 365
    # a second start reuses the pair
    before = Path(cert.cert_file).read_bytes()
    assert await serving_cert("", "", str(tmp_path / "pki"), "node1") == cert
    assert Path(cert.cert_file).read_bytes() == before
    assert (await serving_cert("/a.crt", "/a.key", "/nowhere", "node1")).cert_file == "/a.crt"


async def test_a_serving_cert_that_cannot_be_written_stops_with_the_reason(
    tmp_path: Path,
) -> None:
    (tmp_path / "pki").write_text("a file where the directory should be")
    with pytest.raises(OSError, match="unable to create a self-signed serving certificate"):
        await serving_cert("", "", str(tmp_path / "pki"), "node1")


async def test_summary_reports_pod_volumes_and_counts_local_ones(tmp_path: Path) -> None:
    stats = provider(tmp_path, ScriptedRuntime())
    volumes = tmp_path / "pods" / UID / "volumes"
    cache = volumes / "kubernetes.io~empty-dir" / "cache"
    cache.mkdir(parents=True)
    (cache / "data").write_bytes(b"x" * 100_000)
    (volumes / "kubernetes.io~secret" / "token").mkdir(parents=True)
    [pod] = (await stats.summary())["pods"]
    rows = {v["name"]: v for v in pod["volume"]}
    assert set(rows) == {"cache", "token"}
    used = rows["cache"]["usedBytes"]
    assert used >= 100_000 and rows["cache"]["inodesUsed"] == 2
    assert rows["cache"]["capacityBytes"] > 0 and "availableBytes" in rows["cache"]
    # the emptyDir counts as local ephemeral storage, the secret does not
    assert pod["ephemeral-storage"]["usedBytes"] == 4106 + used
    # measured at most once a period: a new file shows only after it
    (cache / "more").write_bytes(b"y" * 100_000)
    [again] = (await stats.summary())["pods"]
    assert {v["name"]: v for v in again["volume"]}["cache"]["usedBytes"] == used


async def test_cadvisor_series_from_the_summary(tmp_path: Path) -> None:
    summary = await provider(tmp_path, ScriptedRuntime()).summary()
    text = cadvisor_metrics(summary, 2, 8 << 30, str(tmp_path)).decode()
    assert "machine_cpu_cores 2.0" in text
    assert "machine_memory_bytes 8.589934592e+09" in text
    assert "container_scrape_error 0.0" in text
    app = f'id="/kubepods/pod{UID}/app",image="",name="app",namespace="default",pod="web"'
    assert f'container_cpu_usage_seconds_total{{container="app",cpu="total",{app}}} 4e-08' in text
    app = f'container="app",{app}'
    assert f"container_memory_working_set_bytes{{{app}}} 1000.0" in text
    assert f"container_memory_usage_bytes{{{app}}} 1100.0" in text
    assert 'container_fs_usage_bytes{container="app",device="rootfs"' in text
    assert 'container_memory_working_set_bytes{container="",id="/",' in text  # the node
    assert "container_start_time_seconds{" in text
    assert 'container_network_receive_bytes_total{container=""' not in text  # no interfaces
    failed = cadvisor_metrics(None, 2, 1, "/").decode()
    assert "container_scrape_error 1.0" in failed


def test_pod_log_dirs_finds_what_the_glob_of_each_uid_finds(tmp_path: Path) -> None:
    """One listing of the pod logs directory stands in for a glob per container."""
    import glob

    from kubelet.stats.provider import pod_log_dirs

    names = [
        f"default_web_{UID}",
        f"other_web_{UID}",  # a second directory for one UID: both count
        f".hidden_{UID}",  # the glob's * skips hidden names
        "default_db_1234",
        "no-underscore",
    ]
    for name in names:
        (tmp_path / name).mkdir()
    found = pod_log_dirs(str(tmp_path))
    for uid in (UID, "1234", "missing"):
        assert sorted(found.get(uid, [])) == sorted(glob.glob(f"{tmp_path}/*_{uid}"))
    assert pod_log_dirs(str(tmp_path / "absent")) == {}


async def test_volume_stats_period_is_honoured_and_can_turn_measuring_off(
    tmp_path: Path, autojump_clock: Any
) -> None:
    base = provider(tmp_path, ScriptedRuntime())
    cache = tmp_path / "pods" / UID / "volumes" / "kubernetes.io~empty-dir" / "cache"
    cache.mkdir(parents=True)
    (cache / "data").write_bytes(b"x" * 100_000)

    def with_period(period: float) -> SummaryProvider:
        return SummaryProvider(
            base.runtime, base.images, node_name="node1", root_dir=str(tmp_path),
            pod_logs_dir=base.pod_logs_dir, host=base.host, wall_clock=lambda: NOW,
            volume_stats_period=period,
        )  # fmt: skip

    off = with_period(-1)
    [pod] = (await off.summary())["pods"]
    assert "volume" not in pod and pod["ephemeral-storage"]["usedBytes"] == 4106  # containers only
    stats = with_period(5)
    [pod] = (await stats.summary())["pods"]
    used = pod["volume"][0]["usedBytes"]
    (cache / "more").write_bytes(b"y" * 100_000)
    await trio.sleep(4)
    [pod] = (await stats.summary())["pods"]
    assert pod["volume"][0]["usedBytes"] == used  # within the period: the cached figure
    await trio.sleep(1)
    [pod] = (await stats.summary())["pods"]
    assert pod["volume"][0]["usedBytes"] >= used + 100_000  # measured again after 5 s


async def test_cadvisor_throttling_and_block_io_series(tmp_path: Path) -> None:
    stats = provider(tmp_path, ScriptedRuntime())
    pod = f"kubepods/besteffort/pod{UID}"
    files = {
        f"sys/fs/cgroup/memory/{pod}/c1/memory.usage_in_bytes": "1\n",  # the cgroup exists
        f"sys/fs/cgroup/cpu,cpuacct/{pod}/c1/cpu.stat":
            "nr_periods 10\nnr_throttled 4\nthrottled_time 2500000000\n",
        f"sys/fs/cgroup/cpu,cpuacct/{pod}/c1/cpu.cfs_quota_us": "50000\n",
        f"sys/fs/cgroup/cpu,cpuacct/{pod}/cpu.stat": "nr_periods 0\nnr_throttled 0\n",
        f"sys/fs/cgroup/cpu,cpuacct/{pod}/cpu.cfs_quota_us": "-1\n",
        f"sys/fs/cgroup/blkio/{pod}/c1/blkio.throttle.io_service_bytes_recursive":
            "8:0 Read 4096\n8:0 Write 8192\nTotal 12288\n",
        f"sys/fs/cgroup/blkio/{pod}/c1/blkio.throttle.io_serviced_recursive":
            "8:0 Read 1\n8:0 Write 2\nTotal 3\n",
        "sys/dev/block/8:0/uevent": "DEVNAME=sda\n",
    }  # fmt: skip
    for name, text in files.items():
        path = stats.host.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    figures = await cgroup_figures(stats.runtime, stats.host)
    text = cadvisor_metrics(await stats.summary(), 2, 1, str(tmp_path), figures).decode()
    app = f'id="/kubepods/pod{UID}/app",image="",name="app",namespace="default",pod="web"'
    assert f'container_cpu_cfs_periods_total{{container="app",{app}}} 10.0' in text
    assert f'container_cpu_cfs_throttled_periods_total{{container="app",{app}}} 4.0' in text
    assert f'container_cpu_cfs_throttled_seconds_total{{container="app",{app}}} 2.5' in text
    assert 'container_cpu_cfs_periods_total{container=""' not in text  # no quota: no series
    on_sda = f'container="app",device="/dev/sda",{app}'
    assert f"container_fs_reads_bytes_total{{{on_sda}}} 4096.0" in text
    assert f"container_fs_writes_bytes_total{{{on_sda}}} 8192.0" in text
    assert f"container_fs_reads_total{{{on_sda}}} 1.0" in text
    assert f"container_fs_writes_total{{{on_sda}}} 2.0" in text
    blkio = (
        f'container_blkio_device_usage_total{{container="app",device="/dev/sda",'
        f'id="/kubepods/pod{UID}/app",image="",major="8",minor="0",name="app",'
        f'namespace="default",operation="Write",pod="web"}} 8192.0'
    )
    assert blkio in text


async def test_pod_cgroups_are_found_under_a_configured_cgroup_root(tmp_path: Path) -> None:
    """``cgroupRoot: /custom``: pods live in /custom/kubepods/..., the summary looks there."""
    base = provider(tmp_path, ScriptedRuntime(sandbox_stats=False))
    pod = f"custom/kubepods/besteffort/pod{UID}"
    for name, text in {
        f"sys/fs/cgroup/memory/{pod}/memory.usage_in_bytes": "5000\n",
        f"sys/fs/cgroup/pids/{pod}/pids.current": "9\n",
        "sys/fs/cgroup/memory/custom/kubepods/memory.usage_in_bytes": "6000\n",
    }.items():
        (base.host.root / name).parent.mkdir(parents=True, exist_ok=True)
        (base.host.root / name).write_text(text)
    stats = SummaryProvider(
        base.runtime, base.images, node_name="node1", root_dir=str(tmp_path),
        pod_logs_dir=base.pod_logs_dir, host=base.host, wall_clock=lambda: NOW,
        pods_root=("custom", "kubepods"),
    )  # fmt: skip
    summary = await stats.summary()
    [pod_stats] = summary["pods"]
    assert pod_stats["memory"]["usageBytes"] == 5000
    assert pod_stats["process_stats"] == {"process_count": 9}
    [pods] = [c for c in summary["node"]["systemContainers"] if c["name"] == "pods"]
    assert pods["memory"]["usageBytes"] == 6000


async def test_container_logs_count_what_the_glob_of_its_directory_finds(
    tmp_path: Path,
) -> None:
    """Each file and directory of the container's log directory but hidden ones, in every
    log directory of its pod."""
    stats = provider(tmp_path, ScriptedRuntime())
    logs = tmp_path / "logs"
    (logs / f"default_web_{UID}" / "app" / "1.log.20260101-000000").write_text("y" * 5)
    (logs / f"default_web_{UID}" / "app" / ".0.log.tmp").write_text("z" * 1000)
    (logs / f"default_web_{UID}" / "other" / "0.log").parent.mkdir()
    (logs / f"default_web_{UID}" / "other" / "0.log").write_text("z" * 1000)
    (logs / f"old_web_{UID}" / "app").mkdir(parents=True)
    (logs / f"old_web_{UID}" / "app" / "0.log").write_text("w" * 7)
    [pod] = (await stats.summary())["pods"]
    [app] = pod["containers"]
    assert app["logs"]["usedBytes"] == 10 + 5 + 7 and app["logs"]["inodesUsed"] == 3


def test_rfc3339_keeps_whole_seconds_through_its_cache() -> None:
    assert rfc3339(NOW) == rfc3339(NOW + 0.999) == "2027-01-15T08:00:00Z"
    assert rfc3339(NOW + 1) == "2027-01-15T08:00:01Z"
    assert rfc3339(59.999) == "1970-01-01T00:00:59Z"
    assert rfc3339(-0.5) == rfc3339(0) == "1970-01-01T00:00:00Z"  # truncated, as before


async def test_the_pass_over_the_pods_gives_the_loop_back_between_pods(tmp_path: Path) -> None:
    stats = provider(tmp_path, ScriptedRuntime())
    pacers: list[Pacer] = []

    def pacer() -> Pacer:
        pacers.append(Pacer(0.0))  # a slice used up at every pod
        return pacers[-1]

    stats.pacer = pacer
    summary = await stats.summary()
    assert [p.yields for p in pacers] == [1]  # one pod: one yield before it
    [pod] = summary["pods"]
    assert pod["cpu"]["usageNanoCores"] == 7 and pod["containers"][0]["name"] == "app"


class CountingRuntime(ScriptedRuntime):
    def __init__(self) -> None:
        super().__init__()
        self.sandbox_stats_calls = 0

    async def list_pod_sandbox_stats(self, **kw: Any) -> list[api.PodSandboxStats]:
        self.sandbox_stats_calls += 1
        return await super().list_pod_sandbox_stats(**kw)


async def test_without_the_gate_pods_come_from_their_cgroup_and_network_namespace(
    tmp_path: Path,
) -> None:
    """PodAndContainerStatsFromCRI off (upstream's default): no ListPodSandboxStats (at
    500 pods containerd spends 12-18 s of CPU on it); the pod cgroup gives CPU and memory,
    /proc/<pid>/net/dev of the sandbox's first process the network, as cAdvisor reads it."""
    runtime = CountingRuntime()
    stats = provider(tmp_path, runtime, sandbox_stats=False)
    host = tmp_path / "host"
    sandbox = host / f"sys/fs/cgroup/memory/kubepods/besteffort/pod{UID}/s1"
    sandbox.mkdir(parents=True)
    (sandbox / "cgroup.procs").write_text("4242\n4243\n")
    (host / "proc/4242/net").mkdir(parents=True)
    (host / "proc/4242/net/dev").write_text(
        "Inter-| Receive\n face |bytes packets\n"
        "    lo: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0\n"
        "  eth0: 700 7 1 0 0 0 0 0 800 8 2 0 0 0 0 0\n"
        "  veth1: 9 9 9 0 0 0 0 0 9 9 9 0 0 0 0 0\n"
        "  net1: 30 3 0 0 0 0 0 0 40 4 0 0 0 0 0 0\n"
    )
    [pod] = (await stats.summary())["pods"]
    assert runtime.sandbox_stats_calls == 0
    assert pod["cpu"]["usageCoreNanoSeconds"] == 7000  # the pod cgroup's cpuacct.usage
    assert pod["memory"]["workingSetBytes"] == 2000
    eth0 = {"name": "eth0", "rxBytes": 700, "rxErrors": 1, "txBytes": 800, "txErrors": 2}
    net1 = {"name": "net1", "rxBytes": 30, "rxErrors": 0, "txBytes": 40, "txErrors": 0}
    assert pod["network"] == {"time": rfc3339(NOW), **eth0, "interfaces": [eth0, net1]}
    assert pod["containers"][0]["cpu"]["usageCoreNanoSeconds"] == 40  # ListContainerStats
    [lean] = (await stats.summary(lean=True))["pods"]  # the eviction manager's
    assert "network" not in lean and lean["memory"] == pod["memory"]
    (sandbox / "cgroup.procs").write_text("")  # the sandbox's process is gone
    [pod] = (await stats.summary())["pods"]
    assert "network" not in pod
    with_gate = provider(tmp_path / "gate", CountingRuntime(), sandbox_stats=True)
    [pod] = (await with_gate.summary())["pods"]
    assert pod["network"]["rxBytes"] == 5 and pod["cpu"]["usageNanoCores"] == 7


async def test_the_eviction_managers_lean_summary_keeps_every_figure_it_reads(
    tmp_path: Path,
) -> None:
    """``lean`` (UsageReader.summary) leaves out swap, pressure and network, read for each
    pod and container every 10 s; the typed figures are those of the full summary."""
    stats = provider(tmp_path, ScriptedRuntime(sandbox_stats=False), sandbox_stats=False)
    pod = tmp_path / f"host/sys/fs/cgroup/memory/kubepods/besteffort/pod{UID}"
    (pod / "memory.memsw.usage_in_bytes").write_text("3048\n")
    full = await stats.summary()
    lean = await stats.summary(lean=True)
    assert full["pods"][0]["swap"]["swapUsageBytes"] == 1000
    assert "swap" in full["pods"][0]["containers"][0]
    assert "swap" not in lean["pods"][0] and "swap" not in lean["pods"][0]["containers"][0]
    assert from_json(lean) == from_json(full)
    assert (await UsageReader(stats).summary()) == from_json(full)
