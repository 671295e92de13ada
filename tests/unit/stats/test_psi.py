"""PSI: the pressure-file parser, and the reader on v2 and v1 fixture trees."""

from __future__ import annotations

from pathlib import Path

from kubelet.stats import Cgroups, Pressure
from kubelet.stats.psi import PsiData, parse_pressure, psi_json

from .test_cgroupfs_swap import write

CPU = (
    "some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\n"
    "full avg10=0.10 avg60=0.00 avg300=0.00 total=789\n"
)


def test_parse_some_and_full() -> None:
    assert parse_pressure(CPU) == Pressure(
        some=PsiData(total=123456, avg10=1.5, avg60=0.25, avg300=0.0),
        full=PsiData(total=789, avg10=0.1),
    )


def test_parse_without_full_line_reads_zeros() -> None:
    """CPU pressure before kernel 5.13 has only a ``some`` line."""
    got = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n")
    assert got == Pressure(some=PsiData(total=42), full=PsiData())


def test_parse_rejects_missing_or_garbled() -> None:
    assert parse_pressure(None) is None
    assert parse_pressure("") is None
    assert parse_pressure("some avg10=x avg60=0 avg300=0 total=1\n") is None
    assert parse_pressure("full avg10=0 avg60=0 avg300=0 total=1\n") is None
    assert parse_pressure("some avg10=0 avg60=0 total=1\n") is None


def test_json_shape() -> None:
    pressure = parse_pressure(CPU)
    assert pressure is not None
    assert psi_json(pressure) == {
        "full": {"total": 789, "avg10": 0.1, "avg60": 0.0, "avg300": 0.0},
        "some": {"total": 123456, "avg10": 1.5, "avg60": 0.25, "avg300": 0.0},
    }


def test_v2_reads_cgroup_files_and_proc_pressure_for_the_node(tmp_path: Path) -> None:
    write(tmp_path, {
        "sys/fs/cgroup/cgroup.controllers": "cpu memory io\n",
        "sys/fs/cgroup/kubepods/podx/cpu.pressure": CPU,
        "sys/fs/cgroup/kubepods/podx/memory.pressure": CPU.replace("123456", "5"),
        "proc/pressure/cpu": CPU,
        "proc/pressure/memory": CPU,
        "proc/pressure/io": CPU,
    })  # fmt: skip
    cgroups = Cgroups(tmp_path)
    pod = cgroups.pressure("/kubepods/podx")
    assert sorted(pod) == ["cpu", "memory"]  # no io.pressure: no io figure
    assert pod["memory"].some.total == 5
    assert sorted(cgroups.pressure("/")) == ["cpu", "io", "memory"]
    assert cgroups.pressure("/nowhere") == {}


def test_v1_reports_no_pressure(tmp_path: Path) -> None:
    """Upstream reads PSI only from cgroup v2: a v1 node has none, even with /proc/pressure."""
    write(tmp_path, {
        "sys/fs/cgroup/memory/kubepods/memory.usage_in_bytes": "1\n",
        "sys/fs/cgroup/memory/kubepods/cpu.pressure": CPU,
        "proc/pressure/cpu": CPU,
    })  # fmt: skip
    cgroups = Cgroups(tmp_path)
    assert cgroups.pressure("/") == {}
    assert cgroups.pressure("/kubepods") == {}
