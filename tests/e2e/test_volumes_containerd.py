"""API-backed volumes in real containers: a FakeApiServer process, the kubelet, containerd."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, labels

from .cluster import Processes, node_registered

pytestmark = pytest.mark.containerd

LOOP = "trap 'exit 0' TERM; while true; do sleep 0.2; done"


async def test_pod_reads_config_map_secret_and_token_then_leaves_nothing(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    url, node, _ = cluster
    runtime, _ = cri
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "files", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 2,
            "volumes": [
                {"name": "settings", "configMap": {"name": "settings"}},
                {"name": "creds", "secret": {"secretName": "creds"}},
                {
                    "name": "token",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
                        ]
                    },
                },
            ],
            "containers": [
                {
                    "name": "app",
                    "image": "docker.io/library/busybox:1.35",
                    "command": ["sh", "-c", LOOP],
                    "volumeMounts": [
                        {"name": "settings", "mountPath": "/etc/settings"},
                        {"name": "creds", "mountPath": "/etc/creds", "readOnly": True},
                        {
                            "name": "token",
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        },
                    ],
                }
            ],
        },
    }
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await node_registered(api, node)
        for body in (
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"color": "blue"},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds", "namespace": "default"},
                "data": {"password": "czNjcjN0"},
            },
            pod,
        ):
            kind = body["kind"].lower() + "s"
            r = await api.post(f"/api/v1/namespaces/default/{kind}", json=body)
            assert r.status_code == 201, r.text
        with trio.fail_after(30):
            while True:
                running = [
                    c
                    for c in await runtime.list_containers(labels={labels.POD_NAME: "files"})
                    if c.state == 1
                ]
                if running:
                    break
                await trio.sleep(0.2)
        cid = running[0].id

        async def cat(path: str) -> str:
            return (await runtime.exec_sync(cid, ["cat", path], timeout=5)).stdout.decode()

        assert await cat("/etc/settings/color") == "blue"
        assert await cat("/etc/creds/password") == "s3cr3t"
        assert (await cat("/var/run/secrets/kubernetes.io/serviceaccount/token")).count(".") == 2
        uid = running[0].labels[labels.POD_UID]
        pod_dir = short_tmp / "root" / "pods" / uid
        assert pod_dir.is_dir()
        r = await api.delete("/api/v1/namespaces/default/pods/files")
        assert r.status_code == 200
        with trio.fail_after(30):
            while (await api.get("/api/v1/namespaces/default/pods/files")).status_code != 404:
                await trio.sleep(0.2)
        assert not pod_dir.exists()
        assert not await runtime.list_pod_sandbox(labels={labels.POD_UID: uid})


def claim_pod(name: str, node: str, command: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 2,
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "containers": [
                {
                    "name": "app",
                    "image": "docker.io/library/busybox:1.35",
                    "command": ["sh", "-c", command],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
        },
    }


async def test_a_claim_on_a_host_path_volume_outlives_its_pods(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    """A pod writes to its claim and goes; the next pod on the claim reads it back."""
    url, node, _ = cluster
    runtime, _ = cri
    disk = short_tmp / "disk"
    disk.mkdir()
    async with httpx.AsyncClient(base_url=url, timeout=10) as api:
        await node_registered(api, node)
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-data"},
        }
        r = await api.post("/api/v1/namespaces/default/persistentvolumeclaims", json=claim)
        assert r.status_code == 201, r.text
        claim_uid = r.json()["metadata"]["uid"]
        r = await api.put(
            "/api/v1/namespaces/default/persistentvolumeclaims/data/status",
            json={**r.json(), "status": {"phase": "Bound"}},
        )
        assert r.status_code == 200, r.text
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": "1Gi"},
                "hostPath": {"path": str(disk), "type": "Directory"},
                "claimRef": {"namespace": "default", "name": "data", "uid": claim_uid},
            },
        }
        r = await api.post("/api/v1/persistentvolumes", json=volume)
        assert r.status_code == 201, r.text

        async def running(name: str) -> str:
            with trio.fail_after(60):
                while True:
                    found = [
                        c
                        for c in await runtime.list_containers(labels={labels.POD_NAME: name})
                        if c.state == 1
                    ]
                    if found:
                        return found[0].id
                    await trio.sleep(0.2)

        writer = claim_pod("writer", node, "echo kept > /data/note; " + LOOP)
        r = await api.post("/api/v1/namespaces/default/pods", json=writer)
        assert r.status_code == 201, r.text
        await running("writer")
        with trio.fail_after(10):
            while not (disk / "note").exists():
                await trio.sleep(0.1)
        assert (await api.delete("/api/v1/namespaces/default/pods/writer")).status_code == 200
        with trio.fail_after(30):
            while (await api.get("/api/v1/namespaces/default/pods/writer")).status_code != 404:
                await trio.sleep(0.2)
        reader = claim_pod("reader", node, LOOP)
        r = await api.post("/api/v1/namespaces/default/pods", json=reader)
        assert r.status_code == 201, r.text
        cid = await running("reader")
        out = await runtime.exec_sync(cid, ["cat", "/data/note"], timeout=5)
        assert out.stdout.decode() == "kept\n"
        assert (disk / "note").read_text() == "kept\n"
