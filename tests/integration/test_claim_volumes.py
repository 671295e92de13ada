"""persistentVolumeClaim and generic ephemeral volumes through the whole kubelet, joined
to a FakeApiServer holding the claims and their PersistentVolumes (fake clock)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.testing import FakeApiServer, FakeRuntime

from .cluster_harness import Cluster, running_cluster, start_cluster_kubelet
from .kubelet_harness import KUBELET_IMAGES, NODE


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def make_claim(
    api: FakeApiServer,
    name: str,
    *,
    volume: str = "",
    phase: str = "Bound",
    owner: str | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner, "controller": True}
        ]
    return api.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": metadata,
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": volume},
            "status": {"phase": phase},
        }
    )


def make_volume(
    api: FakeApiServer,
    name: str,
    claim: dict[str, Any] | None,
    source: dict[str, Any],
    *,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    affinity: dict[str, Any] | None = None,
) -> None:
    spec: dict[str, Any] = {"accessModes": list(modes), **source}
    if claim is not None:
        meta = claim["metadata"]
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        }
    if affinity is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [affinity]}}
    api.create(
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}
    )


def bound_host_path(c: Cluster, claim: str, pv: str, path: Path, **kw: Any) -> dict[str, Any]:
    """A claim bound to a hostPath PersistentVolume at ``path``."""
    pvc = make_claim(c.api, claim, volume=pv)
    make_volume(c.api, pv, pvc, {"hostPath": {"path": str(path), "type": "Directory"}}, **kw)
    return pvc


def claim_pod(c: Cluster, name: str, source: dict[str, Any], read_only: bool = False) -> None:
    c.create_pod(
        name,
        volumes=[{"name": "data", **source}],
        containers=[
            {
                "name": "app",
                "image": "busybox:1.35",
                "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": read_only}],
            }
        ],
    )


def failed_mounts(c: Cluster, pod: str, reason: str = "FailedMount") -> list[str]:
    return [
        str(e["message"])
        for e in c.api.list("events", "default")
        if e.get("reason") == reason and e["involvedObject"]["name"] == pod
    ]


def not_processed(why: str) -> str:
    return (
        "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], "
        f"failed to process volumes=[data]: {why}"
    )


def data_mount(fake: FakeRuntime, pod: str) -> Any:
    (container,) = [
        c for c in fake.running() if c.config.labels.get("io.kubernetes.pod.name") == pod
    ]
    (mount,) = [m for m in container.config.mounts if m.container_path == "/data"]
    return mount


async def test_a_claim_is_waited_for_until_it_exists_and_is_bound(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    disk = short_tmp / "disk"
    disk.mkdir()
    async with running_cluster(fake, short_tmp) as c:
        claim_pod(c, "app", {"persistentVolumeClaim": {"claimName": "data"}})
        missing = not_processed(
            "error processing PVC default/data: failed to fetch PVC from API server: "
            'persistentvolumeclaims "data" not found'
        )
        await c.wait_for(lambda: missing in failed_mounts(c, "app"), timeout=30)
        pvc = make_claim(c.api, "data", phase="Pending")
        unbound = not_processed("error processing PVC default/data: PVC is not bound")
        await c.wait_for(lambda: unbound in failed_mounts(c, "app"), timeout=30)
        assert not fake.sandboxes  # nothing is asked of the runtime meanwhile
        pvc["spec"]["volumeName"] = "pv-1"
        c.api.update(pvc)
        pvc = c.api.update_status("persistentvolumeclaims", "default", "data", {"phase": "Bound"})
        make_volume(c.api, "pv-1", None, {"hostPath": {"path": str(disk)}})
        nil_ref = not_processed(
            "error processing PVC default/data: found PV object pv-1 but it has a nil "
            "pv.Spec.ClaimRef indicating it is not yet bound to the claim"
        )
        await c.wait_for(lambda: nil_ref in failed_mounts(c, "app"), timeout=30)
        c.api.delete("persistentvolumes", None, "pv-1")
        make_volume(c.api, "pv-1", pvc, {"hostPath": {"path": str(disk)}})
        await c.wait_for(lambda: c.phase("app") == "Running", timeout=60)
        mount = data_mount(fake, "app")
        assert mount.host_path == str(disk) and not mount.readonly


async def test_a_claim_being_deleted_is_refused(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        pvc = bound_host_path(c, "data", "pv-1", short_tmp)
        pvc["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
        c.api.update(pvc)
        held = c.api.delete("persistentvolumeclaims", "default", "data")
        assert held is not None and held["metadata"].get("deletionTimestamp")
        claim_pod(c, "app", {"persistentVolumeClaim": {"claimName": "data"}})
        deleted = not_processed("error processing PVC default/data: PVC is being deleted")
        await c.wait_for(lambda: deleted in failed_mounts(c, "app"), timeout=30)
        assert c.phase("app") == "Pending" and not fake.sandboxes


async def test_a_volume_bound_to_another_claim_is_refused(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        make_claim(c.api, "data", volume="pv-1")
        other = make_claim(c.api, "other", volume="pv-1")
        make_volume(c.api, "pv-1", other, {"hostPath": {"path": str(short_tmp)}})
        claim_pod(c, "app", {"persistentVolumeClaim": {"claimName": "data"}})
        mine = c.api.get("persistentvolumeclaims", "default", "data")
        assert mine is not None
        wrong = not_processed(
            "error processing PVC default/data: found PV object pv-1 but its "
            f"pv.Spec.ClaimRef.UID {other['metadata']['uid']} does not point to claim.UID "
            f"{mine['metadata']['uid']}"
        )
        await c.wait_for(lambda: wrong in failed_mounts(c, "app"), timeout=30)
        assert not fake.sandboxes


async def test_a_read_only_claim_is_mounted_read_only(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        bound_host_path(c, "data", "pv-1", short_tmp)
        claim_pod(c, "app", {"persistentVolumeClaim": {"claimName": "data", "readOnly": True}})
        await c.wait_for(lambda: c.phase("app") == "Running", timeout=60)
        assert data_mount(fake, "app").readonly
        # a volume that can only be read is read-only whatever the pod says
        bound_host_path(c, "shared", "pv-2", short_tmp, modes=("ReadOnlyMany",))
        claim_pod(c, "reader", {"persistentVolumeClaim": {"claimName": "shared"}})
        await c.wait_for(lambda: c.phase("reader") == "Running", timeout=60)
        assert data_mount(fake, "reader").readonly


async def test_a_local_volume_for_another_node_is_refused(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        here = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                      "values": [NODE]}]}  # fmt: skip
        there = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                       "values": ["elsewhere"]}]}  # fmt: skip
        pvc = make_claim(c.api, "far", volume="pv-far")
        make_volume(c.api, "pv-far", pvc, {"local": {"path": str(short_tmp)}}, affinity=there)
        claim_pod(c, "far", {"persistentVolumeClaim": {"claimName": "far"}})
        refused = (
            'MountVolume.NodeAffinity check failed for volume "pv-far" : '
            "no matching NodeSelectorTerms"
        )
        await c.wait_for(lambda: refused in failed_mounts(c, "far"), timeout=30)
        pvc = make_claim(c.api, "gone", volume="pv-gone")
        make_volume(
            c.api, "pv-gone", pvc, {"local": {"path": str(short_tmp / "gone")}}, affinity=here
        )
        claim_pod(c, "gone", {"persistentVolumeClaim": {"claimName": "gone"}})
        missing = (
            'MountVolume.NewMounter initialization failed for volume "pv-gone" : '
            f'path "{short_tmp / "gone"}" does not exist'
        )
        await c.wait_for(lambda: missing in failed_mounts(c, "gone"), timeout=30)
        (short_tmp / "gone").mkdir()
        await c.wait_for(lambda: c.phase("gone") == "Running", timeout=60)
        assert data_mount(fake, "gone").host_path == str(short_tmp / "gone")
        assert c.phase("far") == "Pending"


async def test_a_read_write_once_pod_volume_serves_one_pod_of_the_node(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        bound_host_path(c, "data", "pv-1", short_tmp, modes=("ReadWriteOncePod",))
        claim_pod(c, "first", {"persistentVolumeClaim": {"claimName": "data"}})
        await c.wait_for(lambda: c.phase("first") == "Running", timeout=60)
        claim_pod(c, "second", {"persistentVolumeClaim": {"claimName": "data"}})
        in_use = (
            'MountVolume.SetUp failed for volume "pv-1" : volume uses the ReadWriteOncePod '
            "access mode and is already in use by another pod"
        )
        await c.wait_for(lambda: in_use in failed_mounts(c, "second"), timeout=30)
        assert c.phase("second") == "Pending"
        c.api.delete("pods", "default", "first", grace=0)
        await c.wait_for(lambda: c.phase("second") == "Running", timeout=120)


async def test_other_volume_sources_are_refused_by_name(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        pvc = make_claim(c.api, "nfs", volume="pv-nfs")
        make_volume(c.api, "pv-nfs", pvc, {"nfs": {"server": "10.0.0.1", "path": "/x"}})
        claim_pod(c, "nfs", {"persistentVolumeClaim": {"claimName": "nfs"}})
        nfs = not_processed(
            'failed to get Plugin from volumeSpec for volume "pv-nfs" err=no volume plugin '
            "matched: nfs volumes are not supported by this kubelet"
        )
        pvc = make_claim(c.api, "csi", volume="pv-csi")
        make_volume(
            c.api, "pv-csi", pvc, {"csi": {"driver": "ebs.csi.example.com", "volumeHandle": "h"}}
        )
        claim_pod(c, "csi", {"persistentVolumeClaim": {"claimName": "csi"}})
        csi = (
            'MountVolume.MountDevice failed for volume "pv-csi" : kubernetes.io/csi: '
            "attacher.MountDevice failed to create newCsiDriverClient: driver name "
            "ebs.csi.example.com not found in the list of registered CSI drivers"
        )
        await c.wait_for(
            lambda: nfs in failed_mounts(c, "nfs") and csi in failed_mounts(c, "csi"), timeout=30
        )
        assert not fake.sandboxes


EPHEMERAL = {
    "ephemeral": {
        "volumeClaimTemplate": {
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            }
        }
    }
}


async def test_an_ephemeral_volume_waits_for_the_claim_the_pod_owns(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        claim_pod(c, "owned", EPHEMERAL)
        claim_pod(c, "stolen", EPHEMERAL)
        missing = not_processed(
            "error processing PVC default/owned-data: failed to fetch PVC from API server: "
            'persistentvolumeclaims "owned-data" not found'
        )
        await c.wait_for(lambda: missing in failed_mounts(c, "owned"), timeout=30)
        owned = c.pod("owned")
        assert owned is not None
        pvc = make_claim(c.api, "owned-data", volume="pv-1", owner=owned["metadata"]["uid"])
        make_volume(c.api, "pv-1", pvc, {"hostPath": {"path": str(short_tmp)}})
        pvc = make_claim(c.api, "stolen-data", volume="pv-2", owner="someone-else")
        make_volume(c.api, "pv-2", pvc, {"hostPath": {"path": str(short_tmp)}})
        await c.wait_for(lambda: c.phase("owned") == "Running", timeout=60)
        stolen = not_processed(
            "PVC default/stolen-data was not created for pod default/stolen (pod is not owner)"
        )
        await c.wait_for(lambda: stolen in failed_mounts(c, "stolen"), timeout=30)
        assert data_mount(fake, "owned").host_path == str(short_tmp)


async def test_a_restarted_kubelet_keeps_the_claim_pod_running(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    disk = short_tmp / "disk"
    disk.mkdir()
    async with running_cluster(fake, short_tmp) as c:
        bound_host_path(c, "data", "pv-1", disk, modes=("ReadWriteOncePod",))
        claim_pod(c, "app", {"persistentVolumeClaim": {"claimName": "data"}})
        await c.wait_for(lambda: c.phase("app") == "Running", timeout=60)
        (before,) = fake.running()
        assert c.scope is not None
        c.scope.cancel()
        await trio.sleep(1)
        await start_cluster_kubelet(c)
        claim_pod(c, "late", {"persistentVolumeClaim": {"claimName": "data"}})
        in_use = (
            'MountVolume.SetUp failed for volume "pv-1" : volume uses the ReadWriteOncePod '
            "access mode and is already in use by another pod"
        )  # the new kubelet knows what the last one mounted
        await c.wait_for(lambda: in_use in failed_mounts(c, "late"), timeout=30)
        await trio.sleep(30)
        (after,) = fake.running()
        assert after.id == before.id and c.phase("app") == "Running"
        assert data_mount(fake, "app").host_path == str(disk)


def device_pod(c: Cluster, name: str, claim: str, read_only: bool = False) -> dict[str, Any]:
    return c.create_pod(
        name,
        volumes=[
            {"name": "disk", "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}}
        ],
        containers=[
            {
                "name": "app",
                "image": "busybox:1.35",
                "volumeDevices": [{"name": "disk", "devicePath": "/dev/xvdf"}],
            }
        ],
    )


def block_volume(c: Cluster, claim: str, pv: str, source: dict[str, Any]) -> None:
    pvc = make_claim(c.api, claim, volume=pv)
    make_volume(c.api, pv, pvc, {"volumeMode": "Block", **source})


async def test_a_local_block_volume_is_the_containers_device_and_host_path_is_refused(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    device = short_tmp / "disk0"
    os.mknod(device, stat.S_IFBLK | 0o600, os.makedev(7, 250))  # never opened
    async with running_cluster(fake, short_tmp) as c:
        block_volume(c, "disk", "pv-disk", {"local": {"path": str(device)}})
        uid = device_pod(c, "raw", "disk", read_only=True)["metadata"]["uid"]
        await c.wait_for(lambda: c.phase("raw") == "Running", timeout=60)
        link = c.tmp / "root/pods" / uid / "volumeDevices/kubernetes.io~local-volume/pv-disk"
        assert os.readlink(link) == str(device)
        (container,) = fake.running()
        assert [
            (d.container_path, d.host_path, d.permissions) for d in container.config.devices
        ] == [("/dev/xvdf", str(link), "r")]
        # a local volume whose path is no block device, and a hostPath one: refused
        block_volume(c, "dir", "pv-dir", {"local": {"path": str(short_tmp)}})
        device_pod(c, "on-dir", "dir")
        not_block = (
            f'MapVolume.MapPodDevice failed for volume "pv-dir" : path "{short_tmp}" is not '
            "a block device"
        )
        await c.wait_for(
            lambda: not_block in failed_mounts(c, "on-dir", "FailedMapVolume"), timeout=30
        )
        block_volume(c, "host", "pv-host", {"hostPath": {"path": str(device)}})
        device_pod(c, "on-host", "host")
        no_mapper = (
            "MapVolume.FindMapperPluginBySpec failed to find BlockVolumeMapper plugin. "
            'Volume plugin is nil. for volume "pv-host"'
        )
        await c.wait_for(
            lambda: no_mapper in failed_mounts(c, "on-host", "FailedMapVolume"), timeout=30
        )
        assert c.phase("on-dir") == c.phase("on-host") == "Pending"
        c.api.delete("pods", "default", "raw", grace=0)
        await c.wait_for(lambda: not os.path.lexists(link), timeout=60)
        assert device.exists()  # the device itself is the node's, left alone
