"""The kubelet process as a cluster node: FakeApiServer as a process, real containerd.

20 pods created over HTTP reach Running (as the API reports them); deleted, they leave
both the node and the API.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, labels

from .cluster import Processes

pytestmark = pytest.mark.containerd

LOOP = "trap 'exit 0' TERM; while true; do sleep 0.2; done"


def pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "main",
                    "image": "docker.io/library/busybox:1.35",
                    "command": ["sh", "-c", LOOP],
                }
            ],
        },
    }


async def test_twenty_api_pods_run_and_go(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient]
) -> None:
    url, node, _ = cluster
    runtime, _ = cri
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        with trio.fail_after(20):
            while (await api.get(f"/api/v1/nodes/{node}")).status_code != 200:
                await trio.sleep(0.1)
        names = [f"p{i}" for i in range(20)]
        start = time.monotonic()
        for name in names:
            r = await api.post("/api/v1/namespaces/default/pods", json=pod(name, node))
            assert r.status_code == 201, r.text

        async def phases() -> dict[str, str]:
            r = await api.get("/api/v1/namespaces/default/pods")
            return {
                p["metadata"]["name"]: p.get("status", {}).get("phase", "")
                for p in r.json()["items"]
            }

        with trio.fail_after(60):
            while set((await phases()).values()) != {"Running"} or len(await phases()) != 20:
                await trio.sleep(0.2)
        took = time.monotonic() - start
        assert took < 30
        ours = await runtime.list_pod_sandbox(labels={labels.POD_NAMESPACE: "default"})
        assert len([s for s in ours if s.labels[labels.POD_NAME] in names]) == 20

        for name in names:
            r = await api.delete(f"/api/v1/namespaces/default/pods/{name}")
            assert r.status_code == 200
        with trio.fail_after(60):
            while (await api.get("/api/v1/namespaces/default/pods")).json()["items"]:
                await trio.sleep(0.2)
        left = await runtime.list_pod_sandbox(labels={labels.POD_NAMESPACE: "default"})
        assert not [s for s in left if s.labels[labels.POD_NAME] in names]
