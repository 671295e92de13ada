"""``container_memory_{cache,swap,mapped_file,failcnt,max_usage_bytes}`` and
``container_cpu_{user,system}_seconds_total`` in
/metrics/cadvisor, read from a container's memory cgroup (v1 and v2)."""

from __future__ import annotations

from pathlib import Path

from kubelet.server.cadvisor import cadvisor_metrics
from kubelet.server.cgroupfigures import cgroup_figures

from .test_psi import POD, v2_provider
from .test_stats import UID, ScriptedRuntime, provider

APP = (
    f'container="app",id="/kubepods/pod{UID}/app",image="",name="app",'
    'namespace="default",pod="web"'
)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


async def test_v1_memory_details_come_from_the_hierarchical_stat(tmp_path: Path) -> None:
    stats = provider(tmp_path, ScriptedRuntime())
    c1 = f"sys/fs/cgroup/memory/{POD}/c1"
    write(stats.host.root, {
        f"{c1}/memory.usage_in_bytes": "1\n",
        f"{c1}/memory.stat": "cache 1\nswap 2\nmapped_file 3\n"
                             "total_cache 4096\ntotal_swap 512\ntotal_mapped_file 1024\n",
        f"{c1}/memory.failcnt": "7\n",
        f"{c1}/memory.max_usage_in_bytes": "65536\n",
        f"sys/fs/cgroup/cpu,cpuacct/{POD}/c1/cpuacct.stat": "user 250\nsystem 75\n",
    })  # fmt: skip
    figures = await cgroup_figures(stats.runtime, stats.host)
    text = cadvisor_metrics(await stats.summary(), 2, 1, str(tmp_path), figures).decode()
    assert f"container_memory_cache{{{APP}}} 4096.0" in text
    assert f"container_memory_swap{{{APP}}} 512.0" in text
    assert f"container_memory_mapped_file{{{APP}}} 1024.0" in text
    assert f"container_memory_failcnt{{{APP}}} 7.0" in text
    assert f"container_memory_max_usage_bytes{{{APP}}} 65536.0" in text
    assert f"container_cpu_user_seconds_total{{{APP}}} 2.5" in text  # USER_HZ ticks
    assert f"container_cpu_system_seconds_total{{{APP}}} 0.75" in text
    assert "# HELP container_memory_cache Number of bytes of page cache memory." in text


async def test_v2_memory_details_and_no_failcnt_counter(tmp_path: Path) -> None:
    stats = v2_provider(tmp_path)
    c1 = f"sys/fs/cgroup/{POD}/c1"
    write(stats.host.root, {
        f"{c1}/memory.stat": "anon 10\nfile 8192\nfile_mapped 2048\n",
        f"{c1}/memory.swap.current": "256\n",
        f"{c1}/memory.peak": "131072\n",
        f"{c1}/cpu.stat": "usage_usec 5\nuser_usec 1500000\nsystem_usec 250000\n",
    })  # fmt: skip
    figures = await cgroup_figures(stats.runtime, stats.host)
    text = cadvisor_metrics(await stats.summary(), 2, 1, str(tmp_path), figures).decode()
    assert f"container_memory_cache{{{APP}}} 8192.0" in text
    assert f"container_memory_swap{{{APP}}} 256.0" in text
    assert f"container_memory_mapped_file{{{APP}}} 2048.0" in text
    assert f"container_memory_failcnt{{{APP}}} 0.0" in text  # v2 has none: 0, as cAdvisor
    assert f"container_memory_max_usage_bytes{{{APP}}} 131072.0" in text
    assert f"container_cpu_user_seconds_total{{{APP}}} 1.5" in text
    assert f"container_cpu_system_seconds_total{{{APP}}} 0.25" in text
