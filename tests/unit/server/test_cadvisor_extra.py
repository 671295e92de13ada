"""The rest of cAdvisor's per-cgroup series the kubelet's cAdvisor emits, from cgroup
files (v1 and v2): last seen, CFS bursts, the (always zero) load figures, kernel memory,
active/inactive file pages and page-fault counts."""

from __future__ import annotations

from pathlib import Path

from kubelet.server import SummaryProvider
from kubelet.server.cadvisor import cadvisor_metrics
from kubelet.server.cgroupfigures import cgroup_figures

from .test_cadvisor_memory import APP, write
from .test_psi import POD, v2_provider
from .test_stats import UID, ScriptedRuntime, provider

NOW = 1_800_000_123.75


async def _text(stats: SummaryProvider) -> str:
    figures = await cgroup_figures(stats.runtime, stats.host)
    return cadvisor_metrics(await stats.summary(), 2, 1, "/", figures, NOW).decode()


def failures(kind: str, scope: str) -> str:
    """The series with its labels in the exposition's (alphabetical) order."""
    head, rest = APP.split(",", 1)
    return (
        f'container_memory_failures_total{{{head},failure_type="{kind}",{rest},'
        f'scope="{scope}"}}'
    )


async def test_v1_extra_series(tmp_path: Path) -> None:
    stats = provider(tmp_path, ScriptedRuntime())
    c1_cpu, c1_memory = f"sys/fs/cgroup/cpu,cpuacct/{POD}/c1", f"sys/fs/cgroup/memory/{POD}/c1"
    write(stats.host.root, {
        f"{c1_memory}/memory.usage_in_bytes": "1\n",
        f"{c1_memory}/memory.stat": "pgfault 11\npgmajfault 2\ntotal_pgfault 99\n"
                                    "total_pgmajfault 9\ntotal_active_file 300\n"
                                    "total_inactive_file 400\n",
        f"{c1_memory}/memory.kmem.usage_in_bytes": "4096\n",
        f"{c1_cpu}/cpu.stat": "nr_periods 10\nnr_throttled 1\nthrottled_time 5\nnr_bursts 3\n"
                              "burst_time 2000000000\n",
        f"{c1_cpu}/cpu.cfs_quota_us": "50000\n",
    })  # fmt: skip
    text = await _text(stats)
    assert f"container_last_seen{{{APP}}} 1.800000123e+09" in text
    assert f"container_cpu_cfs_burst_periods_total{{{APP}}} 3.0" in text
    assert f"container_cpu_cfs_burst_seconds_total{{{APP}}} 2.0" in text
    assert f"container_cpu_load_average_10s{{{APP}}} 0.0" in text
    assert f"container_cpu_load_d_average_10s{{{APP}}} 0.0" in text
    for state in ("sleeping", "running", "stopped", "uninterruptible", "iowaiting"):
        assert f'container_tasks_state{{{APP},state="{state}"}} 0.0' in text
    assert f"container_memory_kernel_usage{{{APP}}} 4096.0" in text
    assert f"container_memory_total_active_file_bytes{{{APP}}} 300.0" in text
    assert f"container_memory_total_inactive_file_bytes{{{APP}}} 400.0" in text
    # cAdvisor reads the local pgfault keys for both scopes, not total_*
    assert f"{failures('pgfault', 'container')} 11.0" in text
    assert f"{failures('pgfault', 'hierarchy')} 11.0" in text
    assert f"{failures('pgmajfault', 'hierarchy')} 2.0" in text
    assert "# HELP container_memory_failures_total Cumulative count of memory allocation" in text
    assert "# HELP container_last_seen Last time a container was seen by the exporter" in text
    root = 'container="",id="/",image="",name="",namespace="",pod=""'
    assert f"container_cpu_cfs_burst_periods_total{{{root}}}" not in text  # no quota there


async def test_v2_extra_series(tmp_path: Path) -> None:
    stats = v2_provider(tmp_path)
    c1 = f"sys/fs/cgroup/{POD}/c1"
    write(stats.host.root, {
        f"{c1}/memory.stat": "anon 1\nfile 2\nactive_file 5\ninactive_file 6\npgfault 7\n"
                             "pgmajfault 1\n",
        f"{c1}/cpu.stat": "usage_usec 5\nnr_periods 4\nnr_bursts 2\nburst_usec 500000\n",
        f"{c1}/cpu.max": "20000 100000\n",
    })  # fmt: skip
    text = await _text(stats)
    assert f"container_cpu_cfs_burst_periods_total{{{APP}}} 2.0" in text
    assert f"container_cpu_cfs_burst_seconds_total{{{APP}}} 0.5" in text
    assert f"container_memory_kernel_usage{{{APP}}} 0.0" in text  # v2: none, as runc
    assert f"container_memory_total_active_file_bytes{{{APP}}} 5.0" in text
    assert f"container_memory_total_inactive_file_bytes{{{APP}}} 6.0" in text
    assert f"{failures('pgfault', 'container')} 7.0" in text
    assert f"{failures('pgmajfault', 'container')} 1.0" in text


def _process(root: Path, pid: int, links: tuple[str, ...]) -> None:
    fd = root / "proc" / str(pid) / "fd"
    fd.mkdir(parents=True)
    for number, target in enumerate(links):
        (fd / str(number)).symlink_to(target)


async def test_process_series_count_the_cgroups_own_processes(tmp_path: Path) -> None:
    stats = provider(tmp_path, ScriptedRuntime())
    root = stats.host.root
    write(root, {
        f"sys/fs/cgroup/memory/{POD}/c1/memory.usage_in_bytes": "1\n",
        f"sys/fs/cgroup/cpu,cpuacct/{POD}/c1/cgroup.procs": "100\n101\n102\n",
        f"sys/fs/cgroup/cpu,cpuacct/{POD}/cgroup.procs": "",  # all in the container's
        f"sys/fs/cgroup/pids/{POD}/c1/pids.current": "5\n",
        f"sys/fs/cgroup/pids/{POD}/c1/pids.max": "max\n",
    })  # fmt: skip
    _process(root, 100, ("/dev/null", "socket:[123]", "socket:[124]"))
    _process(root, 101, ("pipe:[5]",))  # 102 has gone meanwhile: skipped
    text = await _text(stats)
    assert f"container_processes{{{APP}}} 3.0" in text
    assert f"container_file_descriptors{{{APP}}} 4.0" in text
    assert f"container_sockets{{{APP}}} 2.0" in text
    assert f"container_threads{{{APP}}} 5.0" in text
    assert f"container_threads_max{{{APP}}} 0.0" in text  # max: no limit
    pod = f'container="",id="/kubepods/pod{UID}",image="",name="",namespace="default",pod="web"'
    assert f"container_processes{{{pod}}} 0.0" in text  # its processes are the container's


async def test_v2_process_series(tmp_path: Path) -> None:
    stats = v2_provider(tmp_path)
    c1 = f"sys/fs/cgroup/{POD}/c1"
    write(stats.host.root, {
        f"{c1}/cgroup.procs": "200\n", f"{c1}/pids.current": "1\n", f"{c1}/pids.max": "64\n",
    })  # fmt: skip
    _process(stats.host.root, 200, ("socket:[9]",))
    text = await _text(stats)
    assert f"container_processes{{{APP}}} 1.0" in text
    assert f"container_sockets{{{APP}}} 1.0" in text
    assert f"container_threads_max{{{APP}}} 64.0" in text
