"""``CsiVolumes.publish_persistent``: a PersistentVolume's ``spec.csi`` staged, published,
waited for its VolumeAttachment, unpublished and unstaged (FakeApiServer, FakeCsiDriver)."""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.api import ApiClient, ClusterConnection, Pod, from_wire
from kubelet.csi import CsiDrivers, CsiHandler
from kubelet.stats import ClaimRecord, ReportedUsage, VolumeUsageCache, claim_record_path
from kubelet.testing import FakeApiServer
from kubelet.testing.fakecsi import FakeCsiDriver
from kubelet.volumes import CsiVolumes, VolumeError, csi_volume_stats
from kubelet.volumes.csi import attachment_name, global_dir
from kubelet.volumes.csivolumes import STATS_TIMEOUT

DRIVER = "pd.csi.example"
NODE = "node-a"


def pv(handle: str = "vol-1", **csi: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "pv-1"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": DRIVER, "volumeHandle": handle, "fsType": "ext4", **csi},
        },
    }


def pod(uid: str) -> Pod:
    return from_wire(
        Pod,
        {
            "metadata": {"name": f"p-{uid}", "namespace": "default", "uid": uid},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        },
    )


def attachment(attached: bool) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": attachment_name("vol-1", DRIVER, NODE)},
        "spec": {"attacher": DRIVER, "nodeName": NODE, "source": {"persistentVolumeName": "pv-1"}},
        "status": {"attached": attached, "attachmentMetadata": {"devicePath": "/dev/xvdb"}},
    }


@pytest.fixture
async def setup(aio_loop: None, short_tmp: Path) -> Any:
    api = FakeApiServer()
    driver = FakeCsiDriver(short_tmp / "pd.sock", DRIVER, stage=True)
    drivers = CsiDrivers()
    async with (
        api.serve(),
        driver.serve(),
        ApiClient.open(ClusterConnection(server=api.url)) as client,
    ):
        await CsiHandler(drivers, None).register(DRIVER, str(driver.path), ["1.0.0"])
        volumes = CsiVolumes(str(short_tmp / "root"), drivers, api=client, node_name=NODE)
        try:
            yield api, driver, volumes, short_tmp / "root"
        finally:
            drivers.close()


async def test_a_persistent_volume_waits_for_its_attachment_then_is_staged_and_published(
    setup: Any, autojump_clock: trio.abc.Clock
) -> None:
    api, driver, volumes, root = setup
    with pytest.raises(VolumeError, match="is not attached to the node yet"):
        await volumes.publish_persistent(pod("u1"), "data", pv(), False)
    assert driver.requests("NodeStageVolume") == []
    in_use = [f"kubernetes.io/csi/{DRIVER}^vol-1"]
    assert volumes.drivers.volumes_in_use() == in_use  # listed before it is attached
    api.create(attachment(True))
    path = await volumes.publish_persistent(pod("u1"), "data", pv(), False)
    assert path == str(root / "pods/u1/volumes/kubernetes.io~csi/data/mount")
    staging = os.path.join(global_dir(str(root), DRIVER, "vol-1"), "globalmount")
    (stage,) = driver.requests("NodeStageVolume")
    assert stage.staging_target_path == staging
    assert stage.publish_context == {"devicePath": "/dev/xvdb"}
    assert stage.volume_capability.mount.fs_type == "ext4"
    (publish,) = driver.requests("NodePublishVolume")
    assert publish.staging_target_path == staging
    assert publish.publish_context == {"devicePath": "/dev/xvdb"}
    assert "csi.storage.k8s.io/pod.name" not in publish.volume_context  # no podInfoOnMount
    data = json.loads(Path(path).parent.joinpath("vol_data.json").read_text())
    assert (data["specVolID"], data["volumeLifecycleMode"]) == ("pv-1", "Persistent")
    # a second pod publishes the same volume: staged once
    await volumes.publish_persistent(pod("u2"), "data", pv(), True)
    assert len(driver.requests("NodeStageVolume")) == 1
    assert driver.requests("NodePublishVolume")[1].readonly is True
    # the first pod goes: unpublished, still staged for the second
    assert await volumes.teardown("u1")
    assert driver.requests("NodeUnstageVolume") == []
    assert volumes.drivers.volumes_in_use() == in_use
    assert await volumes.teardown("u2")
    assert volumes.drivers.volumes_in_use() == []
    (unstage,) = driver.requests("NodeUnstageVolume")
    assert unstage.staging_target_path == staging
    assert driver.published == {} and not os.path.exists(os.path.dirname(staging))


