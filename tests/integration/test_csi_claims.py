"""A PersistentVolumeClaim bound to a CSI PersistentVolume through the whole kubelet:
FakeApiServer holds the claim, its volume, the CSIDriver and the VolumeAttachment;
FakeCsiDriver registers through ``plugins_registry`` (fake clock)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from grpclib.const import Status
from prometheus_client.parser import text_string_to_metric_families

from kubelet.testing import FakeApiServer, FakeRuntime
from kubelet.testing.fakecsi import FakeCsiDriver, FakeRegistrar
from kubelet.volumes.csi import attachment_name, global_dir

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES, NODE

DRIVER = "pd.csi.example"
HANDLE = "vol-7"


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def csi_claim(
    api: FakeApiServer, *, size: str = "1Gi", volume_mode: str = "Filesystem", **csi: Any
) -> dict[str, Any]:
    """The claim ``data`` bound to the CSI PersistentVolume ``pv-data``, its CSIDriver
    (attachment required) and the attach/detach controller's VolumeAttachment."""
    pvc = api.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "volumeName": "pv-data",
                "volumeMode": volume_mode,
                "resources": {"requests": {"storage": size}},
            },
            "status": {"phase": "Bound", "capacity": {"storage": size}},
        }
    )
    meta = pvc["metadata"]
    api.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": size},
                "volumeMode": volume_mode,
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "namespace": "default",
                    "name": "data",
                    "uid": meta["uid"],
                },
                "csi": {"driver": DRIVER, "volumeHandle": HANDLE, "fsType": "ext4", **csi},
            },
        }
    )
    api.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": DRIVER},
            "spec": {"attachRequired": True},
        }
    )
    api.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": attachment_name(HANDLE, DRIVER, NODE)},
            "spec": {
                "attacher": DRIVER,
                "nodeName": NODE,
                "source": {"persistentVolumeName": "pv-data"},
            },
            "status": {"attached": True, "attachmentMetadata": {"devicePath": "/dev/vdb"}},
        }
    )
    return pvc


def claim_pod(c: Cluster, name: str) -> dict[str, Any]:
    return c.create_pod(
        name,
        volumes=[{"name": "store", "persistentVolumeClaim": {"claimName": "data"}}],
        containers=[
            {
                "name": "app",
                "image": "busybox:1.35",
                "volumeMounts": [{"name": "store", "mountPath": "/store"}],
            }
        ],
    )


async def registered(c: Cluster, driver: FakeCsiDriver) -> FakeRegistrar:
    registrar = FakeRegistrar(c.tmp / "root" / "plugins_registry", driver.name, str(driver.path))
    await registrar.start()
    await c.wait_for(lambda: registrar.registered is True)
    return registrar


def target(c: Cluster, uid: str) -> str:
    return str(c.tmp / "root/pods" / uid / "volumes/kubernetes.io~csi/store/mount")


async def read_only_port(c: Cluster, path: str) -> httpx.Response:
    assert c.components is not None and c.components.addresses is not None
    async with httpx.AsyncClient() as client:
        return await client.get(f"http://{c.components.addresses.read_only}{path}")


def claim_gauges(text: str) -> dict[str, float]:
    return {
        s.name: s.value
        for f in text_string_to_metric_families(text)
        if f.name.startswith("kubelet_volume_stats_")
        for s in f.samples
        if s.labels == {"namespace": "default", "persistentvolumeclaim": "data"}
    }


