"""A CSI driver on a real node: FakeCsiDriver bind-mounts a host directory into pods of a
kubelet process on containerd; what one pod writes, a second pod reads back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, labels
from kubelet.testing.fakecsi import FakeCsiDriver, FakeRegistrar
from kubelet.volumes.mounts import is_mount_point

from .cluster import Processes

pytestmark = pytest.mark.containerd

DRIVER = "hostdir.csi.example"
LOOP = "trap 'exit 0' TERM; while true; do sleep 0.2; done"


def pod(name: str, node: str, shared: Path, command: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 2,
            "volumes": [
                {
                    "name": "data",
                    "csi": {"driver": DRIVER, "volumeAttributes": {"hostDir": str(shared)}},
                }
            ],
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


async def running(runtime: RuntimeClient, name: str) -> Any:
    with trio.fail_after(60):
        while True:
            found = [
                c
                for c in await runtime.list_containers(labels={labels.POD_NAME: name})
                if c.state == 1
            ]
            if found:
                return found[0]
            await trio.sleep(0.2)


async def deleted(api: httpx.AsyncClient, name: str) -> None:
    r = await api.delete(f"/api/v1/namespaces/default/pods/{name}")
    assert r.status_code == 200, r.text
    with trio.fail_after(60):
        while (await api.get(f"/api/v1/namespaces/default/pods/{name}")).status_code != 404:
            await trio.sleep(0.2)


async def test_a_csi_volume_written_by_one_pod_is_read_by_the_next(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    url, node, _ = cluster
    runtime, _ = cri
    shared = short_tmp / "shared"
    shared.mkdir()
    driver = FakeCsiDriver(short_tmp / "csi.sock", DRIVER, node_id=node, mode="bind")
    registrar = FakeRegistrar(short_tmp / "root" / "plugins_registry", DRIVER, str(driver.path))
    async with (
        httpx.AsyncClient(base_url=url, timeout=10) as api,
        driver.serve(),
        registrar.serve(),
    ):
        with trio.fail_after(30):
            while True:
                r = await api.get(f"/apis/storage.k8s.io/v1/csinodes/{node}")
                if r.status_code == 200 and r.json()["spec"].get("drivers"):
                    break
                await trio.sleep(0.2)
        assert r.json()["spec"]["drivers"][0]["nodeID"] == node
        r = await api.post(
            "/apis/storage.k8s.io/v1/csidrivers",
            json={
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSIDriver",
                "metadata": {"name": DRIVER},
                "spec": {"attachRequired": False, "volumeLifecycleModes": ["Ephemeral"]},
            },
        )
        assert r.status_code == 201, r.text
        write = f"echo written-by-writer > /data/msg; {LOOP}"
        r = await api.post(
            "/api/v1/namespaces/default/pods", json=pod("writer", node, shared, write)
        )
        assert r.status_code == 201, r.text
        writer = await running(runtime, "writer")
        uid = writer.labels[labels.POD_UID]
        target = short_tmp / "root/pods" / uid / "volumes/kubernetes.io~csi/data/mount"
        assert is_mount_point(str(target))
        with trio.fail_after(10):
            while not (shared / "msg").exists():
                await trio.sleep(0.1)
        await deleted(api, "writer")
        with trio.fail_after(30):
            while (short_tmp / "root/pods" / uid).exists():
                await trio.sleep(0.2)
        assert driver.published == {}
        r = await api.post(
            "/api/v1/namespaces/default/pods", json=pod("reader", node, shared, LOOP)
        )
        assert r.status_code == 201, r.text
        reader = await running(runtime, "reader")
        out = await runtime.exec_sync(reader.id, ["cat", "/data/msg"], timeout=5)
        assert out.stdout.decode() == "written-by-writer\n"
        await deleted(api, "reader")
        with trio.fail_after(30):
            while driver.published:
                await trio.sleep(0.2)
