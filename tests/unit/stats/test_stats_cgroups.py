"""The summary's node, ``pods`` and pod figures from cgroup v2 files (cAdvisor's
semantics), the pod cgroup found in either driver's spelling, v1 read as before."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from kubelet.cri import ImageClient, RuntimeClient
from kubelet.eviction.observations import observe_signals
from kubelet.eviction.thresholds import Signal
from kubelet.stats import Cgroups, HostStats, SummaryProvider, from_json

from .test_stats import NOW, UID, ScriptedImages, ScriptedRuntime, fixture_host

KIB = 1024
CG = "sys/fs/cgroup"
BURSTABLE_POD = f"kubepods/burstable/pod{UID}"
SYSTEMD_POD = (
    f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice"
)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def v2_host(root: Path, pod: str = BURSTABLE_POD, pods: str = "kubepods") -> HostStats:
    """A cgroup v2 machine: the unified hierarchy at sys/fs/cgroup, /proc figures that
    differ from the cgroup ones (so a fallback to /proc shows)."""
    write_tree(
        root,
        {
            "proc/stat": "cpu  100 0 50 1000 10 0 0 0 0 0\nbtime 1799990000\n",
            "proc/meminfo": (
                "MemTotal: 4000000 kB\nMemFree: 1000000 kB\nInactive(file): 500000 kB\n"
            ),
            f"{CG}/cgroup.controllers": "cpuset cpu io memory hugetlb pids\n",
            f"{CG}/cpu.stat": "usage_usec 9000000\nuser_usec 6000000\nsystem_usec 3000000\n",
            f"{CG}/memory.stat": (
                "anon 800000000\nfile 2200000000\ninactive_file 1000000000\n"
                "pgfault 123\npgmajfault 4\n"
            ),
            f"{CG}/{pods}/cpu.stat": "usage_usec 600\n",
            f"{CG}/{pods}/memory.current": "300000\n",
            f"{CG}/{pods}/memory.stat": "anon 200000\ninactive_file 100000\n",
            f"{CG}/{pods}/memory.max": "max\n",
            f"{CG}/{pod}/cpu.stat": "usage_usec 7\nuser_usec 5\n",
            f"{CG}/{pod}/memory.current": "2048\n",
            f"{CG}/{pod}/memory.stat": (
                "anon 1500\nfile 548\ninactive_file 48\npgfault 11\npgmajfault 2\n"
            ),
            f"{CG}/{pod}/memory.max": "4096\n",
            f"{CG}/{pod}/pids.current": "3\n",
        },
    )
    return HostStats(root)


def provider(tmp_path: Path, host: HostStats, sandbox_stats: bool = False) -> SummaryProvider:
    return SummaryProvider(
        cast(RuntimeClient, ScriptedRuntime(sandbox_stats=sandbox_stats)),
        cast(ImageClient, ScriptedImages(str(tmp_path))),
        node_name="node1",
        root_dir=str(tmp_path),
        pod_logs_dir=str(tmp_path / "logs"),
        host=host,
        wall_clock=lambda: NOW,
    )


async def test_v2_node_figures_come_from_the_root_cgroup(tmp_path: Path) -> None:
    summary = await provider(tmp_path, v2_host(tmp_path / "host")).summary()
    node = summary["node"]
    assert node["cpu"]["usageCoreNanoSeconds"] == 9_000_000 * 1000  # usage_usec in ns
    memory = node["memory"]
    # runc's root figures: usage = anon + file of the root memory.stat
    assert memory["usageBytes"] == 3_000_000_000
    assert memory["workingSetBytes"] == 3_000_000_000 - 1_000_000_000
    assert memory["availableBytes"] == 4_000_000 * KIB - 2_000_000_000
    assert memory["rssBytes"] == 800_000_000
    assert (memory["pageFaults"], memory["majorPageFaults"]) == (123, 4)
    [pods] = node["systemContainers"]
    assert pods["name"] == "pods"
    assert pods["cpu"]["usageCoreNanoSeconds"] == 600_000
    assert pods["memory"]["usageBytes"] == 300_000
    assert pods["memory"]["workingSetBytes"] == 200_000
    assert pods["memory"]["rssBytes"] == 200_000
    # eviction reads the same: memory.available and allocatableMemory.available
    signals = observe_signals(from_json(summary).node)
    assert signals[Signal.MEMORY_AVAILABLE].available == 4_000_000 * KIB - 2_000_000_000
    assert signals[Signal.ALLOCATABLE_MEMORY_AVAILABLE].available == 4_000_000 * KIB - 200_000


async def test_v2_pod_figures_come_from_the_pod_cgroup(tmp_path: Path) -> None:
    [pod] = (await provider(tmp_path, v2_host(tmp_path / "host")).summary())["pods"]
    assert pod["cpu"]["usageCoreNanoSeconds"] == 7000  # not the runtime's 40 of the container
    memory = pod["memory"]
    assert memory["usageBytes"] == 2048
    assert memory["workingSetBytes"] == 2000  # usage − inactive_file
    assert memory["availableBytes"] == 4096 - 2000  # the pod's memory.max
    assert memory["rssBytes"] == 1500  # anon
    assert (memory["pageFaults"], memory["majorPageFaults"]) == (11, 2)
    assert pod["process_stats"] == {"process_count": 3}


async def test_v2_systemd_spelled_cgroups_are_found(tmp_path: Path) -> None:
    host = v2_host(tmp_path / "host", pod=SYSTEMD_POD, pods="kubepods.slice")
    assert host.find_pod_cgroup(UID) == "/" + SYSTEMD_POD
    assert host.pods_cgroup() == "/kubepods.slice"
    summary = await provider(tmp_path, host).summary()
    assert summary["node"]["systemContainers"][0]["memory"]["workingSetBytes"] == 200_000
    [pod] = summary["pods"]
    assert pod["memory"]["workingSetBytes"] == 2000 and pod["cpu"]["usageCoreNanoSeconds"] == 7000


def test_v2_root_without_memory_stat_falls_back_to_meminfo(tmp_path: Path) -> None:
    host = v2_host(tmp_path)
    (tmp_path / CG / "memory.stat").unlink()
    memory = host.cgroup_memory("/")
    assert memory is not None
    assert (memory.usage, memory.working_set) == (3_000_000 * KIB, 2_500_000 * KIB)


@pytest.mark.parametrize("version", [1, 2])
def test_missing_pod_cgroup_and_bad_uid(tmp_path: Path, version: int) -> None:
    host = v2_host(tmp_path) if version == 2 else fixture_host(tmp_path)
    assert host.find_pod_cgroup("0b6c1f0e-0000-0000-0000-000000000000") is None
    assert host.find_pod_cgroup("has_underscore") is None
    assert host.cgroup_pids("/kubepods/nope") is None
    assert host.cgroup_memory("/kubepods/nope") is None
    assert host.cgroup_cpu("/kubepods/nope") is None


async def test_v1_figures_are_read_as_before(tmp_path: Path) -> None:
    """The hybrid v1 layout of this machine: per-controller trees, an empty v2 beside."""
    host = fixture_host(tmp_path / "host")
    (tmp_path / "host" / CG / "unified").mkdir()
    summary = await provider(tmp_path, host).summary(only_cpu_and_memory=True)
    node = summary["node"]
    assert node["cpu"]["usageCoreNanoSeconds"] == 5_000_000_000  # cpuacct.usage
    assert node["memory"]["workingSetBytes"] == 2_000_000_000  # total_inactive_file
    assert node["memory"]["rssBytes"] == 800_000_000  # total_rss
    assert node["systemContainers"][0]["memory"]["workingSetBytes"] == 200
    [pod] = summary["pods"]
    assert pod["cpu"]["usageCoreNanoSeconds"] == 7000
    assert pod["memory"]["workingSetBytes"] == 2000


def test_v1_local_memory_stat_keys_when_no_hierarchical_ones(tmp_path: Path) -> None:
    host = fixture_host(tmp_path)
    (tmp_path / CG / "memory/memory.stat").write_text(
        "inactive_file 1000000000\nrss 700000000\npgfault 9\npgmajfault 1\n"
    )
    memory = host.cgroup_memory("/")
    assert memory is not None
    assert (memory.working_set, memory.rss, memory.page_faults, memory.major_page_faults) == (
        2_000_000_000,
        700_000_000,
        9,
        1,
    )


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("root", [(), ("kubepods",), ("a-b", "kubepods")])
def test_the_pass_finder_finds_what_find_pod_cgroup_finds(
    tmp_path: Path, version: int, root: tuple[str, ...]
) -> None:
    """Pod cgroups in every QoS parent and both spellings, a pod in two places (the scan
    order decides), a file named like a pod, a missing pod and a UID no cgroup can have."""
    host = v2_host(tmp_path) if version == 2 else fixture_host(tmp_path)
    base = tmp_path / CG / ("" if version == 2 else "memory")
    uids = [f"0b6c1f0e-0000-0000-0000-00000000000{i}" for i in range(8)]
    finder = host.pod_cgroups(root)
    places = [name for uid in uids[:6] for name in _spellings(uid, root)]
    for i in range(6):
        (base / places[i * 6 + i].lstrip("/")).mkdir(parents=True)  # each in one place
    (base / places[5 * 6 + 1].lstrip("/")).mkdir(parents=True)  # the last one in two
    file = base / _spellings(uids[6], root)[0].lstrip("/")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("")  # not a cgroup
    for uid in [*uids, "has_underscore", "a/b", ""]:
        assert finder.find(uid) == host.find_pod_cgroup(uid, root), uid
    assert [finder.find(uid) for uid in uids[:6]] == [
        places[0], places[7], places[14], places[21], places[28], places[31]
    ]  # fmt: skip


def _spellings(uid: str, root: tuple[str, ...]) -> list[str]:
    """The six places of a pod cgroup in scan order: (cgroupfs, systemd) per QoS parent."""
    from kubelet.cgroups import POD_PREFIX, QosCgroups, to_cgroupfs, to_systemd

    return [
        spell((*parent, POD_PREFIX + uid))
        for parent in QosCgroups.under(root).roots()
        for spell in (to_cgroupfs, to_systemd)
    ]


def test_the_pass_finder_lists_each_parent_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = v2_host(tmp_path)
    listed: list[str] = []
    children = Cgroups.children

    def counting(self: Cgroups, cgroup: str) -> frozenset[str]:
        listed.append(cgroup)
        return children(self, cgroup)

    monkeypatch.setattr(Cgroups, "children", counting)
    finder = host.pod_cgroups()
    for i in range(50):
        assert finder.find(f"0b6c1f0e-0000-0000-0000-{i:012d}") is None
    assert finder.find(UID) == "/" + BURSTABLE_POD
    assert len(listed) == len(set(listed)) == 6