async def test_a_restarted_kubelet_unpublishes_from_vol_data_and_waits_for_the_driver(
    setup: Any, autojump_clock: trio.abc.Clock
) -> None:
    api, driver, volumes, root = setup
    api.create(attachment(True))
    await volumes.publish_persistent(pod("u1"), "data", pv(), False)
    # a new kubelet (nothing in memory) whose driver has not registered yet
    fresh = CsiDrivers()
    restarted = CsiVolumes(str(root), fresh, api=None, node_name=NODE)
    assert restarted.has_volumes("u1")
    assert not await restarted.teardown("u1")  # kept: nothing unmounted behind the driver
    assert driver.requests("NodeUnpublishVolume") == []
    await CsiHandler(fresh, None).register(DRIVER, str(driver.path), ["1.0.0"])
    try:
        assert await restarted.teardown("u1")
    finally:
        fresh.close()
    assert len(driver.requests("NodeUnpublishVolume")) == 1
    assert len(driver.requests("NodeUnstageVolume")) == 1
    assert not restarted.has_volumes("u1")


async def test_no_csidriver_object_means_attach_required_and_volume_stats_come_from_the_driver(
    setup: Any, autojump_clock: trio.abc.Clock
) -> None:
    api, driver, volumes, _ = setup
    api.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": DRIVER},
            "spec": {"attachRequired": False, "podInfoOnMount": True},
        }
    )
    await volumes.publish_persistent(pod("u1"), "data", pv(), False)
    (publish,) = driver.requests("NodePublishVolume")
    assert publish.volume_context["csi.storage.k8s.io/ephemeral"] == "false"
    stats = await volumes.stats("u1")
    assert stats["data"].capacity_bytes == 1 << 30
    assert stats["data"].inodes_used == 100
    assert await volumes.teardown("u1")


async def test_the_volume_figures_of_a_csi_volume_are_the_drivers(
    setup: Any, autojump_clock: trio.abc.Clock
) -> None:
    api, driver, volumes, root = setup
    api.create(attachment(True))
    await volumes.publish_persistent(pod("u1"), "data", pv(), False)
    empty_dir = root / "pods/u1/volumes/kubernetes.io~empty-dir/cache"
    empty_dir.mkdir(parents=True)
    cache = VolumeUsageCache(
        str(root),
        trio.current_time,
        in_threads=False,
        reported=functools.partial(csi_volume_stats, str(root), volumes.drivers),
    )
    by_name = {v.name: v for v in await cache.pod_volumes("u1")}
    assert set(by_name) == {"data", "cache"}
    data = by_name["data"]
    assert data.reported is not None
    assert (data.reported.capacity, data.reported.available) == (1 << 30, 1 << 29)
    assert (data.usage.bytes, data.usage.inodes) == (1 << 29, 100)
    assert by_name["cache"].reported is None  # walked, as before
    # a driver without stats: the volume is left out, the others stay
    driver.stats = None
    cache = VolumeUsageCache(
        str(root),
        trio.current_time,
        in_threads=False,
        reported=functools.partial(csi_volume_stats, str(root), volumes.drivers),
    )
    assert [v.name for v in await cache.pod_volumes("u1")] == ["cache"]
    assert await volumes.teardown("u1")


class Tokens:
    async def token(
        self,
        namespace: str,
        service_account: str,
        audience: str,
        expiration_seconds: int,
        pod_name: str = "",
        pod_uid: str = "",
    ) -> tuple[str, float]:
        return f"{namespace}/{service_account}/{audience}/{pod_uid}", 1_900_000_000.0


def group_pod(uid: str, group: int) -> Pod:
    return from_wire(
        Pod,
        {
            "metadata": {"name": f"p-{uid}", "namespace": "default", "uid": uid},
            "spec": {
                "containers": [{"name": "c", "image": "i"}],
                "securityContext": {"fsGroup": group},
                "serviceAccountName": "builder",
            },
        },
    )


