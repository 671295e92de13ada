"""End-to-end fixtures: our CRI clients against the REAL containerd (real clock).

containerd is started once per machine by ``sudo scripts/containerd-up.sh``. When it is
not there the tests fail (never skip): a silently skipped runtime test is how a broken
runtime integration goes unnoticed.

Every test gets a fresh pod uid; whatever carries that uid is stopped and removed when
the test ends, passed or failed.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio

from kubelet.cri import CriError, ImageClient, RuntimeClient, api, connect, socket_path
from kubelet.cri.__main__ import POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL, cleanup

from .cluster import CONTAINERD_ENDPOINT

BUSYBOX = "docker.io/library/busybox:latest"
NAMESPACE = "e2e"
# As the kubelet sends them. The CRI zero value for pid is POD (shared with pause), which
# would make the workload an ordinary process that SIGTERM kills; the kubelet's default
# is one pid namespace per container, where `sh` is PID 1 and ignores an untrapped TERM.
NAMESPACES = api.NamespaceOption(network=api.POD, pid=api.CONTAINER, ipc=api.POD)
START_HINT = "start it with `sudo scripts/containerd-up.sh` (stop with scripts/containerd-down.sh)"


def _require_socket(path: str) -> None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        pytest.fail(f"containerd socket {path} is missing: {START_HINT}", pytrace=False)
    if not stat.S_ISSOCK(mode):
        pytest.fail(f"{path} is not a unix socket: {START_HINT}", pytrace=False)


@pytest.fixture
async def cri(aio_loop: None) -> AsyncIterator[tuple[RuntimeClient, ImageClient]]:
    """Clients connected to containerd; fails the test if containerd is not answering.

    Async on purpose: pytest-trio sets it up inside the test's run, so a missing runtime
    is reported as a test failure rather than a setup error.
    """
    _require_socket(socket_path(CONTAINERD_ENDPOINT))
    async with connect(CONTAINERD_ENDPOINT, request_timeout=30.0) as (runtime, images):
        try:
            with trio.fail_after(5):
                await runtime.version()
        except (CriError, trio.TooSlowError) as exc:
            pytest.fail(f"containerd at {CONTAINERD_ENDPOINT} not answering ({exc}): {START_HINT}")
        yield runtime, images


@attrs.define
class PodHandle:
    """One test pod in containerd: its sandbox id, config and log directory."""

    runtime: RuntimeClient
    uid: str
    name: str
    log_dir: Path
    config: api.PodSandboxConfig
    sandbox_id: str = ""

    async def run(self) -> str:
        self.sandbox_id = await self.runtime.run_pod_sandbox(self.config)
        return self.sandbox_id

    def container_config(self, name: str, script: str, *, attempt: int = 0) -> api.ContainerConfig:
        """busybox running ``sh -c script``, labelled and logged as the kubelet would."""
        return api.ContainerConfig(
            metadata=api.ContainerMetadata(name=name, attempt=attempt),
            image=api.ImageSpec(image=BUSYBOX),
            command=["sh", "-c", script],
            labels={
                POD_NAME_LABEL: self.name,
                POD_NAMESPACE_LABEL: NAMESPACE,
                POD_UID_LABEL: self.uid,
                "io.kubernetes.container.name": name,
            },
            log_path=f"{name}/{attempt}.log",
            linux=api.LinuxContainerConfig(
                security_context=api.LinuxContainerSecurityContext(namespace_options=NAMESPACES)
            ),
        )

    async def start_container(self, name: str, script: str) -> str:
        """Create and start a container; the sandbox is created first if needed."""
        if not self.sandbox_id:
            await self.run()
        cid = await self.runtime.create_container(
            self.sandbox_id, self.container_config(name, script), self.config
        )
        await self.runtime.start_container(cid)
        return cid

    def log_file(self, container: str, attempt: int = 0) -> Path:
        return self.log_dir / container / f"{attempt}.log"

    async def wait_exited(self, cid: str, within: float = 10.0) -> api.ContainerStatus:
        """Poll ContainerStatus until EXITED (containerd has no event stream over CRI)."""
        with trio.fail_after(within):
            while True:
                status = (await self.runtime.container_status(cid)).status
                if status.state == api.CONTAINER_EXITED:
                    return status
                await trio.sleep(0.05)


def sandbox_config(name: str, uid: str, log_dir: Path) -> api.PodSandboxConfig:
    """A minimal pod sandbox as the kubelet sends it (labels, log dir, no cgroup parent)."""
    return api.PodSandboxConfig(
        metadata=api.PodSandboxMetadata(name=name, uid=uid, namespace=NAMESPACE, attempt=0),
        hostname=name,
        log_directory=str(log_dir),
        labels={POD_NAME_LABEL: name, POD_NAMESPACE_LABEL: NAMESPACE, POD_UID_LABEL: uid},
        linux=api.LinuxPodSandboxConfig(
            security_context=api.LinuxSandboxSecurityContext(namespace_options=NAMESPACES)
        ),
    )


@pytest.fixture
async def pod(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path, request: pytest.FixtureRequest
) -> AsyncIterator[PodHandle]:
    """A not-yet-running pod with a unique uid; removed with its containers at the end."""
    runtime, _ = cri
    uid = str(uuid.uuid4())
    name = f"{request.node.name.removeprefix('test_').replace('_', '-')[:40]}-{uid[:6]}"
    # the pod log directory is the kubelet's to create, not the runtime's
    log_dir = short_tmp / "pods" / f"{NAMESPACE}_{name}_{uid}"
    log_dir.mkdir(parents=True)
    handle = PodHandle(runtime, uid, name, log_dir, sandbox_config(name, uid, log_dir))
    try:
        yield handle
    finally:
        errors: list[str] = ["timed out after 30s"]
        with trio.CancelScope(shield=True), trio.move_on_after(30):
            errors = (await cleanup(runtime, labels={POD_UID_LABEL: uid}, stop_timeout=0)).errors
        if errors:
            pytest.fail(f"cleanup of pod {name} failed: {errors}")


from .cluster import cluster  # noqa: E402, F401 - the fixture: FakeApiServer + kubelet processes
