"""The manager with the systemd driver, against a recording stand-in for systemd: each
slice's unit call comes before its files, with the properties libcontainer sets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.cgroups import CgroupError, CgroupManager, CgroupSettings
from kubelet.cgroups.layout import from_tree
from kubelet.cgroups.manager import ReservedCgroupError
from kubelet.cgroups.slices import Property
from kubelet.testing import TreeCgroupFs, v1_tree
from kubelet.testing.cgroupfs import FakeProcesses, add_process

from .test_manager import ACTIVE, BURSTABLE, CAPACITY, GUARANTEED, MI, inline

POD_SLICE = "kubepods-burstable-podb1.slice"


class Recorder:
    """What the manager asked of systemd; each call sees whether the slice's directory
    (in the ``memory`` hierarchy) existed at that moment."""

    def __init__(self, tree: Path, fail: str = "") -> None:
        self.tree = tree
        self.fail = fail
        self.calls: list[tuple[str, str, dict[str, Any], bool]] = []

    def _seen(self, unit: str) -> bool:
        return any(p.name == unit for p in (self.tree / "memory").rglob("*.slice"))

    def _record(self, call: str, unit: str, props: Sequence[Property]) -> None:
        values = {name: value for name, (_sig, value) in props}
        self.calls.append((call, unit, values, self._seen(unit)))
        if call == self.fail:
            raise CgroupError(f"{call} {unit}: org.freedesktop.DBus.Error.ServiceUnknown: gone")

    async def start_slice(self, unit: str, properties: Sequence[Property]) -> bool:
        self._record("start", unit, properties)
        return True

    async def set_properties(self, unit: str, properties: Sequence[Property]) -> None:
        self._record("set", unit, properties)

    async def stop_unit(self, unit: str) -> None:
        self._record("stop", unit, ())

    def of(self, call: str, unit: str) -> list[dict[str, Any]]:
        return [values for c, u, values, _ in self.calls if (c, u) == (call, unit)]


def manager(tmp_path: Path, recorder: Recorder, **settings: Any) -> CgroupManager:
    laid_out = (tmp_path / "cpuset").is_dir()
    fs = TreeCgroupFs(from_tree(tmp_path) if laid_out else v1_tree(tmp_path))
    return CgroupManager(
        fs,
        CgroupSettings(driver="systemd", **settings),
        slices=recorder,
        offload=inline,
        kill=FakeProcesses(tmp_path),
    )


async def test_start_makes_the_slices_before_their_files(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    recorder = Recorder(tmp_path)
    m = manager(tmp_path, recorder)
    await m.start(CAPACITY)
    started = [(u, seen) for c, u, _, seen in recorder.calls if c == "start"]
    assert started == [
        ("kubepods.slice", False),
        ("kubepods-burstable.slice", False),
        ("kubepods-besteffort.slice", False),
    ]
    (kubepods, *_) = recorder.of("start", "kubepods.slice")
    assert kubepods["Wants"] == ["-.slice"]
    assert kubepods["CPUShares"] == 2048 and kubepods["MemoryLimit"] == 4096 * MI
    assert recorder.of("start", "kubepods-besteffort.slice")[0]["CPUShares"] == 2
    # kubepods at allocatable: properties, then the files
    assert recorder.of("set", "kubepods.slice")[0]["TasksMax"] == 4194304
    assert (tmp_path / "cpu,cpuacct" / "kubepods.slice" / "cpu.shares").read_text() == "2048"
    assert (tmp_path / "hugetlb" / "kubepods.slice").is_dir()
    # a restart finds them: updated, not started again
    recorder.calls.clear()
    await manager(tmp_path, recorder).start(CAPACITY)
    assert [(c, u) for c, u, *_ in recorder.calls] == [
        ("set", "kubepods-besteffort.slice"),  # burstable: no value systemd holds
        ("set", "kubepods.slice"),
    ]


async def test_pod_slice_qos_update_and_removal(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    recorder = Recorder(tmp_path)
    m = manager(tmp_path, recorder, pod_pids_limit=50)
    await m.start(CAPACITY)
    recorder.calls.clear()
    assert await m.ensure_pod(BURSTABLE, "Burstable", ACTIVE) is True
    assert [(c, u) for c, u, *_ in recorder.calls] == [
        ("set", "kubepods-burstable.slice"),
        ("set", "kubepods-besteffort.slice"),
        ("start", POD_SLICE),
    ]
    assert recorder.of("set", "kubepods-burstable.slice")[0] == {"CPUShares": 256}
    props = recorder.of("start", POD_SLICE)[0]
    assert props["Wants"] == ["kubepods-burstable.slice"]
    assert props["CPUShares"] == 256 and props["TasksMax"] == 50
    path = "kubepods.slice/kubepods-burstable.slice/" + POD_SLICE
    assert (tmp_path / "pids" / path / "pids.max").read_text() == "50"
    assert m.pod_cgroup_parent(BURSTABLE, "Burstable") == "/" + path
    assert await m.ensure_pod(BURSTABLE, "Burstable", ACTIVE) is False  # exists: left alone
    assert await m.pod_cgroups() == {"b1": ("kubepods", "burstable", "podb1")}

    add_process(tmp_path / "memory" / path, 4242)
    recorder.calls.clear()
    await m.remove_pod(m.pod_cgroup(BURSTABLE, "Burstable"))
    assert [(c, u, seen) for c, u, _, seen in recorder.calls] == [("stop", POD_SLICE, True)]
    assert not list(tmp_path.glob(f"*/{path}"))
    assert m.kill.signals == [(4242, 9)]  # type: ignore[attr-defined]


async def test_guaranteed_quota(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    recorder = Recorder(tmp_path)
    m = manager(tmp_path, recorder)
    await m.start(CAPACITY)
    await m.ensure_pod(GUARANTEED, "Guaranteed", ACTIVE)
    props = recorder.of("start", "kubepods-podg1.slice")[0]
    assert props["CPUQuotaPerSecUSec"] == 500_000 and props["CPUQuotaPeriodUSec"] == 100_000
    assert props["MemoryLimit"] == 128 * MI


async def test_a_systemd_failure_is_the_callers_and_nothing_is_made(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    recorder = Recorder(tmp_path)
    m = manager(tmp_path, recorder)
    await m.start(CAPACITY)
    recorder.fail = "start"
    with pytest.raises(CgroupError, match="ServiceUnknown"):
        await m.ensure_pod(BURSTABLE, "Burstable", ACTIVE)
    assert not list(tmp_path.glob(f"*/kubepods.slice/kubepods-burstable.slice/{POD_SLICE}"))
    recorder.fail = ""
    assert await m.ensure_pod(BURSTABLE, "Burstable", ACTIVE) is True


async def test_reserved_slices_get_their_properties(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    recorder = Recorder(tmp_path)
    m = manager(
        tmp_path,
        recorder,
        enforce=frozenset({"pods", "system-reserved"}),
        system_reserved={"cpu": 1, "memory": 512 * MI},
        system_reserved_cgroup="/system.slice",
    )
    m.fs.create("/system.slice")
    events = await m.start(CAPACITY)
    assert recorder.of("set", "system.slice") == [{"MemoryLimit": 512 * MI, "CPUShares": 1024}]
    assert [e[1] for e in events] == ["NodeAllocatableEnforced", "NodeAllocatableEnforced"]
    again = manager(
        tmp_path / "again",
        recorder,
        enforce=frozenset({"system-reserved"}),
        system_reserved={"cpu": 1},
        system_reserved_cgroup="/system.slice",
    )
    again.fs.create("/system.slice")
    recorder.fail = "set"
    with pytest.raises(ReservedCgroupError, match="ServiceUnknown") as caught:
        await again.start(CAPACITY)
    assert caught.value.events[0][1] == "FailedNodeAllocatableEnforcement"
