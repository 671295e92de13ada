"""The claim checks (pure) and the volume manager's claim volumes on a fake lookup."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, Volume, VolumeMount
from kubelet.volumes import VolumeManager
from kubelet.volumes.claims import (
    claim_problem,
    claim_use,
    ephemeral_owner_problem,
    node_affinity_problem,
    only_read_write_once_pod,
    pv_source_kind,
    volume_mode_problem,
    volume_problem,
)

BOUND = {"metadata": {"uid": "c-1"}, "spec": {"volumeName": "pv"}, "status": {"phase": "Bound"}}


def pod_of(*volumes: Volume, uid: str = "pod-1", name: str = "web") -> Pod:
    mounts = tuple(VolumeMount(name=v.name, mount_path=f"/{v.name}") for v in volumes)
    return Pod(
        metadata=ObjectMeta(name=name, namespace="ns", uid=uid),
        spec=PodSpec(
            containers=(Container(name="app", image="b", volume_mounts=mounts),), volumes=volumes
        ),
    )


def test_claim_use_of_each_volume_kind() -> None:
    pod = pod_of()
    pvc = Volume(name="v", persistent_volume_claim={"claimName": "c", "readOnly": True})
    use = claim_use(pod, pvc)
    assert use is not None and (use.name, use.read_only, use.ephemeral) == ("c", True, False)
    use = claim_use(pod, Volume(name="scratch", ephemeral={"volumeClaimTemplate": {}}))
    assert use is not None and (use.name, use.ephemeral) == ("web-scratch", True)
    assert claim_use(pod, Volume(name="v", empty_dir={})) is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({}, None),
        ({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}, "PVC is being deleted"),
        ({"status": {"phase": "Pending"}}, "PVC is not bound"),
        ({"status": {}}, "PVC is not bound"),
        ({"spec": {"volumeName": ""}}, "PVC has empty pvc.Spec.VolumeName"),
    ],
)
def test_claim_problem(change: dict[str, Any], problem: str | None) -> None:
    assert claim_problem({**BOUND, **change}) == problem


def test_an_ephemeral_claim_must_be_controlled_by_the_pod() -> None:
    pod = pod_of()

    def claim(namespace: str, uid: str, controller: bool) -> dict[str, Any]:
        ref = {"kind": "Pod", "name": "web", "uid": uid, "controller": controller}
        return {"metadata": {"name": "web-v", "namespace": namespace, "ownerReferences": [ref]}}

    assert ephemeral_owner_problem(pod, claim("ns", "pod-1", True)) is None
    refused = "PVC ns/web-v was not created for pod ns/web (pod is not owner)"
    assert ephemeral_owner_problem(pod, claim("ns", "pod-1", False)) == refused
    assert ephemeral_owner_problem(pod, claim("ns", "other", True)) == refused
    assert ephemeral_owner_problem(pod, {"metadata": {"name": "web-v", "namespace": "ns"}}) == (
        refused
    )
    assert ephemeral_owner_problem(pod, claim("x", "pod-1", True)) == (
        "PVC x/web-v was not created for pod ns/web (pod is not owner)"
    )


def test_the_volume_must_point_back_at_the_claim() -> None:
    assert volume_problem({"spec": {"claimRef": {"uid": "c-1"}}}, "pv", "c-1") is None
    assert volume_problem({"spec": {}}, "pv", "c-1") == (
        "found PV object pv but it has a nil pv.Spec.ClaimRef indicating it is not yet "
        "bound to the claim"
    )
    assert volume_problem({"spec": {"claimRef": {"uid": "c-2"}}}, "pv", "c-1") == (
        "found PV object pv but its pv.Spec.ClaimRef.UID c-2 does not point to claim.UID c-1"
    )


def test_node_affinity_of_a_volume() -> None:
    def pv(*terms: Any) -> dict[str, Any]:
        return {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": list(terms)}}}}

    zone_a = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    zone_b = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    labels = {"zone": "a"}
    assert node_affinity_problem({"spec": {}}, labels) is None
    assert node_affinity_problem(pv(zone_a), labels) is None
    assert node_affinity_problem(pv(zone_b, zone_a), labels) is None  # terms are ORed
    assert node_affinity_problem(pv(zone_b), labels) == "no matching NodeSelectorTerms"
    assert node_affinity_problem(pv(), labels) == "no matching NodeSelectorTerms"
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
    # upstream judges a Node of labels only: a field term matches no node
    assert node_affinity_problem(pv(by_name), labels) == "no matching NodeSelectorTerms"


def test_access_modes_and_sources() -> None:
    assert only_read_write_once_pod({"spec": {"accessModes": ["ReadWriteOncePod"]}})
    assert not only_read_write_once_pod(
        {"spec": {"accessModes": ["ReadWriteOncePod", "ReadWriteOnce"]}}
    )
    assert pv_source_kind({"spec": {"local": {"path": "/x"}}}) == "local"
    assert pv_source_kind({"spec": {"csi": {"driver": "d"}}}) == "csi"
    assert pv_source_kind({"spec": {}}) is None
    block = {"spec": {"volumeMode": "Block"}}
    assert volume_mode_problem(block, "v", mounted=True, as_device=False) == (
        "volume v has volumeMode Block, but is specified in volumeMounts"
    )
    assert volume_mode_problem({"spec": {}}, "v", mounted=False, as_device=True) == (
        "volume v has volumeMode Filesystem, but is specified in volumeDevices"
    )
    assert volume_mode_problem({"spec": {}}, "v", mounted=True, as_device=False) is None


class Claims:
    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.volumes: dict[str, dict[str, Any]] = {}
        self.calls = 0

    def bind(self, claim: str, pv: str, source: dict[str, Any], **spec: Any) -> None:
        self.claims[("ns", claim)] = {
            "metadata": {"name": claim, "namespace": "ns", "uid": f"uid-{claim}"},
            "spec": {"volumeName": pv},
            "status": {"phase": "Bound"},
        }
        self.volumes[pv] = {"spec": {"claimRef": {"uid": f"uid-{claim}"}, **source, **spec}}

    async def claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.calls += 1
        return self.claims.get((namespace, name))

    async def volume(self, name: str) -> Mapping[str, Any] | None:
        self.calls += 1
        return self.volumes.get(name)


async def test_a_claim_volume_is_set_up_once_and_remembered(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    claims = Claims()
    claims.bind("c", "pv", {"hostPath": {"path": str(disk)}}, accessModes=["ReadWriteOncePod"])
    manager = VolumeManager(str(tmp_path / "root"), claims=claims)
    volume = Volume(name="data", persistent_volume_claim={"claimName": "c"})
    first = await manager.prepare(pod_of(volume))
    assert first.ready and first.paths == {"data": str(disk)}
    assert await manager.prepare(pod_of(volume)) == first
    assert claims.calls == 2  # the claim and the volume, read once
    record = tmp_path / "root/pods/pod-1/plugins/kubelet~claims/data.json"
    assert json.loads(record.read_text())["pv"] == "pv"
    # a new manager (a restarted kubelet) reuses the record, and knows the volume is taken
    again = VolumeManager(str(tmp_path / "root"), claims=claims)
    assert (await again.prepare(pod_of(volume))).paths == {"data": str(disk)}
    assert claims.calls == 2
    other = await again.prepare(pod_of(volume, uid="pod-2", name="other"))
    assert other.events == (
        'MountVolume.SetUp failed for volume "pv" : volume uses the ReadWriteOncePod access '
        "mode and is already in use by another pod",
    )
    assert again.cleanup("pod-1") and disk.is_dir()
    assert (await again.prepare(pod_of(volume, uid="pod-2", name="other"))).ready


async def test_a_host_path_volume_gets_its_type_check(tmp_path: Path) -> None:
    claims = Claims()
    claims.bind("c", "pv", {"hostPath": {"path": str(tmp_path / "no"), "type": "Directory"}})
    manager = VolumeManager(str(tmp_path / "root"), claims=claims)
    result = await manager.prepare(
        pod_of(Volume(name="data", persistent_volume_claim={"claimName": "c"}))
    )
    assert result.unmounted == ("data",)
    assert result.events == (
        'MountVolume.SetUp failed for volume "pv" : hostPath type check failed: '
        f"{tmp_path / 'no'} is not a directory",
    )


async def test_without_an_api_server_a_claim_is_missing(tmp_path: Path) -> None:
    manager = VolumeManager(str(tmp_path))
    result = await manager.prepare(
        pod_of(Volume(name="data", persistent_volume_claim={"claimName": "c"}))
    )
    assert result.events == (
        "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], "
        "failed to process volumes=[data]: error processing PVC ns/c: failed to fetch PVC "
        'from API server: persistentvolumeclaims "c" not found',
    )
