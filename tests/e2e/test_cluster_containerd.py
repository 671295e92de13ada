"""The kubelet process as a cluster node: FakeApiServer as a process, real containerd.

20 pods created over HTTP reach Running (as the API reports them); deleted, they leave
both the node and the API, even when the kubelet is killed in the middle of it.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, labels

from .cluster import Processes, node_registered

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
        await node_registered(api, node)
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


async def test_a_kubelet_killed_while_its_pods_are_deleted_finishes_them_after_a_restart(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    """Ten pods deleted with a 5 s grace period, the kubelet SIGKILLed half a second
    later and started again two seconds after: every pod leaves the node and the API
    within what is left of its grace period and a few seconds, and none is started again
    (no sandbox or container with a later attempt)."""
    url, node, procs = cluster
    runtime, _ = cri
    names = [f"{node}-{i}" for i in range(10)]
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await node_registered(api, node)
        for name in names:
            r = await api.post("/api/v1/namespaces/default/pods", json=pod(name, node))
            assert r.status_code == 201, r.text

        async def phases() -> dict[str, str]:
            r = await api.get("/api/v1/namespaces/default/pods")
            return {
                p["metadata"]["name"]: p.get("status", {}).get("phase", "")
                for p in r.json()["items"]
                if p["metadata"]["name"] in names
            }

        with trio.fail_after(60):
            while list((await phases()).values()) != ["Running"] * len(names):
                await trio.sleep(0.2)
        for name in names:
            r = await api.delete(f"/api/v1/namespaces/default/pods/{name}")
            assert r.status_code == 200
        deleted = time.monotonic()
        await trio.sleep(0.5)
        kubelet = procs.procs[-1]
        args = [str(a) for a in kubelet.args]  # type: ignore[union-attr]
        kubelet.send_signal(signal.SIGKILL)
        kubelet.wait(timeout=10)
        assert len(await phases()) == len(names)  # killed before it deleted them all
        await trio.sleep(2)
        log_file = short_tmp / "kubelet-restarted.log"
        procs.start(args, log_file)
        with trio.fail_after(60):  # the process's start-up (imports, runtime, node)
            while "started: node" not in log_file.read_text(errors="replace"):
                await trio.sleep(0.05)
        restarted = time.monotonic()

        retried: set[str] = set()
        left_on_node: list[str] = ["?"]
        with trio.move_on_after(30):
            while True:
                listed = await runtime.list_pod_sandbox(labels={labels.POD_NAMESPACE: "default"})
                ours = [s for s in listed if s.labels.get(labels.POD_NAME) in names]
                retried |= {s.labels[labels.POD_NAME] for s in ours if s.metadata.attempt > 0}
                left_on_node = [s.labels[labels.POD_NAME] for s in ours]
                if not left_on_node and not await phases():
                    break
                await trio.sleep(0.2)
        took = time.monotonic() - restarted
    log = log_file.read_text(errors="replace")[-4000:]
    assert not retried, f"started again: {sorted(retried)}\n{log}"
    assert not left_on_node, f"still on the node: {left_on_node}\n{log}"
    grace_left = max(5 - (restarted - deleted), 0)
    assert took < grace_left + 5, f"all gone {took:.1f} s after the start-up\n{log}"
