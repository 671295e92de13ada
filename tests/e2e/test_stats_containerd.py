"""The summary's new figures and /metrics/cadvisor's cgroup series, from a ``kubelet``
process and a real container on containerd: a CPU-limited container that reads and
writes with direct I/O and then spins, so it is throttled (its blkio cgroup counts what
this host accounts)."""

from __future__ import annotations

import signal
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from kubelet.cri import ImageClient, RuntimeClient
from kubelet.cri.__main__ import cleanup

from .cluster import CONFIG_HEADER
from .test_kubelet_containerd import KubeletProcess, manifest
from .test_node_pressure_containerd import own_cgroup_root

pytestmark = pytest.mark.containerd

SCRIPT = (
    "dd if=/bin/busybox of=/dev/null bs=4k iflag=direct 2>/dev/null; "
    "dd if=/dev/zero of=/tmp/w bs=4k count=64 oflag=direct 2>/dev/null; "
    "trap 'exit 0' TERM; while true; do :; done"
)
LIMITS = "    resources:\n      limits: {cpu: 100m, memory: 64Mi}\n"


def _device(major_minor: str) -> str:
    uevent = Path(f"/sys/dev/block/{major_minor}/uevent")
    for line in uevent.read_text().splitlines() if uevent.exists() else ():
        if line.startswith("DEVNAME="):
            return "/dev/" + line.removeprefix("DEVNAME=")
    return ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spec_series_match_the_cgroup(mine: list[str], container_id: str) -> None:
    """cAdvisor's container_spec_* series: what containerd wrote for 100m / 64Mi (shares
    102, quota 10000 of 100000, limit 64Mi), as the container's own cgroup files say."""
    [cpu] = Path("/sys/fs/cgroup/cpu").glob(f"e2e-*/kubepods/**/{container_id}")
    [memory] = Path("/sys/fs/cgroup/memory").glob(f"e2e-*/kubepods/**/{container_id}")

    def read(path: Path) -> float:
        value = int(path.read_text()) if path.exists() else 0
        return 0.0 if value > 1 << 62 else float(value)  # unlimited reads 0, as cAdvisor

    expected = {
        "container_spec_cpu_shares": read(cpu / "cpu.shares"),
        "container_spec_cpu_quota": read(cpu / "cpu.cfs_quota_us"),
        "container_spec_cpu_period": read(cpu / "cpu.cfs_period_us"),
        "container_spec_memory_limit_bytes": read(memory / "memory.limit_in_bytes"),
        "container_spec_memory_reservation_limit_bytes": read(
            memory / "memory.soft_limit_in_bytes"
        ),
        "container_spec_memory_swap_limit_bytes": read(memory / "memory.memsw.limit_in_bytes"),
    }
    assert expected["container_spec_cpu_shares"] == 102
    assert expected["container_spec_cpu_quota"] == 10000
    assert expected["container_spec_memory_limit_bytes"] == 64 << 20
    emitted = {
        line.split("{", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in mine if line.startswith("container_spec_")
    }  # fmt: skip
    assert emitted == expected, (emitted, expected)


@pytest.fixture
async def kubelet(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> AsyncIterator[KubeletProcess]:
    runtime, _ = cri
    process = KubeletProcess(runtime, short_tmp, f"e2e-{uuid.uuid4().hex[:6]}")
    process.manifests.mkdir()
    with own_cgroup_root(f"e2e-{uuid.uuid4().hex[:8]}") as cgroup_root:
        (short_tmp / "stats.yaml").write_text(CONFIG_HEADER + f"cgroupRoot: {cgroup_root}\n")
        try:
            yield process
        finally:
            if process.proc is not None and process.proc.poll() is None:
                process.stop(signal.SIGKILL)
            await cleanup(runtime, kubelet_only=True)


async def test_summary_and_cadvisor_series_of_a_throttled_container(
    kubelet: KubeletProcess,
) -> None:
    port = free_port()
    kubelet.start(f"--read-only-port={port}", "--address=127.0.0.1",
                  "--runtime-cgroups=/",  # containerd runs in the root cgroup here
                  "--config", str(kubelet.root / "stats.yaml"))  # fmt: skip
    kubelet.write("spin.yaml", manifest("spin", SCRIPT, extra=LIMITS))
    await kubelet.wait_for(lambda: kubelet.running("spin"), what="spin running")
    [container] = await kubelet.running("spin")
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:

        async def throttled() -> bool:
            text = (await client.get("/metrics/cadvisor")).text
            return any(
                line.startswith('container_cpu_cfs_throttled_periods_total{container="main"')
                and float(line.rsplit(" ", 1)[1]) > 0
                for line in text.splitlines()
            )

        await kubelet.wait_for(throttled, timeout=30, what="throttled periods")
        text = (await client.get("/metrics/cadvisor")).text
        summary = (await client.get("/stats/summary")).json()
    mine = [line for line in text.splitlines() if 'container="main"' in line]
    for series in ("container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_seconds_total"):
        assert any(line.startswith(series + "{") for line in mine), (series, mine)
    # block I/O: exactly what the container's blkio cgroup counts (this host's v1 blkio
    # counts nothing, even at the root, so there the series must be absent, not zero)
    [cgroup] = Path("/sys/fs/cgroup/blkio").glob(f"e2e-*/kubepods/**/{container.id}")
    counted = [
        line.split() for line in (cgroup / "blkio.throttle.io_service_bytes_recursive")
        .read_text().splitlines() if ":" in line
    ]  # fmt: skip
    reads = {f'device="{_device(d)}"': float(v) for d, op, v in counted if op == "Read"}
    emitted = {
        line.split(",")[1]: float(line.rsplit(" ", 1)[1])
        for line in mine if line.startswith("container_fs_reads_bytes_total{")
    }  # fmt: skip
    assert emitted == reads, (emitted, reads)
    _spec_series_match_the_cgroup(mine, container.id)
    for series in ("container_last_seen", "container_cpu_cfs_burst_periods_total",
                   "container_cpu_load_average_10s", "container_tasks_state",
                   "container_memory_kernel_usage", "container_memory_total_active_file_bytes",
                   "container_memory_failures_total"):  # fmt: skip
        assert any(line.startswith(series + "{") for line in mine), (series, mine)
    [processes] = [line for line in mine if line.startswith("container_processes{")]
    assert float(processes.rsplit(" ", 1)[1]) >= 1  # the shell spinning in the container
    node = summary["node"]
    assert "swapUsageBytes" in node["swap"]
    assert node["rlimit"]["maxpid"] > 0
    assert {"pods", "runtime"} <= {c["name"] for c in node["systemContainers"]}
    [pod] = [p for p in summary["pods"] if p["podRef"]["name"] == kubelet.pod_name("spin")]
    assert "swapUsageBytes" in pod["swap"]
    assert "swapUsageBytes" in pod["containers"][0]["swap"]
