"""The DRA manager's parts: driver registration and ResourceSlice wiping, the claim
checkpoint in upstream's format, and the pure claim decisions."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
import trio

from kubelet.api import ApiError, Pod, from_wire
from kubelet.cm.dra import Checkpoint, ClaimInfo, Device, DraManager, DraParts, DraRegistration
from kubelet.cm.dra.client import choose_service
from kubelet.decisions import (
    ClaimError,
    ClaimRef,
    cdi_annotation,
    claim_refusal,
    container_claim_requests,
    pod_claims,
)
from kubelet.pluginmanager import PluginRefused

NODE = "node-a"
T = TypeVar("T")


@attrs.define
class SliceApi:
    """The two calls the wiping makes, recorded; ``down`` fails them."""

    slices: list[dict[str, Any]] = attrs.field(factory=list)
    deleted: list[tuple[float, str]] = attrs.field(factory=list)
    down: int = 0

    async def delete_collection(self, path: str, *, field_selector: str = "") -> dict[str, Any]:
        if self.down:
            self.down -= 1
            raise ApiError(503, "ServiceUnavailable", "connection refused")
        self.deleted.append((trio.current_time(), field_selector))
        return {}

    async def list_all(self, path: str, *, field_selector: str = "") -> Any:
        assert field_selector == f"spec.nodeName={NODE}"
        return attrs.make_class("Page", ["items"])(self.slices)


def test_the_newest_service_both_speak_is_chosen_and_none_is_refused() -> None:
    assert choose_service(["v1beta1.DRAPlugin", "v1.DRAPlugin"]) == "v1.DRAPlugin"
    assert choose_service(["v1beta1.DRAPlugin"]) == "v1beta1.DRAPlugin"
    with pytest.raises(ValueError, match="empty list of supported gRPC services"):
        choose_service([])
    with pytest.raises(ValueError, match=r"v1alpha4\.Node"):
        choose_service(["v1alpha4.Node"])


async def test_validate_refuses_a_driver_without_a_service_we_speak() -> None:
    async with trio.open_nursery() as nursery:
        reg = DraRegistration(nursery, NODE, None)
        reg.validate("gpu.example.com", "/x.sock", ["v1.DRAPlugin"])
        with pytest.raises(PluginRefused, match=r"invalid versions of plugin gpu\.example\.com"):
            reg.validate("gpu.example.com", "/x.sock", ["v2.DRAPlugin"])
        with pytest.raises(PluginRefused):
            reg.validate("", "/x.sock", ["v1.DRAPlugin"])


async def test_a_gone_driver_s_slices_are_deleted_after_30s_unless_it_comes_back(
    autojump_clock: trio.abc.Clock,
) -> None:
    api = SliceApi()
    async with trio.open_nursery() as nursery:
        reg = DraRegistration(nursery, NODE, api)  # type: ignore[arg-type]
        await reg.register("a.example.com", "/a.sock", ["v1.DRAPlugin"])
        await reg.register("b.example.com", "/b.sock", ["v1beta1.DRAPlugin"])
        assert reg.plugin("b.example.com").service == "v1beta1.DRAPlugin"
        start = trio.current_time()
        await reg.deregister("a.example.com")
        await reg.deregister("b.example.com")
        await trio.sleep(10)
        await reg.register("b.example.com", "/b2.sock", ["v1.DRAPlugin"])  # back in time
        await trio.sleep(60)
        assert api.deleted == [
            (start + 30, f"spec.nodeName={NODE},spec.driver=a.example.com"),
        ]
        assert reg.registered() == ("b.example.com",)
        nursery.cancel_scope.cancel()


async def test_a_driver_with_two_instances_stays_until_the_last_goes(
    autojump_clock: trio.abc.Clock,
) -> None:
    api = SliceApi()
    async with trio.open_nursery() as nursery:
        reg = DraRegistration(nursery, NODE, api)  # type: ignore[arg-type]
        await reg.register("a.example.com", "/old.sock", ["v1.DRAPlugin"])
        await reg.register("a.example.com", "/new.sock", ["v1.DRAPlugin"])
        assert reg.plugin("a.example.com").endpoint == "/new.sock"
        await reg.deregister("a.example.com")
        await trio.sleep(60)
        assert api.deleted == [] and reg.registered() == ("a.example.com",)
        await reg.deregister("a.example.com")
        await trio.sleep(31)
        assert len(api.deleted) == 1
        nursery.cancel_scope.cancel()


async def test_at_start_the_slices_of_unregistered_drivers_go_with_retries(
    autojump_clock: trio.abc.Clock,
) -> None:
    api = SliceApi(
        slices=[{"spec": {"driver": "a.example.com"}}, {"spec": {"driver": "old.example.com"}}],
        down=2,
    )
    async with trio.open_nursery() as nursery:
        reg = DraRegistration(nursery, NODE, api)  # type: ignore[arg-type]
        await reg.register("a.example.com", "/a.sock", ["v1.DRAPlugin"])
        reg.wipe_unregistered()
        await trio.sleep(10)
        assert api.deleted == [(3.0, f"spec.nodeName={NODE},spec.driver=old.example.com")]
        nursery.cancel_scope.cancel()


def test_the_checkpoint_is_upstreams_format_and_reads_back(tmp_path: Path) -> None:
    info = ClaimInfo(
        claim_uid="u1",
        claim_name="gpu",
        namespace="default",
        drivers={"a.example.com": [Device("pool", "gpu-0", ("gpu",), ("a.example.com/gpu=0",))]},
        pod_uids={"p1"},
        prepared=True,
    )
    cp = Checkpoint(str(tmp_path))
    cp.save([info])
    outer = json.loads((tmp_path / "dra_manager_state").read_text())
    assert outer["Checksum"] == zlib.crc32(outer["Data"].encode())
    data = json.loads(outer["Data"])
    assert data["kind"] == "DRACheckpoint"
    assert data["apiVersion"] == "checkpoint.dra.kubelet.k8s.io/v1"
    assert data["Entries"][0]["PodUIDs"] == {"p1": {}}
    assert data["Entries"][0]["DriverState"]["a.example.com"]["Devices"][0] == {
        "PoolName": "pool",
        "DeviceName": "gpu-0",
        "RequestNames": ["gpu"],
        "CDIDeviceIDs": ["a.example.com/gpu=0"],
    }
    assert cp.load() == [info]


def test_an_upstream_entry_is_not_prepared_and_a_corrupt_checkpoint_is_ignored(
    tmp_path: Path,
) -> None:
    entry = {"ClaimUID": "u", "ClaimName": "c", "Namespace": "ns", "PodUIDs": {"p": {}}}
    data = json.dumps({"kind": "DRACheckpoint", "apiVersion": "v", "Entries": [entry]})
    path = tmp_path / "dra_manager_state"
    path.write_text(json.dumps({"Data": data, "Checksum": zlib.crc32(data.encode())}))
    (loaded,) = Checkpoint(str(tmp_path)).load()
    assert loaded.pod_uids == {"p"} and not loaded.prepared
    path.write_text(json.dumps({"Data": data, "Checksum": 1}))
    assert Checkpoint(str(tmp_path)).load() == []


async def test_the_checkpoint_is_read_through_the_runner_at_restore_not_on_construction(
    tmp_path: Path,
) -> None:
    checkpoint = Checkpoint(str(tmp_path))
    checkpoint.save([ClaimInfo("u", "c", "ns", {}, {"p"}, prepared=True)])
    ran: list[object] = []

    async def io(fn: Callable[[], T]) -> T:
        ran.append(fn)
        return fn()

    async with trio.open_nursery() as nursery:
        parts = DraParts(
            registration=DraRegistration(nursery, NODE, None),
            api=None,
            node_name=NODE,
            checkpoint=checkpoint,
            active=tuple,
        )
        manager = DraManager(parts)
        assert manager.claims == {}  # nothing read on the event loop
        await manager.restore(io)
        assert ran == [checkpoint.load]
        assert list(manager.claims) == [("ns", "c")]


def pod(**status: Any) -> Pod:
    body = {
        "metadata": {"name": "web", "namespace": "default", "uid": "pod-uid"},
        "spec": {
            "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "gpu-template"},
                {"name": "shared", "resourceClaimName": "shared-claim"},
            ],
            "containers": [
                {
                    "name": "app",
                    "image": "x",
                    "resources": {"claims": [{"name": "gpu", "request": "big"}]},
                },
                {"name": "side", "image": "x", "resources": {"claims": [{"name": "shared"}]}},
            ],
        },
        "status": status,
    }
    return from_wire(Pod, body)


def test_a_template_claim_needs_its_generated_name() -> None:
    with pytest.raises(ClaimError, match="ResourceClaim not created yet"):
        pod_claims(pod())
    named = pod(resourceClaimStatuses=[{"name": "gpu", "resourceClaimName": "web-gpu-x1"}])
    assert pod_claims(named) == (
        ClaimRef("gpu", "web-gpu-x1", True),
        ClaimRef("shared", "shared-claim", False),
    )
    app, side = named.spec.containers
    assert container_claim_requests(named, app) == {"web-gpu-x1": ["big"]}
    assert container_claim_requests(named, side) == {"shared-claim": [""]}


def test_a_claim_must_be_owned_reserved_and_allocated_here() -> None:
    p = pod(resourceClaimStatuses=[{"name": "gpu", "resourceClaimName": "web-gpu-x1"}])
    ref = ClaimRef("gpu", "web-gpu-x1", True)
    owner = {"uid": "pod-uid", "controller": True}
    claim: dict[str, Any] = {"metadata": {"uid": "c1", "ownerReferences": [owner]}}
    assert claim_refusal(p, ref, claim, NODE) == (
        "pod web (pod-uid) is not allowed to use ResourceClaim web-gpu-x1 (c1)"
    )
    claim["status"] = {"reservedFor": [{"resource": "pods", "uid": "pod-uid"}]}
    assert claim_refusal(p, ref, claim, NODE) == "ResourceClaim web-gpu-x1: not allocated"
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["other"]}]}
    claim["status"]["allocation"] = {"nodeSelector": {"nodeSelectorTerms": [term]}}
    assert "allocated to another node" in (claim_refusal(p, ref, claim, NODE) or "")
    term["matchFields"][0]["values"] = [NODE]
    assert claim_refusal(p, ref, claim, NODE) is None
    claim["metadata"]["ownerReferences"] = []
    assert "pod is not owner" in (claim_refusal(p, ref, claim, NODE) or "")


def test_an_allocations_node_selector_is_evaluated_against_the_nodes_labels() -> None:
    p = pod()
    ref = ClaimRef("gpu", "gpu-claim", False)
    zone = {"key": "topology.example.com/rack", "operator": "In", "values": ["r1"]}
    claim: dict[str, Any] = {
        "metadata": {"uid": "c1"},
        "status": {
            "reservedFor": [{"resource": "pods", "uid": "pod-uid"}],
            "allocation": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}},
        },
    }
    here = {"topology.example.com/rack": "r1"}
    assert claim_refusal(p, ref, claim, NODE, here) is None
    refused = claim_refusal(p, ref, claim, NODE, {"topology.example.com/rack": "r2"})
    assert refused == f"ResourceClaim gpu-claim: allocated to another node than {NODE}"
    assert claim_refusal(p, ref, claim, NODE, {}) == refused
    # a term's label and field expressions are ANDed, the terms ORed
    name = {"key": "metadata.name", "operator": "In", "values": ["other"]}
    terms = [{"matchExpressions": [zone], "matchFields": [name]}]
    claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"] = terms
    assert claim_refusal(p, ref, claim, NODE, here) == refused
    terms.append({"matchFields": [{**name, "values": [NODE]}]})
    assert claim_refusal(p, ref, claim, NODE, {}) is None
    del claim["status"]["allocation"]["nodeSelector"]  # reachable from every node
    assert claim_refusal(p, ref, claim, NODE, {}) is None


def test_the_cdi_annotation_is_cdis_key_or_none_when_too_long() -> None:
    assert cdi_annotation("a.example.com", "u-1", ["a.example.com/g=0", "a.example.com/g=1"]) == (
        "cdi.k8s.io/a.example.com_u-1",
        "a.example.com/g=0,a.example.com/g=1",
    )
    assert cdi_annotation("x" * 40, "0" * 36, ["v/c=d"]) is None
    assert cdi_annotation("a.example.com", "u-1", []) is None