async def test_a_claim_on_a_csi_volume_is_staged_published_measured_and_torn_down(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp, extra=["--read-only-port=10255"]) as c:
        csi_claim(c.api)
        driver = FakeCsiDriver(short_tmp / "pd.sock", DRIVER, stage=True)
        async with driver.serve():
            registrar = await registered(c, driver)
            first = claim_pod(c, "first")["metadata"]["uid"]
            await c.wait_for(lambda: c.phase("first") == "Running", timeout=60)
            staging = f"{global_dir(str(short_tmp / 'root'), DRIVER, HANDLE)}/globalmount"
            (stage,) = driver.requests("NodeStageVolume")
            assert (stage.volume_id, stage.staging_target_path) == (HANDLE, staging)
            assert stage.publish_context == {"devicePath": "/dev/vdb"}
            (publish,) = driver.requests("NodePublishVolume")
            assert (publish.target_path, publish.staging_target_path) == (target(c, first), staging)
            (container,) = c.running_containers()
            assert ("/store", target(c, first)) in [
                (m.container_path, m.host_path) for m in container.config.mounts
            ]
            in_use = f"kubernetes.io/csi/{DRIVER}^{HANDLE}"
            await c.wait_for(
                lambda: (
                    in_use
                    in ((c.api.get("nodes", "", NODE) or {}).get("status") or {}).get(
                        "volumesInUse", []
                    )
                )
            )
            # the summary's row and /metrics come from the driver's figures
            await trio.sleep(70)  # a volume stats period
            summary = (await read_only_port(c, "/stats/summary")).json()
            (pod,) = [p for p in summary["pods"] if p["podRef"]["name"] == "first"]
            (row,) = [v for v in pod["volume"] if v["name"] == "store"]
            assert row["pvcRef"] == {"name": "data", "namespace": "default"}
            assert (row["capacityBytes"], row["availableBytes"], row["usedBytes"]) == (
                1 << 30,
                1 << 29,
                1 << 29,
            )
            gauges = claim_gauges((await read_only_port(c, "/metrics")).text)
            assert gauges["kubelet_volume_stats_capacity_bytes"] == 1 << 30
            assert gauges["kubelet_volume_stats_inodes_used"] == 100
            # the pod goes: unpublished, then unstaged (no other pod publishes it)
            c.api.delete("pods", "default", "first", grace=0)
            await c.wait_for(lambda: bool(driver.requests("NodeUnstageVolume")), timeout=60)
            (unpublish,) = driver.requests("NodeUnpublishVolume")
            assert unpublish.target_path == target(c, first)
            assert driver.published == {} and driver.staged == {}
            # another pod gets the same volume, staged and published again
            second = claim_pod(c, "second")["metadata"]["uid"]
            await c.wait_for(lambda: c.phase("second") == "Running", timeout=60)
            assert len(driver.requests("NodeStageVolume")) == 2
            assert driver.published == {target(c, second): HANDLE}
            c.api.delete("pods", "default", "second", grace=0)
            await c.wait_for(lambda: len(driver.requests("NodeUnstageVolume")) == 2, timeout=60)
            await registrar.stop()


async def summary_and_gauges(c: Cluster) -> tuple[dict[str, Any], dict[str, float]]:
    summary = (await read_only_port(c, "/stats/summary")).json()
    (pod,) = [p for p in summary["pods"] if p["podRef"]["name"] == "first"]
    (row,) = [v for v in pod["volume"] if v["name"] == "store"]
    return row, claim_gauges((await read_only_port(c, "/metrics")).text)


@pytest.mark.parametrize("gate", [True, False])
async def test_a_drivers_volume_condition_is_reported_with_the_csi_volume_health_gate(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock, gate: bool
) -> None:
    extra = ["--read-only-port=10255", f"--feature-gates=CSIVolumeHealth={str(gate).lower()}"]
    async with running_cluster(fake, short_tmp, extra=extra) as c:
        csi_claim(c.api)
        driver = FakeCsiDriver(short_tmp / "pd.sock", DRIVER, condition=(True, "disk gone"))
        async with driver.serve():
            registrar = await registered(c, driver)
            claim_pod(c, "first")
            await c.wait_for(lambda: c.phase("first") == "Running", timeout=60)
            await trio.sleep(70)
            row, gauges = await summary_and_gauges(c)
            abnormal = "kubelet_volume_stats_health_status_abnormal"
            if not gate:  # upstream's default: no condition anywhere
                assert "volumeHealthStats" not in row and abnormal not in gauges
                await registrar.stop()
                return
            assert row["volumeHealthStats"] == {"abnormal": True}
            assert gauges[abnormal] == 1
            driver.condition = (False, "fine")
            await trio.sleep(70)
            row, gauges = await summary_and_gauges(c)
            assert row["volumeHealthStats"] == {"abnormal": False}
            assert gauges[abnormal] == 0
            driver.condition = None  # a driver without VOLUME_CONDITION: not reported
            await trio.sleep(70)
            row, gauges = await summary_and_gauges(c)
            assert "volumeHealthStats" not in row and abnormal not in gauges
            await registrar.stop()


