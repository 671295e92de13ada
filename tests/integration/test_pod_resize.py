"""In-place resize: the whole kubelet, FakeApiServer + FakeRuntime.

A pod resized through ``pods/resize`` is resized in place when it fits (the pod cgroup
and ``UpdateContainerResources``, the container kept), waits Deferred while the node is
full and is resized once room frees up, and is refused Infeasible when it can never fit;
the allocation outlives a kubelet restart in the checkpoint file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.cri import api
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


def resize_events(c: Cluster, reason: str = "ResizeInfeasible") -> list[str]:
    return [e["message"] for e in c.api.list("events", "default") if e.get("reason") == reason]


def in_progress(c: Cluster, name: str) -> dict[str, Any] | None:
    conditions = status(c, name).get("conditions") or []
    return next((x for x in conditions if x["type"] == "PodResizeInProgress"), None)


def updates(c: Cluster) -> list[Any]:
    return [r for r in c.fake.calls if r.rpc == "UpdateContainerResources"]


def app_resources(c: Cluster) -> api.LinuxContainerResources:
    """What the fake runtime holds for the running app container now."""
    (app,) = [x for x in c.fake.running() if x.config.metadata.name == "app"]
    return app.resources or app.config.linux.resources


async def test_a_resize_that_fits_is_applied_in_place(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        before = app_status(c, "web")
        assert before["allocatedResources"] == SMALL["requests"]
        assert before["resources"] == SMALL

        resize(c, "web", BIG)
        await c.wait_for(lambda: app_status(c, "web").get("resources") == BIG)
        after = app_status(c, "web")
        assert after["containerID"] == before["containerID"]  # resized, not restarted
        assert after["allocatedResources"] == BIG["requests"]
        assert pending(c, "web") is None
        await c.wait_for(lambda: in_progress(c, "web") is None)
        assert len(updates(c)) == 1
        now = app_resources(c)
        assert now.cpu_shares == 1536
        assert now.cpu_quota == 150_000
        assert now.cpu_period == 100_000
        assert now.memory_limit_in_bytes == 128 * 2**20
        (burstable,) = (c.tmp / "cgroup").rglob("cpu/kubepods/burstable")
        assert (burstable / "cpu.shares").read_text().strip() == "1536"  # the QoS cgroup too
        (pod_cpu,) = burstable.glob("pod*")
        assert (pod_cpu / "cpu.cfs_quota_us").read_text().strip() == "150000"
        assert status(c, "web")["observedGeneration"] == 2
        (started,) = resize_events(c, "ResizeStarted")
        assert started.startswith("Pod resize started: ")
        assert json.loads(started.removeprefix("Pod resize started: ")) == {
            "containers": [{"name": "app", "resources": BIG}],
            "generation": 2,
        }
        assert len(resize_events(c, "ResizeCompleted")) == 1

        # a crash restarts the container with its new allocation
        (app,) = [x for x in fake.running() if x.config.metadata.name == "app"]
        fake.exit_container(app.id, 1)
        await c.wait_for(lambda: app_status(c, "web").get("restartCount") == 1 and fake.running())
        again = running_app(c)
        assert again.linux.resources.cpu_quota == 150_000

        resize(c, "web", SMALL)  # and back down
        await c.wait_for(lambda: app_status(c, "web").get("resources") == SMALL)
        assert app_resources(c).cpu_quota == 100_000


async def test_a_resize_beyond_the_node_is_infeasible(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        huge = {
            "requests": {"cpu": "3", "memory": "64Mi"},
            "limits": {"cpu": "3", "memory": "128Mi"},
        }
        resize(c, "web", huge)
        await c.wait_for(lambda: pending(c, "web") is not None)
        condition = pending(c, "web")
        assert condition is not None
        assert (condition["status"], condition["reason"]) == ("True", "Infeasible")
        assert condition["message"] == (
            "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000"
        )
        assert condition["observedGeneration"] == 2
        after = app_status(c, "web")
        assert after["allocatedResources"] == SMALL["requests"]
        assert after["resources"] == SMALL
        assert updates(c) == []
        (event,) = resize_events(c)
        body = json.loads(event.removeprefix("Pod resize Infeasible: "))
        assert body["error"] == condition["message"] and body["generation"] == 2
        await trio.sleep(70)  # a resync or two: one event per verdict
        assert len(resize_events(c)) == 1
        assert pending(c, "web") == condition

        resize(c, "web", SMALL)  # undone: nothing pending any more
        await c.wait_for(lambda: pending(c, "web") is None)


async def test_a_deferred_resize_is_applied_once_room_frees_up(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        create(c, "web", SMALL)
        create(c, "other", {"requests": {"cpu": "800m"}})
        await c.wait_for(lambda: c.phase("web") == "Running" and c.phase("other") == "Running")
        resize(c, "web", BIG)  # 1.5 + 0.8 > 2: not now
        await c.wait_for(lambda: pending(c, "web") is not None)
        condition = pending(c, "web")
        assert condition is not None and condition["reason"] == "Deferred"
        assert condition["message"].startswith(
            "Node didn't have enough resource: cpu, requested: 1500"
        )
        assert len(resize_events(c, "ResizeDeferred")) == 1
        assert app_status(c, "web")["resources"] == SMALL
        assert updates(c) == []

        c.api.delete("pods", "default", "other", grace=0)
        await c.wait_for(lambda: app_status(c, "web").get("resources") == BIG, timeout=60)
        assert pending(c, "web") is None
        assert len(updates(c)) == 1


async def test_admission_counts_the_allocation(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        resize(c, "web", BIG)
        await c.wait_for(lambda: app_status(c, "web").get("resources") == BIG)
        create(c, "more", {"requests": {"cpu": "800m"}})
        await c.wait_for(lambda: c.phase("more") in ("Running", "Failed"))
        assert c.phase("more") == "Failed"  # 1.5 + 0.8 of 2 cpus


async def test_a_restarted_kubelet_keeps_the_allocation_from_its_checkpoint(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        resize(c, "web", BIG)
        await c.wait_for(lambda: app_status(c, "web").get("resources") == BIG)
        container = app_status(c, "web")["containerID"]
        assert c.scope is not None
        c.scope.cancel()  # the kubelet stops
        await trio.sleep(1)
        checkpoint = json.loads((c.tmp / "root" / "allocated_pods_state").read_text())
        assert "1500m" in checkpoint["data"]
        create(c, "more", {"requests": {"cpu": "800m"}})
        await start_cluster_kubelet(c)
        await c.wait_for(lambda: c.phase("more") in ("Running", "Failed"))
        assert c.phase("more") == "Failed"  # the allocation (1.5 cpus) still counts
        after = app_status(c, "web")
        assert after["containerID"] == container
        assert after["allocatedResources"] == BIG["requests"]
        assert len(updates(c)) == 1  # nothing to apply again


async def test_a_restarted_kubelet_reads_an_older_trees_record_from_the_runtime(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """No checkpoint entry: the containers' resources annotations say what runs."""
    async with running_cluster(fake, short_tmp) as c:
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        assert c.scope is not None
        c.scope.cancel()
        await trio.sleep(1)
        (c.tmp / "root" / "allocated_pods_state").unlink()
        resize(c, "web", BIG)
        await start_cluster_kubelet(c)
        await c.wait_for(lambda: app_status(c, "web").get("resources") == BIG)
        assert len(updates(c)) == 1


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


