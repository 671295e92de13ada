"""Swap at start-up: upstream's /proc/swaps check (failSwapOn) and the node's swap facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet.cgroups import NodeSwap
from kubelet.cgroups.swap import (
    SWAP_ON_REFUSED,
    check_swap,
    startup_swap,
    swap_capacity,
    swap_on,
    volumes_may_swap,
)
from kubelet.errors import ConfigError
from kubelet.testing import TreeCgroupFs, v1_tree
from kubelet.testing.cgroupfs import v2_tree
from kubelet.testing.fakeproc import SWAPS_HEADER, add_proc, fake_proc

ONE_DEVICE = SWAPS_HEADER + "/dev/dm-1                               partition\t16760828\t0\t-2\n"
GI = 1024**3


@pytest.mark.parametrize(
    ("text", "on"),
    [
        ("", False),
        (SWAPS_HEADER, False),
        ("\n" + SWAPS_HEADER + "\t\t\t\n", False),
        (ONE_DEVICE, True),
    ],
)
def test_swap_is_on_when_a_device_follows_the_header(text: str, on: bool) -> None:
    assert swap_on(text) is on


def test_fail_swap_on_refuses_only_with_swap_on() -> None:
    assert check_swap(ONE_DEVICE, True) == SWAP_ON_REFUSED
    assert check_swap(ONE_DEVICE, False) is None
    assert check_swap(SWAPS_HEADER, True) is None
    assert check_swap(None, True) is None  # no /proc/swaps: no swap, as upstream


def test_swap_capacity_sums_the_devices_in_bytes() -> None:
    two = ONE_DEVICE + "/swapfile file 1024 0 -3\n"
    assert swap_capacity(two) == (16760828 + 1024) * 1024
    assert swap_capacity(SWAPS_HEADER) == 0


def test_start_up_stops_with_swap_on(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", swaps=ONE_DEVICE)
    fs = TreeCgroupFs(v1_tree(tmp_path / "cg"))
    with pytest.raises(ConfigError, match="running with swap on is not supported") as caught:
        startup_swap(fs, proc, fail_swap_on=True, behavior="", memory_capacity=8 * GI)
    assert caught.value.problems[0].field == "failSwapOn"
    swap = startup_swap(fs, proc, fail_swap_on=False, behavior="", memory_capacity=8 * GI)
    assert swap == NodeSwap(
        on=True, controller=False, memory_capacity=8 * GI, swap_capacity=16760828 * 1024
    )


def test_limited_swap_is_refused_on_cgroup_v1(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    fs = TreeCgroupFs(v1_tree(tmp_path / "cg"))
    with pytest.raises(ConfigError, match="only supported with cgroupv2"):
        startup_swap(fs, proc, fail_swap_on=True, behavior="LimitedSwap", memory_capacity=GI)


def test_the_swap_controller_is_found_per_hierarchy(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", swaps=ONE_DEVICE)
    v1 = tmp_path / "v1"
    fs = TreeCgroupFs(v1_tree(v1))
    (v1 / "memory" / "memory.memsw.limit_in_bytes").write_text("9223372036854771712\n")
    assert startup_swap(fs, proc, fail_swap_on=False, behavior="", memory_capacity=GI).controller
    v2 = tmp_path / "v2"
    fs2 = TreeCgroupFs(v2_tree(v2))
    fs2.create("/kubelet.slice")
    add_proc(proc, 1, "0::/\n")
    (proc / "self").symlink_to("1")
    (proc / "1" / "cgroup").write_text("0::/kubelet.slice\n")
    found = startup_swap(fs2, proc, fail_swap_on=False, behavior="LimitedSwap", memory_capacity=GI)
    assert not found.controller
    (v2 / "kubelet.slice" / "memory.swap.max").write_text("max\n")
    found = startup_swap(fs2, proc, fail_swap_on=False, behavior="LimitedSwap", memory_capacity=GI)
    assert (found.controller, found.cgroup_v2, found.behavior) == (True, True, "LimitedSwap")


def test_memory_backed_volumes_may_swap_without_tmpfs_noswap() -> None:
    """Upstream's Node event when swap is on and tmpfs cannot refuse it."""
    on = NodeSwap(on=True)
    assert volumes_may_swap(on, noswap_supported=True) is None
    assert volumes_may_swap(NodeSwap(), noswap_supported=False) is None
    assert volumes_may_swap(on, noswap_supported=False) == (
        "Warning",
        "PossibleMemoryBackedVolumesOnDisk",
        "The tmpfs noswap option is not supported. Memory-backed volumes (e.g. secrets, "
        "emptyDirs, etc.) might be swapped to disk and should no longer be considered secure.",
    )
