"""Sidecars (restartable init containers) through the whole kubelet, on a fake clock.

Upstream as the reference: a sidecar's startupProbe gates the next init container
(computeInitContainerActions), a sidecar that exits is restarted whatever the pod's
restart policy, and a pod's termination stops the regular containers first, then the
sidecars in reverse order (kuberuntime_termination_order.go).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kubelet.testing import ContainerBehaviour, ExecResult, FakeRuntime

from .kubelet_harness import EPOCH, running_kubelet


@pytest.fixture
async def fake(aio_loop: None, short_tmp: Path) -> object:
    runtime = FakeRuntime(epoch=EPOCH, images=["registry.k8s.io/pause:3.9", "busybox:1.35"])
    async with runtime.serve(short_tmp / "cri.sock"):
        yield runtime


GATED = """\
apiVersion: v1
kind: Pod
metadata:
  name: gated
spec:
  initContainers:
  - name: proxy
    image: busybox:1.35
    restartPolicy: Always
    startupProbe:
      exec:
        command: [proxy-ready]
      periodSeconds: 1
      failureThreshold: 100
  - name: setup
    image: busybox:1.35
  containers:
  - name: app
    image: busybox:1.35
"""


def start_times(fake: FakeRuntime, name: str) -> list[float]:
    ids = {c.id for c in fake.containers.values() if c.config.metadata.name == name}
    return [c.time for c in fake.calls_of("StartContainer") if c.args.get("container_id") in ids]


async def test_sidecar_startup_probe_gates_the_next_init_container(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.script_exec(ExecResult(exit_code=1), cmd=["proxy-ready"])
    fake.behave(ContainerBehaviour(exit_after=1, exit_code=0), container="setup")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("gated.yaml", GATED)
        proxy_at = await h.wait_for(lambda: h.running("gated", "proxy"))
        await trio.sleep(8)
        assert not h.containers("gated", "setup")  # the probe has not succeeded yet
        assert not h.containers("gated", "app")
        ready_at = trio.current_time()
        fake.script_exec(ExecResult(exit_code=0), cmd=["proxy-ready"])
        setup_at = await h.wait_for(lambda: h.containers("gated", "setup"))
        assert setup_at - ready_at <= 2.5  # the next probe (1 s) + the sync it triggers
        await h.wait_for(lambda: h.running("gated", "app"))
        assert setup_at - proxy_at >= 8