async def test_a_restart_container_policy_restarts_just_that_container(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        policy = [
            {"resourceName": "cpu", "restartPolicy": "NotRequired"},
            {"resourceName": "memory", "restartPolicy": "RestartContainer"},
        ]
        c.create_pod(
            "web",
            containers=[
                {
                    "name": "app",
                    "image": "busybox:1.35",
                    "resources": SMALL,
                    "resizePolicy": policy,
                },
                {"name": "side", "image": "busybox:1.35"},
            ],
        )
        await c.wait_for(lambda: c.phase("web") == "Running")
        ids = {s["name"]: s["containerID"] for s in status(c, "web")["containerStatuses"]}

        resize(c, "web", BIG)  # cpu only: in place
        await c.wait_for(lambda: app_status_named(c, "app").get("resources") == BIG)
        assert app_status_named(c, "app")["containerID"] == ids["app"]
        assert len(updates(c)) == 1

        more_memory = {
            "requests": {"cpu": "1500m", "memory": "64Mi"},
            "limits": {"cpu": "1500m", "memory": "256Mi"},
        }
        resize(c, "web", more_memory)
        await c.wait_for(lambda: app_status_named(c, "app").get("resources") == more_memory)
        await c.wait_for(lambda: app_status_named(c, "app").get("restartCount") == 1)
        assert app_status_named(c, "app")["containerID"] != ids["app"]
        assert app_status_named(c, "side")["containerID"] == ids["side"]
        assert len(updates(c)) == 1  # restarted with them, not updated
        (app,) = [x for x in c.fake.running() if x.config.metadata.name == "app"]
        assert app.config.linux.resources.memory_limit_in_bytes == 256 * 2**20
        await c.wait_for(lambda: in_progress(c, "web") is None)


def app_status_named(c: Cluster, name: str) -> dict[str, Any]:
    return dict(next(s for s in status(c, "web")["containerStatuses"] if s["name"] == name))


async def test_a_memory_limit_is_never_set_below_what_the_pod_uses(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        (uid,) = [p["metadata"]["uid"] for p in c.api.list("pods", "default")]
        (pod_dir,) = [d for d in (c.tmp / "cgroup").rglob(f"pod{uid}") if "memory" in d.parts]
        usage = pod_dir / "memory.usage_in_bytes"
        usage.write_text(str(100 * 2**20))
        smaller = {
            "requests": {"cpu": "1", "memory": "64Mi"},
            "limits": {"cpu": "1", "memory": "96Mi"},
        }
        resize(c, "web", smaller)
        await c.wait_for(lambda: (in_progress(c, "web") or {}).get("reason") == "Error")
        condition = in_progress(c, "web")
        assert condition is not None
        assert condition["message"] == (
            "Aborting attempt to set pod memory limit less than current memory usage for pod web"
        )
        assert app_status(c, "web")["allocatedResources"] == smaller["requests"]
        assert app_status(c, "web")["resources"] == SMALL  # what the runtime still runs
        assert updates(c) == []
        assert len(resize_events(c, "ResizeError")) == 1

        usage.write_text(str(10 * 2**20))  # it freed some: the next sync applies it
        await c.wait_for(lambda: in_progress(c, "web") is None, timeout=120)
        assert app_resources(c).memory_limit_in_bytes == 96 * 2**20
        assert (pod_dir / "memory.limit_in_bytes").read_text().strip() == str(96 * 2**20)


async def test_a_kubelet_restarted_mid_resize_finishes_it(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Allocated, not yet applied (the pod uses too much memory to shrink): a restarted
    kubelet reads the allocation back and applies it once it can."""
    async with running_cluster(fake, short_tmp) as c:
        create(c, "web", SMALL)
        await c.wait_for(lambda: c.phase("web") == "Running")
        (uid,) = [p["metadata"]["uid"] for p in c.api.list("pods", "default")]
        (pod_dir,) = [d for d in (c.tmp / "cgroup").rglob(f"pod{uid}") if "memory" in d.parts]
        usage = pod_dir / "memory.usage_in_bytes"
        usage.write_text(str(100 * 2**20))
        smaller = {
            "requests": {"cpu": "1", "memory": "64Mi"},
            "limits": {"cpu": "1", "memory": "96Mi"},
        }
        resize(c, "web", smaller)
        await c.wait_for(lambda: (in_progress(c, "web") or {}).get("reason") == "Error")
        container = app_status(c, "web")["containerID"]
        assert c.scope is not None
        c.scope.cancel()
        await trio.sleep(1)
        usage.write_text(str(10 * 2**20))
        await start_cluster_kubelet(c)
        await c.wait_for(lambda: app_status(c, "web").get("resources") == smaller, timeout=120)
        assert app_status(c, "web")["containerID"] == container
        assert app_resources(c).memory_limit_in_bytes == 96 * 2**20
        await c.wait_for(lambda: in_progress(c, "web") is None)
