"""A pod's start: what its containers need is readied while RunPodSandbox runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from grpclib.const import Status

from kubelet.testing import FakeRuntime

from .kubelet_harness import KUBELET_IMAGES, running_kubelet


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


READY = """\
apiVersion: v1
kind: Pod
metadata:
  name: ready
spec:
  containers:
  - name: app
    image: busybox:1.35
    env:
    - {name: GREETING, value: hello}
    - name: NODE_IP
      valueFrom: {fieldRef: {fieldPath: status.hostIP}}
  - name: ip
    image: busybox:1.35
    env:
    - name: MY_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
"""


def _message_files(root: Path, container: str) -> list[Path]:
    return sorted((root / "root" / "pods").glob(f"*/containers/{container}/*"))


def _env(container: Any) -> dict[str, str]:
    return {kv.key: kv.value.decode() for kv in container.config.envs}


async def test_containers_are_readied_while_the_sandbox_is_created(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """With a slow RunPodSandbox, the containers' log directories and termination-message
    files exist before it answers: that work is off the start's critical path. The
    start then uses them, and an environment that reads the pod's IP has the sandbox's."""
    fake.faults.delay("RunPodSandbox", 5, times=1)
    async with running_kubelet(fake, short_tmp) as h:
        base = h.manifests.parent
        h.write("ready.yaml", READY)
        await h.wait_for(lambda: any(c.rpc == "RunPodSandbox" for c in fake.calls))
        await trio.sleep(1)
        (call,) = [c for c in fake.calls if c.rpc == "RunPodSandbox"]
        assert call.finished is None  # still creating the sandbox
        (pod_logs,) = (base / "logs").glob("default_ready-*")
        assert (pod_logs / "app").is_dir() and (pod_logs / "ip").is_dir()
        (app_file,) = _message_files(base, "app")
        (ip_file,) = _message_files(base, "ip")
        assert not any(c.rpc == "CreateContainer" for c in fake.calls)

        await h.wait_for(lambda: h.running("ready", "app") and h.running("ready", "ip"))
        (app,) = h.running("ready", "app")
        (ip,) = h.running("ready", "ip")
        mounts = {m.container_path: m.host_path for m in app.config.mounts}
        assert mounts["/dev/termination-log"] == str(app_file)
        ip_mounts = {m.container_path: m.host_path for m in ip.config.mounts}
        assert ip_mounts["/dev/termination-log"] == str(ip_file)
        assert _env(app)["GREETING"] == "hello"
        (sandbox,) = h.sandboxes("ready")
        assert _env(ip)["MY_IP"] == sandbox.ip
        assert _message_files(base, "app") == [app_file]  # made once, used


async def test_what_a_failed_sandbox_readied_is_undone(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """The sandbox fails: the termination-message files readied for it go; the retry's
    start makes and uses its own, one per container."""
    fake.faults.fail("RunPodSandbox", Status.UNKNOWN, "cni plugin not initialized", times=1)
    async with running_kubelet(fake, short_tmp) as h:
        base = h.manifests.parent
        h.write("ready.yaml", READY)
        await h.wait_for(lambda: h.running("ready", "app") and h.running("ready", "ip"))
        assert [c.outcome for c in fake.calls if c.rpc == "RunPodSandbox"] == ["UNKNOWN", "ok"]
        (app,) = h.running("ready", "app")
        mounts = {m.container_path: m.host_path for m in app.config.mounts}
        assert _message_files(base, "app") == [Path(mounts["/dev/termination-log"])]
        assert len(_message_files(base, "ip")) == 1


async def test_a_pod_is_readied_while_its_allocation_is_written_and_acts_after(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The allocation checkpoint is written by its own task: with that write slowed to
    3 s, the pod's worker makes its directories meanwhile, and RunPodSandbox waits until
    the file holds the pod (nothing acts on an allocation that is not on disk)."""
    from kubelet.boundedio import RunSync
    from kubelet.pods.allocation import Allocations

    plain_run = Allocations.run

    async def slow_run(
        self: Allocations, io: RunSync, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        async def slow(fn: Any) -> Any:
            await trio.sleep(3)
            return await io(fn)

        await plain_run(self, slow, task_status=task_status)

    monkeypatch.setattr(Allocations, "run", slow_run)
    async with running_kubelet(fake, short_tmp) as h:
        root = h.manifests.parent / "root"
        checkpoint = root / "allocated_pods_state"

        def holds(uid: str) -> bool:
            return checkpoint.exists() and uid in checkpoint.read_text()

        h.write("ready.yaml", READY)
        await h.wait_for(lambda: (root / "pods").is_dir() and any((root / "pods").iterdir()))
        readied = trio.current_time()
        (pod_dir,) = (root / "pods").iterdir()
        await trio.sleep(1)
        assert not holds(pod_dir.name)
        assert not any(c.rpc == "RunPodSandbox" for c in fake.calls)
        await h.wait_for(lambda: any(c.rpc == "RunPodSandbox" for c in fake.calls))
        assert holds(pod_dir.name)
        assert trio.current_time() - readied >= 2
        await h.wait_for(lambda: h.running("ready", "app") and h.running("ready", "ip"))
