"""The whole kubelet against FakeRuntime on a fake clock: start, restart, teardown."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import trio
from grpclib.const import Status

from kubelet.cri import api
from kubelet.testing import ContainerBehaviour, FakeRuntime

from .kubelet_harness import EPOCH, NODE, running_kubelet

WEB = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: busybox:1.35
"""


@pytest.fixture
async def fake(aio_loop: None, short_tmp: Path) -> object:
    runtime = FakeRuntime(epoch=EPOCH, images=["registry.k8s.io/pause:3.9", "busybox:1.35"])
    async with runtime.serve(short_tmp / "cri.sock"):
        yield runtime


async def test_static_pod_starts(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", WEB)
        started = await h.wait_for(lambda: h.running("web", "app"))
        assert started < 2.5  # next relist (1 s) + sync
        (sandbox,) = h.sandboxes("web")
        assert sandbox.config.metadata.namespace == "default"
        labels = sandbox.config.labels
        assert labels["io.kubernetes.pod.name"] == f"web-{NODE}"
        (container,) = h.running("web", "app")
        assert container.config.annotations["io.kubernetes.container.restartCount"] == "0"
        assert container.log_path.endswith(f"default_web-{NODE}_{labels['io.kubernetes.pod.uid']}/app/0.log")
