"""``cgroupDriver: systemd`` on this machine, whose PID 1 is not systemd: the ``kubelet``
process asks containerd for its driver (containerd 1.6 has no RuntimeConfig, so the
configured one stands), then refuses to start, naming the setting and the reason.
Nothing is created: no kubepods slice, no sandbox.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubelet.cri import RuntimeClient

from .conftest import CONTAINERD_ENDPOINT

pytestmark = pytest.mark.containerd

CONFIG = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
"""


async def test_cgroup_driver_systemd_is_refused_without_systemd(
    tmp_path: Path, cri: tuple[RuntimeClient, object]
) -> None:
    assert not Path("/run/systemd/system").exists(), "this test expects a host without systemd"
    runtime, _ = cri
    before = {s.id for s in (await runtime.list_pod_sandbox())}
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    result = subprocess.run(
        [
            sys.executable, "-m", "kubelet", f"--config={config}",
            "--pod-manifest-path", str(manifests), "--hostname-override", "systemd-e2e",
            "--enable-server=false", "--healthz-port=0", "--read-only-port=0",
            "--root-dir", str(tmp_path / "root"),
            "--container-runtime-endpoint", CONTAINERD_ENDPOINT,
            "--fail-swap-on=false",  # a CI machine may swap; the driver is what is tried
            "--fail-cgroupv1=false",  # this machine is cgroup v1 (hybrid)
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert (
        "kubelet: cgroupDriver: systemd not running on this host, cannot use systemd cgroups "
        "manager"
    ) in result.stderr.splitlines()
    assert "Falling back to using cgroupDriver from kubelet config." in result.stderr
    assert not Path("/sys/fs/cgroup/cpu/kubepods.slice").exists()
    assert {s.id for s in (await runtime.list_pod_sandbox())} <= before
