"""Finished pods stay finished: the whole kubelet, FakeApiServer + FakeRuntime, fake clock.

Upstream as the reference: a pod whose API phase is Succeeded or Failed starts its pod
worker in the terminated state (pod_workers.go), does not count against max pods
(filterOutInactivePods), and its phase never leaves the terminal state. A run-once pod
that finished under this kubelet is never run again, even once the runtime lost it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.testing import ContainerBehaviour, FakeApiServer, FakeRuntime

from .cluster_harness import Cluster, start_cluster_kubelet
from .kubelet_harness import EPOCH, KUBELET_IMAGES, NODE


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def finished_status(phase: str, exit_code: int) -> dict[str, Any]:
    reason = "Completed" if exit_code == 0 else "Error"
    return {
        "phase": phase,
        "hostIP": "10.0.0.5",
        "startTime": "2027-01-15T08:00:00Z",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": f"Pod{reason}"},
        ],
        "containerStatuses": [
            {
                "name": "app",
                "image": "busybox:1.35",
                "imageID": "",
                "containerID": "containerd://0123456789ab",
                "restartCount": 0,
                "ready": False,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": reason,
                        "startedAt": "2027-01-15T08:00:01Z",
                        "finishedAt": "2027-01-15T08:00:02Z",
                        "containerID": "containerd://0123456789ab",
                    }
                },
            }
        ],
    }


def pod_body(name: str, policy: str = "Always") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "restartPolicy": policy,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "app", "image": "busybox:1.35"}],
        },
    }


@contextlib.asynccontextmanager
async def cluster_with(
    fake: FakeRuntime,
    tmp: Path,
    before: Sequence[tuple[dict[str, Any], dict[str, Any] | None]],
    *extra: str,
) -> AsyncIterator[Cluster]:
    """A cluster whose API already holds ``before`` (pod, status) when the kubelet starts."""
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        for body, status in before:
            api.create(body)
            if status is not None:
                api.update_status("pods", "default", body["metadata"]["name"], status)
        c = Cluster(api, fake, tmp, nursery)
        await start_cluster_kubelet(c, extra=extra)
        yield c
        nursery.cancel_scope.cancel()


def sandboxes_of(fake: FakeRuntime, name: str) -> list[object]:
    return [s for s in fake.sandboxes.values() if s.config.metadata.name == name]


def runs_of(fake: FakeRuntime, name: str) -> list[object]:
    return [c for c in fake.calls_of("RunPodSandbox") if c.args.get("name") == name]


@pytest.mark.parametrize(("phase", "code"), [("Succeeded", 0), ("Failed", 1)])
async def test_terminal_api_pod_is_never_started_on_an_empty_runtime(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock, phase: str, code: int
) -> None:
    status = finished_status(phase, code)
    async with cluster_with(fake, short_tmp, [(pod_body("done"), status)]) as c:
        c.create_pod("web")
        await c.wait_for(lambda: c.phase("web") == "Running")
        await trio.sleep(70)  # past a periodic resync (1 m)
        assert fake.calls_of("RunPodSandbox") and not sandboxes_of(fake, "done")
        assert [s.config.metadata.name for s in fake.sandboxes.values()] == ["web"]
        after = c.pod("done")
        assert after is not None
        assert after["status"]["phase"] == phase
        assert after["status"]["containerStatuses"] == status["containerStatuses"]
        for patch in c.api.requests_of("patch", "pods/status", name="done"):
            sent = json.loads(patch.body).get("status", {})
            assert sent.get("phase", phase) == phase
            assert "containerStatuses" not in sent


async def test_terminal_api_pods_do_not_count_against_max_pods(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    before = [(pod_body("done"), finished_status("Succeeded", 0))]
    async with cluster_with(fake, short_tmp, before, "--max-pods", "1") as c:
        await trio.sleep(2)
        c.create_pod("web")
        await c.wait_for(lambda: c.phase("web") == "Running", timeout=30)
        assert c.phase("done") == "Succeeded"


@pytest.mark.parametrize("policy", ["Never", "OnFailure"])
async def test_finished_run_once_pod_is_not_run_again_after_a_runtime_reset(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock, policy: str
) -> None:
    fake.behave(ContainerBehaviour(exit_after=1, exit_code=0), pod="once")
    async with cluster_with(fake, short_tmp, [(pod_body("once", policy), None)]) as c:
        await c.wait_for(lambda: c.phase("once") == "Succeeded", timeout=30)
        assert len(fake.calls_of("StartContainer")) == 1
        fake.wipe()  # a containerd reset behind the kubelet's back
        await trio.sleep(70)
        assert len(fake.calls_of("RunPodSandbox")) == 1
        assert len(fake.calls_of("StartContainer")) == 1
        assert c.phase("once") == "Succeeded"
        # and a restarted kubelet, on the empty runtime, reads the API's verdict
        assert c.scope is not None
        c.scope.cancel()
        await trio.sleep(1)
        await start_cluster_kubelet(c)
        await trio.sleep(70)
        assert len(fake.calls_of("RunPodSandbox")) == 1
        assert c.phase("once") == "Succeeded"


async def test_a_deleted_pod_reports_how_its_containers_ended_before_it_goes(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(stop_exit_code=143), pod="web")
    async with cluster_with(fake, short_tmp, []) as c:
        c.create_pod("web")
        await c.wait_for(lambda: c.phase("web") == "Running")
        c.api.delete("pods", "default", "web", grace=30)
        await c.wait_for(lambda: c.pod("web") is None, timeout=60)
        (last, *_) = reversed(c.api.requests_of("patch", "pods/status", name="web"))
        (delete, *_) = reversed(c.api.requests_of("delete", "pods", name="web"))
        assert last.time <= delete.time
        status = json.loads(last.body)["status"]
        assert status["phase"] == "Failed"  # upstream: a deleted pod ends in a terminal phase
        (app,) = status["containerStatuses"]
        assert app["state"]["terminated"]["exitCode"] == 143