async def test_csidriver_republish_tokens_and_fs_group_policy(
    setup: Any, autojump_clock: trio.abc.Clock
) -> None:
    api, driver, volumes, _ = setup
    api.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": DRIVER},
            "spec": {
                "attachRequired": False,
                "requiresRepublish": True,
                "fsGroupPolicy": "File",
                "tokenRequests": [{"audience": "vault", "expirationSeconds": 600}],
            },
        }
    )
    volumes.tokens = Tokens()
    path = await volumes.publish_persistent(group_pod("u1", 4321), "data", pv(), False)
    assert os.stat(path).st_gid == 4321  # File: the fsGroup whatever the fsType and modes
    await volumes.publish_persistent(group_pod("u1", 4321), "data", pv(), False)
    _, second = driver.requests("NodePublishVolume")  # published again: requiresRepublish
    tokens = json.loads(second.volume_context["csi.storage.k8s.io/serviceAccount.tokens"])
    assert tokens == {
        "vault": {
            "token": "default/builder/vault/u1",
            "expirationTimestamp": "2030-03-17T17:46:40Z",
        }
    }
    assert await volumes.teardown("u1")


async def test_fs_group_policy_none_leaves_the_volume_alone(
    setup: Any, autojump_clock: trio.abc.Clock
) -> None:
    api, driver, volumes, _ = setup
    api.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": DRIVER},
            "spec": {"attachRequired": False, "fsGroupPolicy": "None"},
        }
    )
    path = await volumes.publish_persistent(group_pod("u1", 4321), "data", pv(), False)
    assert os.stat(path).st_gid != 4321
    # and published once only (no requiresRepublish)
    await volumes.publish_persistent(group_pod("u1", 4321), "data", pv(), False)
    assert len(driver.requests("NodePublishVolume")) == 1
    assert await volumes.teardown("u1")


async def test_a_claims_csi_volume_carries_its_claim_and_the_drivers_figures(
    setup: Any, autojump_clock: trio.abc.Clock
) -> None:
    """What /stats/summary's pvcRef rows and kubelet_volume_stats_* are made of."""
    api, _, volumes, root = setup
    api.create(attachment(True))
    claimed = from_wire(
        Pod,
        {
            "metadata": {"name": "db", "namespace": "shop", "uid": "u1"},
            "spec": {
                "containers": [{"name": "c", "image": "i"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "db-data"}}],
            },
        },
    )
    path = await volumes.publish_persistent(claimed, "data", pv(), False)
    record = ClaimRecord("data", "db-data", "shop", "pv-1", "kubernetes.io~csi", path)
    target = claim_record_path(str(root / "pods" / "u1"), "data")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as fh:
        fh.write(record.to_json())
    cache = VolumeUsageCache(
        str(root),
        trio.current_time,
        in_threads=False,
        reported=functools.partial(csi_volume_stats, str(root), volumes.drivers),
    )
    (volume,) = await cache.pod_volumes("u1")
    assert (volume.name, volume.plugin, volume.pvc) == (
        "data",
        "kubernetes.io~csi",
        ("db-data", "shop"),
    )
    assert volume.reported == ReportedUsage(1 << 30, 1 << 29, 1 << 29, 1000, 900, 100)
    assert await volumes.teardown("u1")


async def test_a_driver_that_never_answers_volume_stats_holds_the_figures_one_deadline(
    setup: Any, autojump_clock: trio.abc.Clock
) -> None:
    api, driver, volumes, root = setup
    api.create(attachment(True))
    await volumes.publish_persistent(pod("u1"), "data", pv(), False)
    published = root / "pods/u1/volumes/kubernetes.io~csi"
    for name in ("data2", "data3", "data4"):
        (published / name).mkdir()
        shutil.copy(published / "data" / "vol_data.json", published / name / "vol_data.json")
    assert len(await volumes.stats("u1")) == 4
    driver.faults.hang = True
    started = trio.current_time()
    assert await volumes.stats("u1") == {}
    assert trio.current_time() - started <= STATS_TIMEOUT + 1
    driver.faults.hang = False
    assert await volumes.teardown("u1")


