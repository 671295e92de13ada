"""cAdvisor's ``container_spec_*`` series in /metrics/cadvisor, from the limits written
in the node's, a pod's and a container's cgroups (v1 and v2), with cAdvisor's rules for
what is left out (no quota, memory not accounted) and what reads 0 (unlimited)."""

from __future__ import annotations

from pathlib import Path

from kubelet.server.cadvisor import cadvisor_metrics
from kubelet.stats import SummaryProvider
from kubelet.stats.cgroupfigures import cgroup_figures
from tests.unit.stats.test_stats import UID, ScriptedRuntime, provider
from tests.unit.stats.test_summary_psi import POD, v2_provider

from .test_cadvisor_memory import APP, write

POD_LABELS = f'container="",id="/kubepods/pod{UID}",image="",name="",namespace="default",pod="web"'
ROOT = 'container="",id="/",image="",name="",namespace="",pod=""'
UNLIMITED_V1 = "9223372036854771712\n"


async def _text(stats: SummaryProvider) -> str:
    figures = await cgroup_figures(stats.runtime, stats.host)
    summary = await stats.summary()
    return cadvisor_metrics(summary, 2, 1, "/", figures).decode()


async def test_v1_spec_of_a_limited_container_and_the_unlimited_root(tmp_path: Path) -> None:
    stats = provider(tmp_path, ScriptedRuntime())
    cpu, memory = "sys/fs/cgroup/cpu,cpuacct", "sys/fs/cgroup/memory"
    write(stats.host.root, {
        f"{cpu}/cpu.shares": "1024\n", f"{cpu}/cpu.cfs_period_us": "100000\n",
        f"{cpu}/cpu.cfs_quota_us": "-1\n",
        f"{memory}/memory.soft_limit_in_bytes": UNLIMITED_V1,
        f"{cpu}/{POD}/c1/cpu.shares": "256\n", f"{cpu}/{POD}/c1/cpu.cfs_period_us": "100000\n",
        f"{cpu}/{POD}/c1/cpu.cfs_quota_us": "50000\n",
        f"{memory}/{POD}/c1/memory.usage_in_bytes": "1\n",
        f"{memory}/{POD}/c1/memory.limit_in_bytes": "134217728\n",
        f"{memory}/{POD}/c1/memory.soft_limit_in_bytes": "67108864\n",
        f"{memory}/{POD}/c1/memory.memsw.limit_in_bytes": "268435456\n",
    })  # fmt: skip
    text = await _text(stats)
    assert f"container_spec_cpu_shares{{{APP}}} 256.0" in text
    assert f"container_spec_cpu_period{{{APP}}} 100000.0" in text
    assert f"container_spec_cpu_quota{{{APP}}} 50000.0" in text
    assert f"container_spec_memory_limit_bytes{{{APP}}} 1.34217728e+08" in text
    assert f"container_spec_memory_reservation_limit_bytes{{{APP}}} 6.7108864e+07" in text
    assert f"container_spec_memory_swap_limit_bytes{{{APP}}} 2.68435456e+08" in text
    # the root: shares and period, no quota line (-1), unlimited memory reads 0, and no
    # memsw file (swap accounting off) reads 0
    assert f"container_spec_cpu_shares{{{ROOT}}} 1024.0" in text
    assert f"container_spec_cpu_period{{{ROOT}}} 100000.0" in text
    assert f"container_spec_cpu_quota{{{ROOT}}}" not in text
    assert f"container_spec_memory_limit_bytes{{{ROOT}}} 0.0" in text
    assert f"container_spec_memory_reservation_limit_bytes{{{ROOT}}} 0.0" in text
    assert f"container_spec_memory_swap_limit_bytes{{{ROOT}}} 0.0" in text
    assert "# HELP container_spec_cpu_shares CPU share of the container." in text
    assert "# HELP container_spec_memory_limit_bytes Memory limit for the container." in text
    assert (
        "# HELP container_spec_memory_reservation_limit_bytes Memory reservation limit for "
        "the container." in text
    )
    swap_help = "Memory swap limit for the container."
    assert f"# HELP container_spec_memory_swap_limit_bytes {swap_help}" in text
    assert "# HELP container_spec_cpu_period CPU period of the container." in text
    assert "# HELP container_spec_cpu_quota CPU quota of the container." in text
    assert "# TYPE container_spec_cpu_shares gauge" in text


async def test_v2_spec_from_weight_max_and_min(tmp_path: Path) -> None:
    stats = v2_provider(tmp_path)
    base = "sys/fs/cgroup"
    write(stats.host.root, {
        f"{base}/{POD}/c1/cpu.weight": "10\n",  # the kubelet's 256 shares (250m)
        f"{base}/{POD}/c1/cpu.max": "20000 100000\n",
        f"{base}/{POD}/c1/memory.max": "134217728\n",
        f"{base}/{POD}/c1/memory.min": "0\n",
        f"{base}/{POD}/c1/memory.swap.max": "max\n",
        f"{base}/{POD}/cpu.weight": "1\n",
        f"{base}/{POD}/cpu.max": "max 100000\n",
        f"{base}/{POD}/memory.max": "max\n",
    })  # fmt: skip
    text = await _text(stats)
    # cAdvisor maps the weight back lossily: 2 + 9 × 262142 ÷ 9999 = 237, not 256
    assert f"container_spec_cpu_shares{{{APP}}} 237.0" in text
    assert f"container_spec_cpu_period{{{APP}}} 100000.0" in text
    assert f"container_spec_cpu_quota{{{APP}}} 20000.0" in text
    assert f"container_spec_memory_limit_bytes{{{APP}}} 1.34217728e+08" in text
    assert f"container_spec_memory_reservation_limit_bytes{{{APP}}} 0.0" in text
    assert f"container_spec_memory_swap_limit_bytes{{{APP}}} 0.0" in text  # max: unlimited
    # the pod cgroup of a BestEffort pod: weight 1 is 2 shares, "max" quota is no quota
    pod = POD_LABELS
    assert f"container_spec_cpu_shares{{{pod}}} 2.0" in text
    assert f"container_spec_cpu_quota{{{pod}}}" not in text
    assert f"container_spec_memory_limit_bytes{{{pod}}} 0.0" in text
    # the v2 root has no cpu.weight, cpu.max nor memory.max: CPU reads 0, no memory lines
    assert f"container_spec_cpu_shares{{{ROOT}}} 0.0" in text
    assert f"container_spec_cpu_period{{{ROOT}}} 0.0" in text
    assert f"container_spec_memory_limit_bytes{{{ROOT}}}" not in text
