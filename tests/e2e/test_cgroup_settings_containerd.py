"""The cgroup settings on this host (cgroup v1, hybrid), read back from
``/sys/fs/cgroup`` for real pods on containerd: ``cpuCFSQuota: false``, ``qosReserved``
(with its gate), NoSwap on containers (the memory hierarchy has ``memory.memsw.*``), and
``kubeletCgroups``. (``systemCgroups`` would move every process of this shared machine:
it is covered on temporary trees only.)"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubelet.cri import ImageClient, RuntimeClient, labels

from .test_cgroups_containerd import (
    CGROUP,
    HIERARCHIES,
    CgroupKubelet,
    cgroup_kubelet,
    remove_tree,
    resources,
    value,
)
from .test_kubelet_containerd import LOOP, manifest

pytestmark = pytest.mark.containerd

MI = 1024 * 1024
QOS = ("kubepods/burstable", "kubepods/besteffort")


@pytest.fixture
async def settings_kubelet(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> AsyncIterator[CgroupKubelet]:
    node = f"e2e-{uuid.uuid4().hex[:6]}"
    try:
        async with cgroup_kubelet(cri[0], short_tmp, node) as process:
            yield process
    finally:
        for hierarchy in (*HIERARCHIES, "unified", "devices", "blkio", "freezer"):
            remove_tree(CGROUP / hierarchy / node)
        for path in QOS:  # qosReserved's limits would outlive this kubelet
            with contextlib.suppress(OSError):
                (CGROUP / "memory" / path / "memory.limit_in_bytes").write_text("-1")


async def pod_uid(kubelet: CgroupKubelet, name: str) -> str:
    """The pod's UID, from any of its sandboxes (one may have been replaced)."""
    sandboxes = await kubelet.sandboxes(name)
    uid = sandboxes[0].labels[labels.POD_UID]
    kubelet.uids.add(uid)
    return uid


def container_dirs(hierarchy: str, pod_path: str) -> list[Path]:
    return [p for p in (CGROUP / hierarchy / pod_path).iterdir() if p.is_dir()]


async def test_cfs_quota_off_qos_reserved_no_swap_and_kubelet_cgroups(
    settings_kubelet: CgroupKubelet,
) -> None:
    kubelet = settings_kubelet
    kubelet.start(
        "--cpu-cfs-quota=false",
        "--feature-gates=QOSReserved=true",
        "--qos-reserved=memory=50%",
        f"--kubelet-cgroups=/{kubelet.node}",
    )
    both = "{cpu: 500m, memory: 128Mi}"
    kubelet.write("g.yaml", manifest("g", LOOP) + resources(both, both))
    kubelet.write("b.yaml", manifest("b", LOOP) + resources("{memory: 64Mi}", "{memory: 128Mi}"))
    for name in ("g", "b"):
        await kubelet.wait_for(lambda n=name: kubelet.running(n), what=f"{name} running")
    g, b = [await pod_uid(kubelet, name) for name in ("g", "b")]

    # cpuCFSQuota: false: no quota on the pod cgroup nor on its containers
    guaranteed = f"kubepods/pod{g}"
    assert value("cpu", guaranteed, "cpu.cfs_quota_us") == "-1"
    for directory in container_dirs("cpu", guaranteed):
        assert (directory / "cpu.cfs_quota_us").read_text().strip() == "-1", directory

    # qosReserved memory=50%: burstable = allocatable − 64Mi, besteffort − 32Mi more
    allocatable = int(value("memory", "kubepods", "memory.limit_in_bytes"))
    burstable = int(value("memory", "kubepods/burstable", "memory.limit_in_bytes"))
    besteffort = int(value("memory", "kubepods/besteffort", "memory.limit_in_bytes"))
    page = 4096  # the kernel rounds a limit down to whole pages
    assert abs(burstable - (allocatable - 64 * MI)) < page
    assert abs(besteffort - (allocatable - 96 * MI)) < page

    # NoSwap on v1: the container's memory+swap limit is its memory limit
    limited = [
        d
        for d in container_dirs("memory", f"kubepods/burstable/pod{b}")
        if (d / "memory.limit_in_bytes").read_text().strip() == str(128 * MI)
    ]
    assert limited
    for directory in limited:
        assert (directory / "memory.memsw.limit_in_bytes").read_text().strip() == str(128 * MI)

    # kubeletCgroups: the kubelet's process is in it
    assert kubelet.proc is not None
    # kubeletCgroups: the kubelet's process is in it, or the log says why not (this
    # machine: /proc/1/ns/pid is unreadable, and upstream, unable to tell whether it runs
    # in the host's PID namespace, leaves the process alone and reports that too)
    own = Path(f"/proc/{kubelet.proc.pid}/cgroup").read_text()
    memory_line = next(line for line in own.splitlines() if ":memory:" in line)
    assert memory_line.endswith(f":/{kubelet.node}") or (
        f"Failed to ensure state: /{kubelet.node}: failed to find pid namespace of init process"
        in kubelet.log()
    ), own
