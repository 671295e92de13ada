"""Our CRI clients against the real containerd: what FakeRuntime imitates, checked at source.

Real clock throughout (no autojump: containerd is another process). Workloads trap
SIGTERM because ``sh`` as PID 1 ignores it; only the SIGTERM test leaves it untrapped.
"""

from __future__ import annotations

import uuid

import pytest
import trio

from kubelet.cri import STDOUT, ImageClient, ImagePullFailed, NotFound, RuntimeClient, api
from kubelet.cri.__main__ import POD_UID_LABEL
from kubelet.cri.logformat import parse_line

from .conftest import BUSYBOX, PodHandle

pytestmark = pytest.mark.containerd

Clients = tuple[RuntimeClient, ImageClient]

LOOP = "while true; do sleep 0.2; done"
POLITE = f"trap 'exit 0' TERM; echo hello; {LOOP}"


async def test_pod_lifecycle(cri: Clients, pod: PodHandle) -> None:
    runtime, images = cri
    with trio.fail_after(30):
        sid = await pod.run()
        sandbox = (await runtime.pod_sandbox_status(sid)).status
        assert sandbox.state == api.SANDBOX_READY
        assert sandbox.metadata.uid == pod.uid
        assert sandbox.network.ip, "CNI gave the pod no IP"

        image = await images.image_status(BUSYBOX)
        assert image is not None
        assert BUSYBOX in image.repo_tags

        cid = await runtime.create_container(sid, pod.container_config("main", POLITE), pod.config)
        created = (await runtime.container_status(cid)).status
        assert created.state == api.CONTAINER_CREATED
        await runtime.start_container(cid)
        running = (await runtime.container_status(cid)).status
        assert running.state == api.CONTAINER_RUNNING
        assert running.metadata.name == "main"
        assert running.labels[POD_UID_LABEL] == pod.uid
        assert running.log_path == str(pod.log_file("main"))

        listed = await runtime.list_containers(labels={POD_UID_LABEL: pod.uid})
        assert [c.id for c in listed] == [cid]
        assert listed[0].pod_sandbox_id == sid

        result = await runtime.exec_sync(cid, ["echo", "hi"], timeout=5)
        assert (result.stdout, result.stderr, result.exit_code) == (b"hi\n", b"", 0)

        t0 = trio.current_time()
        await runtime.stop_container(cid, 5)
        assert trio.current_time() - t0 < 4, "the TERM trap should end it at once"
        stopped = (await runtime.container_status(cid)).status
        assert stopped.state == api.CONTAINER_EXITED
        assert stopped.exit_code == 0
        assert stopped.reason == "Completed"

        await runtime.remove_container(cid)
        with pytest.raises(NotFound):
            await runtime.container_status(cid)
        await runtime.stop_pod_sandbox(sid)
        assert (await runtime.pod_sandbox_status(sid)).status.state == api.SANDBOX_NOTREADY
        await runtime.remove_pod_sandbox(sid)

        assert await runtime.list_pod_sandbox(labels={POD_UID_LABEL: pod.uid}) == []
        assert await runtime.list_containers(labels={POD_UID_LABEL: pod.uid}) == []
        assert sid not in {s.id for s in await runtime.list_pod_sandbox()}


async def test_failing_container_reports_exit_code_and_error(pod: PodHandle) -> None:
    with trio.fail_after(20):
        cid = await pod.start_container("fails", "exit 3")
        status = await pod.wait_exited(cid)
    assert status.exit_code == 3
    assert status.reason == "Error"
    assert status.finished_at > 0


async def test_pull_of_absent_image_fails_fast(cri: Clients) -> None:
    _, images = cri
    ref = "docker.io/library/does-not-exist:v0"
    t0 = trio.current_time()
    with trio.fail_after(10), pytest.raises(ImagePullFailed) as info:
        await images.pull_image(ref)
    elapsed = trio.current_time() - t0
    assert elapsed < 5, f"PullImage took {elapsed:.2f}s to fail"
    assert info.value.rpc == "PullImage"
    assert "does-not-exist" in info.value.message
    assert await images.image_status(ref) is None


async def test_container_log_file_is_cri_format(pod: PodHandle) -> None:
    with trio.fail_after(20):
        await pod.start_container("talker", POLITE)
        path = pod.log_file("talker")
        while not (path.exists() and b"hello" in path.read_bytes()):
            await trio.sleep(0.05)
    lines = [parse_line(raw) for raw in path.read_bytes().splitlines()]
    hello = [ln for ln in lines if ln.message == b"hello"]
    assert len(hello) == 1
    assert hello[0].stream == STDOUT
    assert not hello[0].partial  # tag F
    assert hello[0].ns > 0


async def test_status_of_unknown_container_is_not_found(cri: Clients) -> None:
    runtime, _ = cri
    with trio.fail_after(10), pytest.raises(NotFound) as info:
        await runtime.container_status(uuid.uuid4().hex * 2)
    assert info.value.rpc == "ContainerStatus"


async def test_stop_kills_container_ignoring_sigterm_at_timeout(
    cri: Clients, pod: PodHandle
) -> None:
    runtime, _ = cri
    with trio.fail_after(20):
        cid = await pod.start_container("stubborn", LOOP)
        t0 = trio.current_time()
        await runtime.stop_container(cid, 1)
        elapsed = trio.current_time() - t0
        status = (await runtime.container_status(cid)).status
    assert 0.8 <= elapsed <= 5, f"StopContainer(timeout=1) took {elapsed:.2f}s"
    assert status.state == api.CONTAINER_EXITED
    assert status.exit_code == 137
