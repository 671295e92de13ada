"""KubeletPSI: pressure in /stats/summary and /metrics/cadvisor, from cgroup v2 files."""

from __future__ import annotations

from pathlib import Path

from kubelet.server.cadvisor import cadvisor_metrics
from kubelet.stats import SummaryProvider
from kubelet.stats.cgroupfigures import cgroup_figures

from .test_stats import NOW, UID, ScriptedRuntime, provider

KUBELET = "system.slice/kubelet.service"
POD = f"kubepods/besteffort/pod{UID}"


def pressure(total: int) -> str:
    return (
        f"some avg10=1.25 avg60=0.50 avg300=0.10 total={total}\n"
        f"full avg10=0.00 avg60=0.00 avg300=0.00 total={total // 2}\n"
    )


def v2_files(root: Path) -> None:
    """A cgroup v2 node: every cgroup the summary reads has cpu, memory and io pressure;
    each resource's ``some`` total tells the cgroup (node 1e6 µs, pod 2e6, container 3e6,
    kubelet 4e6, kubepods 5e6) and the resource (+ 0 cpu, + 10 memory, + 20 io)."""
    files = {"sys/fs/cgroup/cgroup.controllers": "cpu io memory pids\n",
             "sys/fs/cgroup/memory.stat": "anon 100\nfile 50\n",
             "sys/fs/cgroup/cpu.stat": "usage_usec 9\n",
             "proc/self/cgroup": f"0::/{KUBELET}\n"}  # fmt: skip
    groups = {"": 1, POD: 2, f"{POD}/c1": 3, KUBELET: 4, "kubepods": 5}
    for cgroup, base in groups.items():
        for offset, resource in enumerate(("cpu", "memory", "io")):
            total = base * 1_000_000 + offset * 10
            if cgroup:
                files[f"sys/fs/cgroup/{cgroup}/{resource}.pressure"] = pressure(total)
                files[f"sys/fs/cgroup/{cgroup}/memory.current"] = "100\n"
                files[f"sys/fs/cgroup/{cgroup}/cpu.stat"] = "usage_usec 5\n"
            else:
                files[f"proc/pressure/{resource}"] = pressure(total)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def v2_provider(tmp_path: Path, psi: bool = True) -> SummaryProvider:
    base = provider(tmp_path, ScriptedRuntime())
    v2_files(base.host.root)
    return SummaryProvider(
        base.runtime, base.images, node_name="node1", root_dir=str(tmp_path),
        pod_logs_dir=base.pod_logs_dir, host=base.host, wall_clock=lambda: NOW, psi=psi,
    )  # fmt: skip


def some_totals(row: dict[str, object]) -> tuple[object, ...]:
    def total(obj: object) -> object:
        assert isinstance(obj, dict)
        return obj["psi"]["some"]["total"]

    return total(row["cpu"]), total(row["memory"]), total(row["io"])


async def test_summary_reports_node_pod_container_and_system_pressure(tmp_path: Path) -> None:
    stats = v2_provider(tmp_path)
    summary = await stats.summary()
    node = summary["node"]
    assert some_totals(node) == (1_000_000, 1_000_010, 1_000_020)
    assert node["cpu"]["psi"] == {
        "full": {"total": 500_000, "avg10": 0.0, "avg60": 0.0, "avg300": 0.0},
        "some": {"total": 1_000_000, "avg10": 1.25, "avg60": 0.5, "avg300": 0.1},
    }
    assert node["io"]["time"] and set(node["io"]) == {"time", "psi"}
    [pod] = summary["pods"]
    assert some_totals(pod) == (2_000_000, 2_000_010, 2_000_020)
    [container] = pod["containers"]
    assert some_totals(container) == (3_000_000, 3_000_010, 3_000_020)
    system = {c["name"]: c for c in node["systemContainers"]}
    assert some_totals(system["kubelet"]) == (4_000_000, 4_000_010, 4_000_020)
    assert some_totals(system["pods"]) == (5_000_000, 5_000_010, 5_000_020)
    only = await stats.summary(only_cpu_and_memory=True)
    assert "io" not in only["node"] and "psi" in only["node"]["cpu"]


async def test_gate_off_reports_no_pressure(tmp_path: Path) -> None:
    stats = v2_provider(tmp_path, psi=False)
    summary = await stats.summary()
    assert "psi" not in str(summary) and "'io'" not in str(summary)
    figures = await cgroup_figures(stats.runtime, stats.host, psi=False)
    text = cadvisor_metrics(summary, 2, 1, str(tmp_path), figures).decode()
    assert "container_pressure_" not in text  # not even the HELP lines


async def test_cgroup_v1_reports_no_pressure(tmp_path: Path) -> None:
    """Upstream takes PSI from cAdvisor, which reads it from cgroup v2 only."""
    stats = provider(tmp_path, ScriptedRuntime())
    (stats.host.root / "proc/pressure").mkdir(parents=True)
    (stats.host.root / "proc/pressure/cpu").write_text(pressure(7))
    summary = await stats.summary()
    assert "psi" not in str(summary) and "'io'" not in str(summary)
    figures = await cgroup_figures(stats.runtime, stats.host)
    assert "container_pressure_" not in cadvisor_metrics(summary, 2, 1, "/", figures).decode()


async def test_cadvisor_pressure_series_in_seconds(tmp_path: Path) -> None:
    stats = v2_provider(tmp_path)
    figures = await cgroup_figures(stats.runtime, stats.host)
    text = cadvisor_metrics(await stats.summary(), 2, 1, str(tmp_path), figures).decode()
    app = f'id="/kubepods/pod{UID}/app",image="",name="app",namespace="default",pod="web"'
    assert f'container_pressure_cpu_waiting_seconds_total{{container="app",{app}}} 3.0' in text
    assert f'container_pressure_cpu_stalled_seconds_total{{container="app",{app}}} 1.5' in text
    assert f'container_pressure_io_waiting_seconds_total{{container="app",{app}}} 3.00002' in text
    root = 'container="",id="/",image="",name="",namespace="",pod=""'
    assert f"container_pressure_memory_waiting_seconds_total{{{root}}} 1.00001" in text
    assert f"container_pressure_memory_stalled_seconds_total{{{root}}} 0.500005" in text
    assert (
        "# HELP container_pressure_io_stalled_seconds_total Total time duration no tasks in "
        "the container could make progress due to IO congestion." in text
    )
