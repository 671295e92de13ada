"""In-place resize on real containerd: a running busybox pod resized up and down in CPU
and memory through ``pods/resize`` keeps its container, and the container's cgroup
(cgroup v1 here: ``cpu.shares``, ``cpu.cfs_quota_us``, ``memory.limit_in_bytes``)
follows each time, as does its pod's. A resize of the pod-level resources
(``spec.resources``, InPlacePodLevelResourcesVerticalScaling, on by default) sets the pod
cgroup, the container kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient

from .cluster import Processes, node_registered

pytestmark = pytest.mark.containerd

LOOP = "trap 'exit 0' TERM; while true; do sleep 0.2; done"
CGROUP = Path("/sys/fs/cgroup")
SMALL = {
    "requests": {"cpu": "100m", "memory": "64Mi"},
    "limits": {"cpu": "200m", "memory": "128Mi"},
}
BIG = {"requests": {"cpu": "300m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}
PATCH = {"Content-Type": "application/strategic-merge-patch+json"}


def web(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "app",
                    "image": "docker.io/library/busybox:1.35",
                    "command": ["sh", "-c", LOOP],
                    "resources": SMALL,
                }
            ],
        },
    }


def container_dir(hierarchy: str, container_id: str) -> Path:
    (found,) = (CGROUP / hierarchy / "kubepods").glob(f"**/{container_id}")
    return found


def read(directory: Path, name: str) -> int:
    return int((directory / name).read_text().strip())


def cgroup_values(container_id: str) -> tuple[int, int, int, int]:
    """(cpu.shares, cpu.cfs_quota_us, memory.limit_in_bytes, the pod's memory limit)."""
    cpu, memory = container_dir("cpu", container_id), container_dir("memory", container_id)
    return (
        read(cpu, "cpu.shares"),
        read(cpu, "cpu.cfs_quota_us"),
        read(memory, "memory.limit_in_bytes"),
        read(memory.parent, "memory.limit_in_bytes"),
    )


async def test_a_running_pod_is_resized_in_place_up_and_down(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient]
) -> None:
    url, node, _ = cluster
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await node_registered(api, node)
        r = await api.post("/api/v1/namespaces/default/pods", json=web(node))
        assert r.status_code == 201, r.text

        async def app() -> dict[str, Any]:
            pod = (await api.get("/api/v1/namespaces/default/pods/web")).json()
            statuses = pod.get("status", {}).get("containerStatuses") or [{}]
            return dict(statuses[0])

        with trio.fail_after(60):
            while "running" not in (await app()).get("state", {}):
                await trio.sleep(0.2)
        first = await app()
        container_id = first["containerID"].removeprefix("containerd://")
        assert cgroup_values(container_id) == (102, 20_000, 128 << 20, 128 << 20)

        async def resize(resources: dict[str, Any]) -> None:
            patch = {"spec": {"containers": [{"name": "app", "resources": resources}]}}
            r = await api.patch(
                "/api/v1/namespaces/default/pods/web/resize", json=patch, headers=PATCH
            )
            assert r.status_code == 200, r.text
            with trio.fail_after(60):
                while (await app()).get("resources") != resources:
                    await trio.sleep(0.2)

        await resize(BIG)
        assert (await app())["containerID"] == first["containerID"]
        assert (await app())["restartCount"] == 0
        assert cgroup_values(container_id) == (307, 50_000, 256 << 20, 256 << 20)

        await resize(SMALL)
        assert (await app())["containerID"] == first["containerID"]
        assert cgroup_values(container_id) == (102, 20_000, 128 << 20, 128 << 20)

        r = await api.delete("/api/v1/namespaces/default/pods/web")
        assert r.status_code == 200
        with trio.fail_after(60):
            while (await api.get("/api/v1/namespaces/default/pods")).json()["items"]:
                await trio.sleep(0.2)


def pod_dir(hierarchy: str, uid: str) -> Path:
    (found,) = (CGROUP / hierarchy / "kubepods").glob(f"**/pod{uid}")
    return found


def pod_cgroup_values(uid: str) -> tuple[int, int, int]:
    """(the pod cgroup's cpu.shares, cpu.cfs_quota_us, memory.limit_in_bytes)."""
    cpu, memory = pod_dir("cpu", uid), pod_dir("memory", uid)
    return (
        read(cpu, "cpu.shares"),
        read(cpu, "cpu.cfs_quota_us"),
        read(memory, "memory.limit_in_bytes"),
    )


async def test_a_pod_level_resize_sets_the_pod_cgroup(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient]
) -> None:
    url, node, _ = cluster
    body = web(node)
    body["metadata"]["name"] = "pod-level"
    (container,) = body["spec"]["containers"]
    del container["resources"]
    body["spec"]["resources"] = SMALL
    path = "/api/v1/namespaces/default/pods/pod-level"
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await node_registered(api, node)
        r = await api.post("/api/v1/namespaces/default/pods", json=body)
        assert r.status_code == 201, r.text
        uid = r.json()["metadata"]["uid"]

        async def status() -> dict[str, Any]:
            return dict((await api.get(path)).json().get("status") or {})

        async def app() -> dict[str, Any]:
            return dict(((await status()).get("containerStatuses") or [{}])[0])

        with trio.fail_after(60):
            while "running" not in (await app()).get("state", {}):
                await trio.sleep(0.2)
        first = await app()
        assert (await status())["resources"] == SMALL
        assert pod_cgroup_values(uid) == (102, 20_000, 128 << 20)

        async def resize(resources: dict[str, Any]) -> None:
            r = await api.patch(
                f"{path}/resize", json={"spec": {"resources": resources}}, headers=PATCH
            )
            assert r.status_code == 200, r.text
            with trio.fail_after(60):
                while (await status()).get("resources") != resources:
                    await trio.sleep(0.2)

        async def pod_cgroup_becomes(wanted: tuple[int, int, int]) -> None:
            with trio.fail_after(30):
                while pod_cgroup_values(uid) != wanted:
                    await trio.sleep(0.2)

        await resize(BIG)
        await pod_cgroup_becomes((307, 50_000, 256 << 20))
        assert (await status())["allocatedResources"] == BIG["requests"]
        assert (await app())["containerID"] == first["containerID"]
        assert (await app())["restartCount"] == 0

        await resize(SMALL)
        await pod_cgroup_becomes((102, 20_000, 128 << 20))
        assert (await app())["containerID"] == first["containerID"]

        r = await api.delete(path)
        assert r.status_code == 200
        with trio.fail_after(60):
            while (await api.get("/api/v1/namespaces/default/pods")).json()["items"]:
                await trio.sleep(0.2)
