"""A CSI driver on a real node: FakeCsiDriver bind-mounts a host directory into pods of a
kubelet process on containerd; what one pod writes, a second pod reads back."""

from __future__ import annotations

import signal
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


def claim_objects(node: str, shared: Path) -> list[tuple[str, dict[str, Any]]]:
    """The claim ``data`` bound to a CSI PersistentVolume whose driver bind-mounts
    ``shared``, and a CSIDriver without attachment (no attach/detach controller here)."""
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"pv-{node}"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "1Gi"},
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data"},
            "csi": {
                "driver": DRIVER,
                "volumeHandle": f"vol-{node}",
                "volumeAttributes": {"hostDir": str(shared)},
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "volumeName": f"pv-{node}",
            "resources": {"requests": {"storage": "1Gi"}},
        },
        "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}},
    }
    driver = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": DRIVER},
        "spec": {"attachRequired": False},
    }
    return [
        ("/api/v1/namespaces/default/persistentvolumeclaims", pvc),
        ("/api/v1/persistentvolumes", pv),
        ("/apis/storage.k8s.io/v1/csidrivers", driver),
    ]


def claim_pod(name: str, node: str, command: str) -> dict[str, Any]:
    body = pod(name, node, Path("/"), command)
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    return body


async def test_a_claim_on_a_csi_volume_outlives_its_pods_and_a_killed_kubelet(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    """A pod writes to its claim's CSI volume (staged, then bind-mounted by the driver)
    and goes; the next pod reads the file back. The kubelet SIGKILLed and started again
    keeps that pod running with its mount: nothing is unpublished or unstaged."""
    url, node, procs = cluster
    runtime, _ = cri
    shared = short_tmp / "shared"
    shared.mkdir()
    driver = FakeCsiDriver(short_tmp / "csi.sock", DRIVER, node_id=node, mode="bind", stage=True)
    registrar = FakeRegistrar(short_tmp / "root" / "plugins_registry", DRIVER, str(driver.path))
    async with (
        httpx.AsyncClient(base_url=url, timeout=10) as api,
        driver.serve(),
        registrar.serve(),
    ):
        with trio.fail_after(30):
            while registrar.registered is not True:
                await trio.sleep(0.2)
        # the PV's claimRef needs the claim's uid
        path, pvc = claim_objects(node, shared)[0]
        r = await api.post(path, json=pvc)
        assert r.status_code == 201, r.text
        for path, body in claim_objects(node, shared)[1:]:
            if body["kind"] == "PersistentVolume":
                body["spec"]["claimRef"]["uid"] = r.json()["metadata"]["uid"]
            created = await api.post(path, json=body)
            assert created.status_code == 201, created.text
        write = f"echo written-by-writer > /data/msg; {LOOP}"
        r = await api.post("/api/v1/namespaces/default/pods", json=claim_pod("writer", node, write))
        assert r.status_code == 201, r.text
        writer = await running(runtime, "writer")
        target = (
            short_tmp
            / "root/pods"
            / writer.labels[labels.POD_UID]
            / "volumes/kubernetes.io~csi/data/mount"
        )
        assert is_mount_point(str(target))
        assert len(driver.requests("NodeStageVolume")) == 1
        with trio.fail_after(10):
            while not (shared / "msg").exists():
                await trio.sleep(0.1)
        await deleted(api, "writer")
        with trio.fail_after(30):
            while driver.staged:
                await trio.sleep(0.2)
        assert driver.published == {}
        r = await api.post("/api/v1/namespaces/default/pods", json=claim_pod("reader", node, LOOP))
        assert r.status_code == 201, r.text
        reader = await running(runtime, "reader")
        out = await runtime.exec_sync(reader.id, ["cat", "/data/msg"], timeout=5)
        assert out.stdout.decode() == "written-by-writer\n"
        # the kubelet killed and started again: the pod and its mount stay
        unpublished = len(driver.requests("NodeUnpublishVolume"))
        unstaged = len(driver.requests("NodeUnstageVolume"))
        kubelet = procs.procs[-1]
        args = [str(a) for a in kubelet.args]  # type: ignore[union-attr]
        kubelet.send_signal(signal.SIGKILL)
        kubelet.wait(timeout=10)
        log_file = short_tmp / "kubelet-restarted.log"
        procs.start(args, log_file)
        with trio.fail_after(60):
            while "started: node" not in log_file.read_text(errors="replace"):
                await trio.sleep(0.05)
        await trio.sleep(15)  # a few syncs and housekeepings of the new kubelet
        (still,) = [
            c
            for c in await runtime.list_containers(labels={labels.POD_NAME: "reader"})
            if c.state == 1
        ]
        assert still.id == reader.id
        reader_target = (
            short_tmp
            / "root/pods"
            / reader.labels[labels.POD_UID]
            / "volumes/kubernetes.io~csi/data/mount"
        )
        assert is_mount_point(str(reader_target))
        assert len(driver.requests("NodeUnpublishVolume")) == unpublished
        assert len(driver.requests("NodeUnstageVolume")) == unstaged
        out = await runtime.exec_sync(reader.id, ["cat", "/data/msg"], timeout=5)
        assert out.stdout.decode() == "written-by-writer\n"
        await deleted(api, "reader")
        with trio.fail_after(30):
            while driver.published or driver.staged:
                await trio.sleep(0.2)