def grow(c: Cluster, size: str, resize_status: str) -> None:
    """The external resizer's part: the volume grown, the claim waiting for the node."""
    c.api.patch("persistentvolumes", None, "pv-data", {"spec": {"capacity": {"storage": size}}})
    c.api.patch(
        "persistentvolumeclaims",
        "default",
        "data",
        {"spec": {"resources": {"requests": {"storage": size}}}},
    )

    def status(current: dict[str, Any]) -> None:
        current["conditions"] = [
            {"type": "FileSystemResizePending", "status": "True"},
            {"type": "ModifyingVolume", "status": "True"},
        ]
        if resize_status:
            current["allocatedResourceStatuses"] = {"storage": resize_status}

    c.api.update_status("persistentvolumeclaims", "default", "data", status)


@pytest.mark.parametrize("expand", [True, False])
async def test_a_grown_claim_is_expanded_on_the_node_and_its_status_follows(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock, expand: bool
) -> None:
    async with running_cluster(fake, short_tmp, extra=["--read-only-port=10255"]) as c:
        csi_claim(c.api)
        driver = FakeCsiDriver(short_tmp / "pd.sock", DRIVER, stage=True, expand=expand)
        async with driver.serve():
            registrar = await registered(c, driver)
            uid = claim_pod(c, "first")["metadata"]["uid"]
            await c.wait_for(lambda: c.phase("first") == "Running", timeout=60)
            await trio.sleep(120)
            assert driver.requests("NodeExpandVolume") == []  # nothing grew
            reads = c.api.count("get", "persistentvolumeclaims")
            assert reads > 0  # read when the volume was set up
            grow(c, "2Gi", "NodeResizePending")
            await trio.sleep(120)  # a pod sync or two
            claim = c.api.get("persistentvolumeclaims", "default", "data") or {}
            if not expand:  # the driver cannot: nothing asked, the claim as it was
                assert driver.requests("NodeExpandVolume") == []
                assert c.api.count("get", "persistentvolumeclaims") == reads  # not even read
                assert claim["status"]["capacity"] == {"storage": "1Gi"}
                assert claim["status"]["allocatedResourceStatuses"] == {
                    "storage": "NodeResizePending"
                }
                await registrar.stop()
                return
            (request,) = driver.requests("NodeExpandVolume")
            assert request.volume_id == HANDLE
            assert request.volume_path == target(c, uid)
            assert request.staging_target_path == (
                f"{global_dir(str(short_tmp / 'root'), DRIVER, HANDLE)}/globalmount"
            )
            assert request.capacity_range.required_bytes == 2 << 30
            assert request.volume_capability.mount.fs_type == "ext4"
            assert claim["status"]["capacity"] == {"storage": "2Gi"}
            assert "storage" not in (claim["status"].get("allocatedResourceStatuses") or {})
            assert [x["type"] for x in claim["status"]["conditions"]] == ["ModifyingVolume"]
            row, _ = await summary_and_gauges(c)
            assert row["capacityBytes"] == 2 << 30
            succeeded = f'MountVolume.NodeExpandVolume succeeded for volume "pv-data" {NODE}'
            assert sorted(
                e["involvedObject"]["kind"]
                for e in c.api.list("events", "default")
                if e.get("reason") == "FileSystemResizeSuccessful" and e["message"] == succeeded
            ) == ["PersistentVolumeClaim", "Pod"]
            # grown again by a resizer that finishes on its own: not the node's business
            grow(c, "3Gi", "")
            await trio.sleep(120)
            assert len(driver.requests("NodeExpandVolume")) == 1
            # a driver that fails: a warning, the claim waits, the next syncs try again
            driver.faults.fail["NodeExpandVolume"] = (Status.RESOURCE_EXHAUSTED, "pool full")
            grow(c, "4Gi", "NodeResizePending")
            await trio.sleep(120)
            assert len(driver.requests("NodeExpandVolume")) >= 3
            failed = (
                'MountVolume.NodeExpandVolume failed for volume "pv-data" : rpc error: '
                "code = ResourceExhausted desc = pool full"
            )
            assert failed in [
                e["message"]
                for e in c.api.list("events", "default")
                if e.get("reason") == "FileSystemResizeFailed"
            ]
            claim = c.api.get("persistentvolumeclaims", "default", "data") or {}
            assert claim["status"]["capacity"] == {"storage": "2Gi"}
            assert c.phase("first") == "Running"
            driver.faults.fail.clear()
            await trio.sleep(120)
            claim = c.api.get("persistentvolumeclaims", "default", "data") or {}
            assert claim["status"]["capacity"] == {"storage": "4Gi"}
            await registrar.stop()


