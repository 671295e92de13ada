"""Usage readers: cgroup v1/v2 files under a fixture root, statvfs, the summary JSON."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubelet.eviction.observations import Observation, observe_signals
from kubelet.eviction.thresholds import Signal
from kubelet.stats import CgroupMemory, Cgroups, Layout, from_json
from kubelet.stats.cgroupfs import Rlimit, detect_layout
from kubelet.stats.fs import filesystem


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    cg = "sys/fs/cgroup"
    write(tmp_path, f"{cg}/memory/memory.usage_in_bytes", "1000000\n")
    write(
        tmp_path,
        f"{cg}/memory/memory.stat",
        "cache 10\ninactive_file 7\ntotal_inactive_file 300000\ntotal_rss 500000\n"
        "total_pgfault 42\ntotal_pgmajfault 3\n",
    )
    write(tmp_path, f"{cg}/memory/memory.limit_in_bytes", "9223372036854771712\n")
    write(tmp_path, f"{cg}/memory/kubepods/podabc/memory.usage_in_bytes", "400\n")
    write(tmp_path, f"{cg}/memory/kubepods/podabc/memory.stat", "total_inactive_file 500\n")
    write(tmp_path, f"{cg}/memory/kubepods/podabc/memory.limit_in_bytes", "1048576\n")
    write(tmp_path, f"{cg}/cpu,cpuacct/kubepods/cpuacct.usage", "123456789\n")
    write(tmp_path, f"{cg}/pids/kubepods/podabc/pids.current", "7\n")
    write(tmp_path, f"{cg}/unified/cgroup.procs", "")  # hybrid: an empty v2 beside v1
    write(tmp_path, "proc/sys/kernel/pid_max", "32768\n")
    write(tmp_path, "proc/sys/kernel/threads-max", "192730\n")
    write(tmp_path, "proc/loadavg", "0.73 0.97 1.11 5/116 1756\n")
    return tmp_path


@pytest.fixture
def v2(tmp_path: Path) -> Path:
    cg = "sys/fs/cgroup"
    write(tmp_path, f"{cg}/cgroup.controllers", "cpu memory pids\n")
    write(tmp_path, f"{cg}/cpu.stat", "usage_usec 5000\nuser_usec 3000\n")
    write(tmp_path, f"{cg}/kubepods/memory.current", "2000\n")
    write(tmp_path, f"{cg}/kubepods/memory.stat", "anon 900\ninactive_file 1500\npgfault 5\n")
    write(tmp_path, f"{cg}/kubepods/memory.max", "max\n")
    write(tmp_path, f"{cg}/kubepods/pids.current", "12\n")
    write(tmp_path, f"{cg}/kubepods/pod1/memory.current", "100\n")
    write(tmp_path, f"{cg}/kubepods/pod1/memory.stat", "inactive_file 250\n")
    write(tmp_path, f"{cg}/kubepods/pod1/memory.max", "4096\n")
    write(
        tmp_path,
        "proc/meminfo",
        "MemTotal:       1000 kB\nMemFree:         200 kB\nInactive(file):  100 kB\n",
    )
    return tmp_path


def test_layout_detection_v1_hybrid(v1: Path) -> None:
    assert detect_layout(v1) is Layout.V1


def test_layout_detection_v2(v2: Path) -> None:
    assert detect_layout(v2) is Layout.V2


def test_v1_memory_working_set_is_usage_minus_hierarchical_inactive_file(v1: Path) -> None:
    cg = Cgroups(v1)
    assert cg.memory("/") == CgroupMemory(
        usage=1000000,
        working_set=700000,
        inactive_file=300000,
        rss=500000,
        page_faults=42,
        major_page_faults=3,
        limit=None,
    )
    pod = cg.memory("/kubepods/podabc")
    assert pod is not None and pod.working_set == 0 and pod.limit == 1048576  # never negative
    assert cg.memory("/kubepods/missing") is None


def test_v1_cpu_pids_rlimit(v1: Path) -> None:
    cg = Cgroups(v1)
    assert cg.cpu_usage_ns("/kubepods") == 123456789
    assert cg.pids("/kubepods/podabc") == 7
    assert cg.rlimit() == Rlimit(max_pid=32768, num_processes=116)
    assert cg.exists("/kubepods/podabc") and not cg.exists("/nope")


def test_v2_memory_cpu_pids(v2: Path) -> None:
    cg = Cgroups(v2)
    kubepods = cg.memory("/kubepods")
    assert kubepods == CgroupMemory(
        usage=2000, working_set=500, inactive_file=1500, rss=900, page_faults=5, limit=None
    )
    pod = cg.memory("kubepods/pod1")
    assert pod is not None and pod.working_set == 0 and pod.limit == 4096
    assert cg.cpu_usage_ns("/") == 5_000_000
    assert cg.pids("/kubepods") == 12


def test_v2_root_memory_from_meminfo(v2: Path) -> None:
    root = Cgroups(v2).memory("/")
    assert root == CgroupMemory(usage=800 * 1024, working_set=700 * 1024, inactive_file=100 * 1024)


def test_missing_files_give_none(tmp_path: Path) -> None:
    cg = Cgroups(tmp_path)
    assert cg.memory("/") is None and cg.cpu_usage_ns("/") is None
    assert cg.rlimit() == Rlimit(None, None)


def test_unreadable_files_give_none(v1: Path) -> None:
    """A directory where a file should be, bytes that are not text, a long file."""
    cg = Cgroups(v1)
    pod = v1 / "sys/fs/cgroup/pids/kubepods/podabc"
    (pod / "pids.current").unlink()
    (pod / "pids.current").mkdir()
    assert cg.pids("/kubepods/podabc") is None
    write(v1, "sys/fs/cgroup/cpu,cpuacct/kubepods/cpuacct.usage", "")
    (v1 / "sys/fs/cgroup/cpu,cpuacct/kubepods/cpuacct.usage").write_bytes(b"\xff\xfe1\n")
    assert cg.cpu_usage_ns("/kubepods") is None
    long = "".join(f"key{i} {i}\n" for i in range(20_000)) + "total_inactive_file 600\n"
    write(v1, "sys/fs/cgroup/memory/kubepods/podabc/memory.stat", long)  # > one read
    memory = cg.memory("/kubepods/podabc/")
    assert memory is not None and memory.inactive_file == 600


def test_filesystem_statvfs(tmp_path: Path) -> None:
    fs = filesystem(tmp_path, now=5.0)
    st = os.statvfs(tmp_path)
    assert fs is not None and fs.time == 5.0
    assert fs.capacity == st.f_blocks * st.f_frsize
    assert fs.inodes == st.f_files
    assert filesystem(tmp_path / "missing") is None


SUMMARY = {
    "node": {
        "nodeName": "n",
        "memory": {
            "time": "2025-01-01T00:00:10Z",
            "availableBytes": 500,
            "usageBytes": 900,
            "workingSetBytes": 700,
        },
        "systemContainers": [
            {"name": "kubelet"},
            {"name": "pods", "memory": {"availableBytes": 100, "workingSetBytes": 300}},
        ],
        "fs": {"availableBytes": 10, "capacityBytes": 100, "inodesFree": 5, "inodes": 50},
        "runtime": {"imageFs": {"availableBytes": 20, "capacityBytes": 200, "usedBytes": 1}},
        "rlimit": {"time": "2025-01-01T00:00:10Z", "maxpid": 1000, "curproc": 900},
    },
    "pods": [
        {
            "podRef": {"name": "web", "namespace": "default", "uid": "u1"},
            "memory": {"workingSetBytes": 64},
            "containers": [{"name": "app", "rootfs": {"usedBytes": 3}, "logs": {"usedBytes": 4}}],
            "volume": [{"name": "cache", "usedBytes": 9, "inodesUsed": 2}],
            "ephemeral-storage": {"usedBytes": 16},
            "process_stats": {"process_count": 3},
        }
    ],
}


def test_summary_json_to_signals() -> None:
    summary = from_json(SUMMARY)
    obs = observe_signals(summary.node)
    t = 1735689610.0
    assert obs == {
        Signal.MEMORY_AVAILABLE: Observation(500, 1200, t),
        Signal.ALLOCATABLE_MEMORY_AVAILABLE: Observation(100, 400, None),
        Signal.NODEFS_AVAILABLE: Observation(10, 100),
        Signal.NODEFS_INODES_FREE: Observation(5, 50),
        Signal.IMAGEFS_AVAILABLE: Observation(20, 200),
        Signal.PID_AVAILABLE: Observation(100, 1000, t),
    }
    (pod,) = summary.pods
    assert pod.uid == "u1" and pod.memory is not None and pod.memory.working_set == 64
    assert pod.volumes[0].fs.used == 9 and pod.process_count == 3
    assert pod.ephemeral_storage is not None and pod.ephemeral_storage.used == 16
    assert pod.containers[0].logs is not None and pod.containers[0].logs.used == 4


def test_summary_json_tolerates_junk() -> None:
    summary = from_json({"node": {"memory": {"availableBytes": "many"}}, "pods": [None, {}]})
    assert observe_signals(summary.node) == {}
    assert [p.uid for p in summary.pods] == [""]


def test_v2_root_memory_from_the_root_memory_stat_as_runc(v2: Path) -> None:
    write(
        v2,
        "sys/fs/cgroup/memory.stat",
        "anon 300\nfile 700\ninactive_file 400\npgfault 8\npgmajfault 1\n",
    )
    assert Cgroups(v2).memory("/") == CgroupMemory(
        usage=1000,
        working_set=600,
        inactive_file=400,
        rss=300,
        page_faults=8,
        major_page_faults=1,
        limit=None,
    )


def test_v1_memory_takes_memory_stats_total_figures_else_the_cgroups_own(tmp_path: Path) -> None:
    """memory.stat is read for the few keys it needs (not parsed whole): ``total_*`` of a
    hierarchy first, the cgroup's own line otherwise, a key only at a line's start."""
    base = tmp_path / "sys/fs/cgroup/memory/kubepods/pod1"
    base.mkdir(parents=True)
    (base / "memory.usage_in_bytes").write_text("1000\n")
    (base / "memory.limit_in_bytes").write_text("4096\n")
    (base / "memory.stat").write_text(
        "inactive_file 999\nrss 7\npgfault 3\ntotal_inactive_file 100\ntotal_rss 70\n"
        "total_pgmajfault 2"  # no newline at the end
    )
    memory = Cgroups(tmp_path, Layout.V1).memory("/kubepods/pod1")
    assert memory is not None
    assert (memory.working_set, memory.rss, memory.page_faults, memory.major_page_faults) == (
        900,
        70,
        3,
        2,
    )
    assert memory.limit == 4096
    assert Cgroups(tmp_path, Layout.V1).memory("/kubepods/absent") is None
    assert Cgroups(tmp_path, Layout.V1).pids("/kubepods/absent") is None


def test_one_value_files_are_read_whole(v1: Path) -> None:
    """A one-value file is read in one go of 64 bytes; a longer one (padding, a huge
    figure) is still read to its end, and whitespace around the figure is allowed."""
    cg = Cgroups(v1)
    pids = "sys/fs/cgroup/pids/kubepods/podabc/pids.current"
    write(v1, pids, " " * 100 + "12\n")
    assert cg.pids("/kubepods/podabc") == 12
    write(v1, pids, "1" * 64 + "2" * 64 + "\n")
    assert cg.pids("/kubepods/podabc") == int("1" * 64 + "2" * 64)
    write(v1, pids, "9" * 63 + "x")
    assert cg.pids("/kubepods/podabc") is None
