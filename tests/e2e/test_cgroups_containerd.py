"""The QoS cgroup hierarchy on this host (cgroup v1, hybrid), made by the ``kubelet``
process for real pods on containerd, read back from ``/sys/fs/cgroup``.

Every pod cgroup a test makes is gone when it ends: the kubelet removes it after the
pod's teardown (that is asserted), and the fixture removes what a failed test left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest

from kubelet.cri import ImageClient, RuntimeClient, labels
from kubelet.cri.__main__ import cleanup

from .test_kubelet_containerd import LOOP, KubeletProcess, manifest

pytestmark = pytest.mark.containerd

CGROUP = Path("/sys/fs/cgroup")
HIERARCHIES = ("cpu", "memory", "pids", "cpuset", "systemd")
UNLIMITED_MEMORY = "9223372036854771712"


def resources(requests: str = "", limits: str = "") -> str:
    text = "    resources:\n"
    if requests:
        text += f"      requests: {requests}\n"
    if limits:
        text += f"      limits: {limits}\n"
    return text


def value(hierarchy: str, path: str, name: str) -> str:
    return (CGROUP / hierarchy / path.strip("/") / name).read_text().strip()


def present(path: str) -> list[str]:
    return [h for h in HIERARCHIES if (CGROUP / h / path.strip("/")).is_dir()]


def remove_tree(directory: Path) -> None:
    """rmdir bottom-up (what a failed test left; cgroup directories hold no files)."""
    for child in sorted(directory.glob("**/"), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            child.rmdir()


@attrs.define
class CgroupKubelet(KubeletProcess):
    uids: set[str] = attrs.field(factory=set)
    """the pods whose cgroups the fixture removes if the test did not"""


@contextlib.asynccontextmanager
async def cgroup_kubelet(
    runtime: RuntimeClient, tmp: Path, node: str
) -> AsyncIterator[CgroupKubelet]:
    """A kubelet on containerd for ``node``; afterwards it is killed, its pods go, and so
    do the pod cgroups the test did not see removed."""
    process = CgroupKubelet(runtime, tmp, node)
    process.manifests.mkdir()
    try:
        yield process
    finally:
        if process.proc is not None and process.proc.poll() is None:
            process.stop(signal.SIGKILL)
        await cleanup(runtime, kubelet_only=True)
        for uid in process.uids:
            for qos in ("", "burstable/", "besteffort/"):
                for hierarchy in (*HIERARCHIES, "unified"):
                    remove_tree(CGROUP / hierarchy / f"kubepods/{qos}pod{uid}")


@pytest.fixture
async def kubelet(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> AsyncIterator[CgroupKubelet]:
    async with cgroup_kubelet(cri[0], short_tmp, f"e2e-{uuid.uuid4().hex[:6]}") as process:
        yield process


async def uid_of(kubelet: CgroupKubelet, name: str) -> str:
    (sandbox,) = await kubelet.sandboxes(name)
    uid = sandbox.labels[labels.POD_UID]
    kubelet.uids.add(uid)
    return uid


async def test_guaranteed_burstable_besteffort_cgroups_and_their_removal(
    kubelet: CgroupKubelet,
) -> None:
    kubelet.start("--pod-max-pids=200")
    both = "{cpu: 500m, memory: 128Mi}"
    kubelet.write("g.yaml", manifest("g", LOOP) + resources(both, both))
    kubelet.write("b.yaml", manifest("b", LOOP) + resources("{cpu: 250m, memory: 64Mi}"))
    kubelet.write("e.yaml", manifest("e", LOOP))
    for name in ("g", "b", "e"):
        await kubelet.wait_for(lambda n=name: kubelet.running(n), what=f"{name} running")
    g, b, e = [await uid_of(kubelet, name) for name in ("g", "b", "e")]

    # the kubelet's own OOM score (oomScoreAdj, -999 by default), or the reason it is not
    # (this machine refuses it: Permission denied, and the log says so, as upstream)
    assert kubelet.proc is not None
    score = Path(f"/proc/{kubelet.proc.pid}/oom_score_adj").read_text().strip()
    assert score == "-999" or "failed to set the kubelet's oom_score_adj to -999" in (kubelet.log())

    # the QoS level
    assert value("cpu", "kubepods", "cpu.shares") == str((os.cpu_count() or 1) * 1024)
    assert value("cpu", "kubepods/besteffort", "cpu.shares") == "2"
    assert int(value("cpu", "kubepods/burstable", "cpu.shares")) >= 256

    guaranteed = f"kubepods/pod{g}"
    assert value("cpu", guaranteed, "cpu.shares") == "512"
    assert value("cpu", guaranteed, "cpu.cfs_quota_us") == "50000"
    assert value("cpu", guaranteed, "cpu.cfs_period_us") == "100000"
    assert value("memory", guaranteed, "memory.limit_in_bytes") == str(128 * 1024 * 1024)
    assert value("pids", guaranteed, "pids.max") == "200"

    burstable = f"kubepods/burstable/pod{b}"
    assert value("cpu", burstable, "cpu.shares") == "256"
    assert value("cpu", burstable, "cpu.cfs_quota_us") == "-1"
    assert value("memory", burstable, "memory.limit_in_bytes") == UNLIMITED_MEMORY

    besteffort = f"kubepods/besteffort/pod{e}"
    assert value("cpu", besteffort, "cpu.shares") == "2"

    # containerd nested the sandbox and the container inside the pod cgroup
    for path in (guaranteed, burstable, besteffort):
        children = [p for p in (CGROUP / "cpu" / path).iterdir() if p.is_dir()]
        assert len(children) >= 2, path

    for name in ("g", "b", "e"):
        (kubelet.manifests / f"{name}.yaml").unlink()

    async def all_gone() -> bool:
        return not any(present(p) for p in (guaranteed, burstable, besteffort))

    await kubelet.wait_for(all_gone, timeout=40, what="the pod cgroups removed")
    assert value("cpu", "kubepods/besteffort", "cpu.shares") == "2"
