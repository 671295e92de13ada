"""Telling cgroup v1, hybrid and v2 hosts apart, from mountinfo or from a tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet.cgroups.layout import from_mountinfo, from_tree
from kubelet.testing import v1_tree
from kubelet.testing.cgroupfs import v2_tree

# This CI machine: one hierarchy per controller (cpu and cpuacct apart), no hugetlb,
# a named systemd hierarchy, and cgroup2 at unified/.
THIS_HOST = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""

# A systemd host in hybrid mode, with co-mounted cpu,cpuacct and one optional field.
DEBIAN_HYBRID = """\
25 18 0:22 / /sys/fs/cgroup ro,nosuid,nodev shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,xattr,name=systemd
30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:13 - cgroup cgroup rw,cpu,cpuacct
31 25 0:28 / /sys/fs/cgroup/hugetlb rw,nosuid shared:14 - cgroup cgroup rw,hugetlb
32 25 0:29 / /sys/fs/cgroup/memory rw,nosuid shared:15 - cgroup cgroup rw,memory
"""

V2_HOST = """\
24 18 0:21 / /sys/fs/cgroup rw,nosuid,nodev shared:4 - cgroup2 cgroup2 rw,nsdelegate
"""


def test_this_host_is_v1_hybrid() -> None:
    layout = from_mountinfo(THIS_HOST)
    assert layout.version == 1 and layout.hybrid
    assert layout.mounts["cpu"] == Path("/sys/fs/cgroup/cpu")
    assert layout.mounts["cpuacct"] == Path("/sys/fs/cgroup/cpuacct")
    assert layout.mounts["systemd"] == Path("/sys/fs/cgroup/systemd")
    assert layout.unified == Path("/sys/fs/cgroup/unified")
    assert not layout.has("hugetlb")


def test_comounted_controllers_share_a_tree() -> None:
    layout = from_mountinfo(DEBIAN_HYBRID)
    assert layout.mounts["cpu"] == layout.mounts["cpuacct"] == Path("/sys/fs/cgroup/cpu,cpuacct")
    assert layout.has("hugetlb")
    assert layout.hierarchies()[Path("/sys/fs/cgroup/cpu,cpuacct")] == ("cpu", "cpuacct")


def test_v2_host() -> None:
    layout = from_mountinfo(V2_HOST, ["cpu", "memory", "pids"])
    assert layout.version == 2 and not layout.hybrid
    assert layout.unified == Path("/sys/fs/cgroup")
    assert layout.has("memory") and not layout.has("hugetlb")


def test_shortest_mount_point_wins() -> None:
    twice = THIS_HOST + "50 31 0:32 / /sys/fs/cgroup/x/memory rw - cgroup cgroup rw,memory\n"
    assert from_mountinfo(twice).mounts["memory"] == Path("/sys/fs/cgroup/memory")


def test_no_cgroup_mounts() -> None:
    with pytest.raises(ValueError, match="failed to find cgroup mounts"):
        from_mountinfo("22 1 0:20 / /proc rw - proc proc rw\n")


def test_trees(tmp_path: Path) -> None:
    v1 = v1_tree(tmp_path / "v1")
    assert v1.version == 1 and v1.hybrid and v1.has("hugetlb")
    assert v1.mounts["cpu"] == tmp_path / "v1" / "cpu,cpuacct"  # the symlink is skipped
    v2 = v2_tree(tmp_path / "v2", ["cpu", "memory"])
    assert v2.version == 2 and v2.controllers == {"cpu", "memory"}
    assert from_tree(tmp_path / "v2") == v2
