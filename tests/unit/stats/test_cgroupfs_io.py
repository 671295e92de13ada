"""CPU throttling and block I/O from cgroup files, v1 and v2, on fixture trees."""

from __future__ import annotations

from pathlib import Path

from kubelet.stats import CfsStats, Cgroups, DeviceIo

from .test_cgroupfs_swap import write

V1_BYTES = (
    "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 0\n8:0 Async 12288\n8:0 Total 12288\nTotal 12288\n"
)


def test_v1_cfs_and_block_io(tmp_path: Path) -> None:
    write(tmp_path, {
        "sys/fs/cgroup/cpu,cpuacct/pod/c/cpu.stat":
            "nr_periods 10\nnr_throttled 4\nthrottled_time 2500000000\n",
        "sys/fs/cgroup/cpu,cpuacct/pod/c/cpu.cfs_quota_us": "50000\n",
        "sys/fs/cgroup/cpu,cpuacct/pod/cpu.stat": "nr_periods 0\nnr_throttled 0\n",
        "sys/fs/cgroup/cpu,cpuacct/pod/cpu.cfs_quota_us": "-1\n",
        # no CFQ or BFQ figures (a modern kernel): runc's fallback is the throttle files
        "sys/fs/cgroup/blkio/pod/c/blkio.bfq.io_service_bytes_recursive": "Total 0\n",
        "sys/fs/cgroup/blkio/pod/c/blkio.throttle.io_service_bytes_recursive": V1_BYTES,
        "sys/fs/cgroup/blkio/pod/c/blkio.throttle.io_serviced_recursive":
            "8:0 Read 1\n8:0 Write 2\nTotal 3\n",
        "sys/fs/cgroup/blkio/pod/blkio.throttle.io_service_bytes_recursive": "Total 0\n",
        "sys/dev/block/8:0/uevent": "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n",
    })  # fmt: skip
    cgroups = Cgroups(tmp_path)
    assert cgroups.cfs("/pod/c") == CfsStats(10, 4, 2_500_000_000, quota=True)
    assert cgroups.cfs("/pod") == CfsStats(0, 0, 0, quota=False)
    assert cgroups.cfs("/nowhere") is None
    [io] = cgroups.block_io("/pod/c") or ()
    assert (io.major, io.minor) == (8, 0)
    assert dict(io.bytes) == {"Read": 4096, "Write": 8192, "Sync": 0, "Async": 12288,
                              "Total": 12288}  # fmt: skip
    assert dict(io.ios) == {"Read": 1, "Write": 2}
    assert cgroups.block_io("/pod") == ()
    assert cgroups.device_name(8, 0) == "/dev/sda" and cgroups.device_name(9, 9) == ""


def test_v2_cfs_and_io_stat(tmp_path: Path) -> None:
    write(tmp_path, {
        "sys/fs/cgroup/cgroup.controllers": "cpu io memory\n",
        "sys/fs/cgroup/pod/c/cpu.stat":
            "usage_usec 100\nnr_periods 7\nnr_throttled 3\nthrottled_usec 1500\n",
        "sys/fs/cgroup/pod/c/cpu.max": "50000 100000\n",
        "sys/fs/cgroup/pod/cpu.stat": "usage_usec 100\nnr_periods 0\nnr_throttled 0\n",
        "sys/fs/cgroup/pod/cpu.max": "max 100000\n",
        "sys/fs/cgroup/pod/c/io.stat":
            "259:0 rbytes=100 wbytes=200 rios=1 wios=2 dbytes=0 dios=0\n",
    })  # fmt: skip
    cgroups = Cgroups(tmp_path)
    assert cgroups.cfs("/pod/c") == CfsStats(7, 3, 1_500_000, quota=True)
    assert cgroups.cfs("/pod") == CfsStats(0, 0, 0, quota=False)
    assert cgroups.block_io("/pod/c") == (
        DeviceIo(259, 0, (("Read", 100), ("Write", 200), ("Discard", 0)),
                 (("Read", 1), ("Write", 2), ("Discard", 0))),
    )  # fmt: skip
    assert cgroups.block_io("/pod") is None  # no io.stat: no figures