async def test_a_restarted_kubelet_expands_a_volume_an_earlier_one_published(
    setup: Any, autojump_clock: trio.abc.Clock
) -> None:
    api, driver, volumes, root = setup
    driver.expand = True
    api.create(attachment(True))
    grown = pv()
    grown["spec"]["capacity"] = {"storage": "1Gi"}
    await volumes.publish_persistent(pod("u1"), "data", grown, False)
    claim = api.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"resources": {"requests": {"storage": "2Gi"}}},
            "status": {
                "capacity": {"storage": "1Gi"},
                "allocatedResourceStatuses": {"storage": "NodeResizePending"},
            },
        }
    )
    grown["spec"]["capacity"] = {"storage": "2Gi"}
    restarted = CsiVolumes(str(root), volumes.drivers, api=volumes.api, node_name=NODE)
    assert not await restarted.expand_claim(pod("u2"), "data", claim, grown)  # not published
    assert await restarted.expand_claim(pod("u1"), "data", claim, grown)
    (request,) = driver.requests("NodeExpandVolume")
    assert request.capacity_range.required_bytes == 2 << 30
    status = (api.get("persistentvolumeclaims", "default", "db") or {})["status"]
    assert status["capacity"] == {"storage": "2Gi"}
    assert "allocatedResourceStatuses" not in status or not status["allocatedResourceStatuses"]
    assert await restarted.teardown("u1")


def block_pv() -> dict[str, Any]:
    volume = pv()
    volume["spec"]["volumeMode"] = "Block"
    return volume


async def test_a_block_volume_is_staged_published_as_a_device_and_unmapped_in_order(
    setup: Any, autojump_clock: trio.abc.Clock
) -> None:
    api, driver, volumes, root = setup
    api.create(attachment(True))
    devices = root / "plugins/kubernetes.io/csi/volumeDevices"
    link = await volumes.block.map(pod("u1"), "data", block_pv(), False)
    assert link == str(root / "pods/u1/volumeDevices/kubernetes.io~csi/pv-1")
    published = str(devices / "publish/pv-1/u1")
    assert os.readlink(link) == published
    assert Path(published).read_text() == "vol-1"  # the driver's "device"
    (stage,) = driver.requests("NodeStageVolume")
    assert stage.staging_target_path == str(devices / "staging/pv-1")
    assert stage.volume_capability.HasField("block")
    assert stage.publish_context == {"devicePath": "/dev/xvdb"}
    (publish,) = driver.requests("NodePublishVolume")
    assert (publish.target_path, publish.staging_target_path) == (
        published,
        str(devices / "staging/pv-1"),
    )
    assert publish.volume_capability.HasField("block") and not publish.readonly
    data = json.loads((devices / "pv-1/data/vol_data.json").read_text())
    assert (data["specVolID"], data["volumeHandle"], data["driverName"]) == (
        "pv-1",
        "vol-1",
        DRIVER,
    )
    assert data["attachmentID"] == attachment_name("vol-1", DRIVER, NODE)
    # a second pod: staged once, published at its own path
    await volumes.block.map(pod("u2"), "data", block_pv(), True)
    assert len(driver.requests("NodeStageVolume")) == 1
    assert driver.requests("NodePublishVolume")[1].target_path == str(devices / "publish/pv-1/u2")
    assert driver.requests("NodePublishVolume")[1].readonly is True
    # the first pod goes: unpublished, still staged for the second
    assert volumes.has_volumes("u1")
    assert await volumes.teardown("u1")
    assert not os.path.lexists(link) and not volumes.has_volumes("u1")
    assert [r.target_path for r in driver.requests("NodeUnpublishVolume")] == [published]
    assert driver.requests("NodeUnstageVolume") == []
    # a restarted kubelet (nothing in memory) tears the second down from disk
    fresh = CsiDrivers()
    restarted = CsiVolumes(str(root), fresh, api=None, node_name=NODE)
    assert restarted.has_volumes("u2")
    assert not await restarted.teardown("u2")  # its driver is not registered yet
    await CsiHandler(fresh, None).register(DRIVER, str(driver.path), ["1.0.0"])
    try:
        assert await restarted.teardown("u2")
    finally:
        fresh.close()
    names = [n for n, _ in driver.calls if n in ("NodeUnpublishVolume", "NodeUnstageVolume")]
    assert names == ["NodeUnpublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume"]
    (unstage,) = driver.requests("NodeUnstageVolume")
    assert unstage.staging_target_path == str(devices / "staging/pv-1")
    assert driver.published == {} and not os.path.exists(devices / "pv-1")
    assert not os.path.exists(devices / "publish/pv-1")
    assert not os.path.exists(devices / "staging/pv-1")
