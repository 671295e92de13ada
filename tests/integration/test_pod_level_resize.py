"""In-place resize of pod-level resources (``spec.resources``,
InPlacePodLevelResourcesVerticalScaling): the whole kubelet, FakeApiServer + FakeRuntime
and the harness's cgroup tree.

A resize of the pod-level resources alone changes no container: the pod cgroup is set to
the new values, the pod's ``status.resources``/``allocatedResources`` follow, and the
allocation checkpoint records them; the node declares the feature.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.testing import FakeRuntime

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES

SMALL = {"requests": {"cpu": "500m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}
BIG = {"requests": {"cpu": "500m", "memory": "64Mi"}, "limits": {"cpu": "1500m", "memory": "256Mi"}}


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def status(c: Cluster, name: str) -> dict[str, Any]:
    return dict((c.pod(name) or {}).get("status") or {})


def pod_dir(c: Cluster, controller: str) -> Path:
    (burstable,) = (c.tmp / "cgroup").rglob(f"{controller}/kubepods/burstable")
    (found,) = burstable.glob("pod*")
    return found


def read(path: Path) -> str:
    return path.read_text().strip()


async def test_a_pod_level_resize_sets_the_pod_cgroup_and_reports_it(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        c.create_pod(
            "web",
            resources=SMALL,
            containers=[{"name": "app", "image": "busybox:1.35"}],
        )
        await c.wait_for(lambda: c.phase("web") == "Running")
        before = status(c, "web")
        assert before["resources"] == SMALL
        assert before["allocatedResources"] == SMALL["requests"]
        cpu, memory = pod_dir(c, "cpu"), pod_dir(c, "memory")
        assert read(cpu / "cpu.cfs_quota_us") == "100000"
        assert read(memory / "memory.limit_in_bytes") == str(128 * 2**20)
        (app_before,) = before["containerStatuses"]

        c.api.patch("pods", "default", "web", {"spec": {"resources": BIG}}, subresource="resize")
        await c.wait_for(lambda: status(c, "web").get("resources") == BIG)
        await c.wait_for(lambda: read(memory / "memory.limit_in_bytes") == str(256 * 2**20))
        assert read(cpu / "cpu.cfs_quota_us") == "150000"
        after = status(c, "web")
        (app_after,) = after["containerStatuses"]
        assert app_after["containerID"] == app_before["containerID"]  # nothing restarted
        assert not [r for r in c.fake.calls if r.rpc == "UpdateContainerResources"]
        await c.wait_for(
            lambda: (
                not [
                    x
                    for x in status(c, "web").get("conditions", [])
                    if x["type"].startswith("PodResize")
                ]
            )
        )
        events = [e["reason"] for e in c.api.list("events", "default")]
        assert "ResizeCompleted" in events
        text = json.loads(next(c.tmp.rglob("allocated_pods_state")).read_text())
        entries = json.loads(text["data"])["entries"]
        (entry,) = entries.values()
        assert entry["PodLevelResources"]["limits"]["memory"] == "256Mi"

        # and back down: the pod cgroup's memory shrinks
        c.api.patch("pods", "default", "web", {"spec": {"resources": SMALL}}, subresource="resize")
        await c.wait_for(lambda: read(memory / "memory.limit_in_bytes") == str(128 * 2**20))
        await c.wait_for(lambda: status(c, "web").get("resources") == SMALL)
        assert read(cpu / "cpu.cfs_quota_us") == "100000"


async def test_the_node_declares_pod_level_resize(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        await c.wait_for(lambda: bool(c.api.list("nodes", "")))
        (node,) = c.api.list("nodes", "")
        declared = node["status"].get("declaredFeatures", [])
        assert "InPlacePodLevelResourcesVerticalScaling" in declared
