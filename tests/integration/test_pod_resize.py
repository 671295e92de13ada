"""In-place resize is refused, honestly: the whole kubelet, FakeApiServer + FakeRuntime.

A pod resized through ``pods/resize`` keeps running with what it was admitted with; its
status says so (``allocatedResources``/``resources`` unchanged, ``PodResizePending``
Infeasible, a ``ResizeInfeasible`` event), a restarted container gets the old resources
again, admission counts them, and a restarted kubelet reads them back from the runtime.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.cri import api
from kubelet.decisions.resize import NOT_SUPPORTED
from kubelet.testing import FakeRuntime

from .cluster_harness import Cluster, running_cluster, start_cluster_kubelet
from .kubelet_harness import KUBELET_IMAGES

SMALL = {"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}
BIG = {
    "requests": {"cpu": "1500m", "memory": "64Mi"},
    "limits": {"cpu": "1500m", "memory": "128Mi"},
}


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def create(c: Cluster, name: str, resources: dict[str, Any]) -> None:
    c.create_pod(
        name, containers=[{"name": "app", "image": "busybox:1.35", "resources": resources}]
    )


def resize(c: Cluster, name: str, resources: dict[str, Any]) -> None:
    patch = {"spec": {"containers": [{"name": "app", "resources": resources}]}}
    c.api.patch("pods", "default", name, patch, subresource="resize")


def status(c: Cluster, name: str) -> dict[str, Any]:
    return dict((c.pod(name) or {}).get("status") or {})


def pending(c: Cluster, name: str) -> dict[str, Any] | None:
    conditions = status(c, name).get("conditions") or []
    return next((x for x in conditions if x["type"] == "PodResizePending"), None)


def app_status(c: Cluster, name: str) -> dict[str, Any]:
    (app,) = status(c, name)["containerStatuses"]
    return dict(app)


def running_app(c: Cluster) -> api.ContainerConfig:
    (app,) = [x for x in c.fake.running() if x.config.metadata.name == "app"]
    return app.config


def resize_events(c: Cluster) -> list[str]:
    return [
        e["message"]
        for e in c.api.list("events", "default")
        if e.get("reason") == "ResizeInfeasible"
    ]


async def test_a_resize_is_refused_and_what_runs_is_reported(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        before = app_status(c, "web")
        assert before["allocatedResources"] == SMALL["requests"]
        assert before["resources"] == SMALL
        first = running_app(c)

        resize(c, "web", BIG)
        await c.wait_for(lambda: pending(c, "web") is not None)
        condition = pending(c, "web")
        assert condition is not None
        assert (condition["status"], condition["reason"]) == ("True", "Infeasible")
        assert condition["message"] == NOT_SUPPORTED
        assert condition["observedGeneration"] == 2
        after = app_status(c, "web")
        assert after["allocatedResources"] == SMALL["requests"]
        assert after["resources"] == SMALL
        assert after["containerID"] == before["containerID"]  # not restarted
        (event,) = resize_events(c)
        assert event.startswith("Pod resize Infeasible: ")
        body = json.loads(event.removeprefix("Pod resize Infeasible: "))
        assert body == {
            "containers": [{"name": "app", "resources": BIG}],
            "generation": 2,
            "error": NOT_SUPPORTED,
        }

        # a crash restarts the container with what the pod was admitted with
        (app,) = [x for x in fake.running() if x.config.metadata.name == "app"]
        fake.exit_container(app.id, 1)
        await c.wait_for(lambda: app_status(c, "web").get("restartCount") == 1 and fake.running())
        again = running_app(c)
        assert again.linux.resources.cpu_quota == first.linux.resources.cpu_quota == 100_000
        assert again.linux.resources.memory_limit_in_bytes == 128 * 2**20
        await trio.sleep(70)  # a resync or two: one event per refusal
        assert len(resize_events(c)) == 1
        assert pending(c, "web") == condition

        resize(c, "web", SMALL)  # undone: nothing pending any more
        await c.wait_for(lambda: pending(c, "web") is None)


async def test_admission_counts_what_runs_not_what_a_resize_asks(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        resize(c, "web", BIG)
        await c.wait_for(lambda: pending(c, "web") is not None)
        create(c, "more", {"requests": {"cpu": "800m"}})
        await c.wait_for(lambda: c.phase("more") in ("Running", "Failed"))
        assert c.phase("more") == "Running"  # 1 + 0.8 of 2 cpus, not 1.5 + 0.8


async def test_a_restarted_kubelet_reads_what_runs_from_the_runtime(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        container = app_status(c, "web")["containerID"]
        assert c.scope is not None
        c.scope.cancel()  # the kubelet stops; the pod is resized meanwhile
        await trio.sleep(1)
        resize(c, "web", BIG)
        create(c, "more", {"requests": {"cpu": "800m"}})
        await start_cluster_kubelet(c)
        await c.wait_for(lambda: pending(c, "web") is not None)
        after = app_status(c, "web")
        assert after["containerID"] == container  # adopted, not restarted
        assert after["allocatedResources"] == SMALL["requests"]
        assert after["resources"] == SMALL
        await c.wait_for(lambda: c.phase("more") in ("Running", "Failed"))
        assert c.phase("more") == "Running"


async def test_a_deleted_pod_leaves_no_allocation_behind(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A graceful API delete: the pod is torn down while still in the API, then removed;
    nothing syncs it after that, so the removal itself drops its allocation."""
    async with running_cluster(fake, short_tmp) as c:
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        allocations = c.components.syncer.allocations
        (uid,) = [p["metadata"]["uid"] for p in c.api.list("pods", "default")]
        assert uid in allocations
        c.api.delete("pods", "default", "web", grace=30)
        await c.wait_for(lambda: c.pod("web") is None, timeout=60)
        await trio.sleep(30)
        assert uid not in allocations and len(allocations) == 0