def raw_pod(c: Cluster, name: str, key: str = "volumeDevices") -> dict[str, Any]:
    entry = {"name": "store", "devicePath": "/dev/xvda"}
    if key == "volumeMounts":
        entry = {"name": "store", "mountPath": "/store"}
    return c.create_pod(
        name,
        volumes=[{"name": "store", "persistentVolumeClaim": {"claimName": "data"}}],
        containers=[{"name": "app", "image": "busybox:1.35", key: [entry]}],
    )


async def test_a_block_claim_becomes_the_containers_device_and_is_unmapped_in_order(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        csi_claim(c.api, volume_mode="Block")
        driver = FakeCsiDriver(short_tmp / "pd.sock", DRIVER, stage=True)
        async with driver.serve():
            registrar = await registered(c, driver)
            uid = raw_pod(c, "raw")["metadata"]["uid"]
            await c.wait_for(lambda: c.phase("raw") == "Running", timeout=60)
            root = c.tmp / "root"
            devices = root / "plugins/kubernetes.io/csi/volumeDevices"
            (stage,) = driver.requests("NodeStageVolume")
            assert stage.staging_target_path == str(devices / "staging/pv-data")
            assert stage.volume_capability.HasField("block")
            (publish,) = driver.requests("NodePublishVolume")
            assert publish.target_path == str(devices / "publish/pv-data" / uid)
            link = str(root / "pods" / uid / "volumeDevices/kubernetes.io~csi/pv-data")
            assert os.readlink(link) == publish.target_path
            (container,) = c.running_containers()
            assert [
                (d.container_path, d.host_path, d.permissions) for d in container.config.devices
            ] == [("/dev/xvda", link, "mrw")]
            assert "/dev/xvda" not in [m.container_path for m in container.config.mounts]
            c.api.delete("pods", "default", "raw", grace=0)
            await c.wait_for(lambda: bool(driver.requests("NodeUnstageVolume")), timeout=60)
            names = [n for n, _ in driver.calls if n.endswith("Volume")]
            assert names == [
                "NodeStageVolume",
                "NodePublishVolume",
                "NodeUnpublishVolume",
                "NodeUnstageVolume",
            ]
            assert driver.published == {} and not os.path.lexists(link)
            await registrar.stop()


@pytest.mark.parametrize(
    ("mode", "key"), [("Block", "volumeMounts"), ("Filesystem", "volumeDevices")]
)
async def test_a_claim_used_against_its_volume_mode_keeps_the_pod_waiting(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock, mode: str, key: str
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        csi_claim(c.api, volume_mode=mode)
        driver = FakeCsiDriver(short_tmp / "pd.sock", DRIVER, stage=True)
        async with driver.serve():
            registrar = await registered(c, driver)
            raw_pod(c, "raw", key)
            refused = f"volume store has volumeMode {mode}, but is specified in {key}"
            await c.wait_for(
                lambda: any(
                    e.get("reason") == "FailedMount" and refused in e["message"]
                    for e in c.api.list("events", "default")
                ),
                timeout=30,
            )
            assert c.phase("raw") == "Pending" and c.running_containers() == []
            assert driver.requests("NodeStageVolume") == driver.requests("NodePublishVolume") == []
            await registrar.stop()
