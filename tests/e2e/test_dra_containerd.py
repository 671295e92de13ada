"""A DRA driver on a real node: FakeDraPlugin registered through the plugin watcher
(``plugins_registry``) of a kubelet process on containerd; a pod with a ResourceClaim the
FakeApiServer holds (allocated to the driver, reserved for the pod) runs after one
prepare; deleting it unprepares. What reaches containerd 1.6: the ``cdi.k8s.io/``
annotation (it drops the CRI ``CDI_devices`` field it does not know and injects nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient
from kubelet.testing import FakeDevice, FakeDraPlugin
from kubelet.testing.fakecsi import FakeRegistrar

from .cluster import Processes
from .test_csi_containerd import LOOP, deleted, running

pytestmark = pytest.mark.containerd

DRIVER = "gpu.example.com"
CDI_ID = f"{DRIVER}/gpu=gpu-0"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


def claim_pod(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 2,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
            "containers": [
                {
                    "name": "app",
                    "image": "docker.io/library/busybox:1.35",
                    "command": ["sh", "-c", LOOP],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


async def allocate(api: httpx.AsyncClient, node: str, pod_uid: str) -> str:
    """The claim as the scheduler leaves it: allocated on ``node``, reserved for the pod."""
    r = await api.post(
        CLAIMS,
        json={
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "gpu-claim", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu"}]}},
        },
    )
    assert r.status_code == 201, r.text
    claim = r.json()
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": DRIVER, "pool": "pool", "device": "gpu-0"}]
            },
            "nodeSelector": {"nodeSelectorTerms": [term]},
        },
        "reservedFor": [{"resource": "pods", "name": "gpu", "uid": pod_uid}],
    }
    r = await api.put(f"{CLAIMS}/gpu-claim/status", json=claim)
    assert r.status_code == 200, r.text
    return str(claim["metadata"]["uid"])


async def test_a_pod_with_a_claim_runs_after_one_prepare_and_its_deletion_unprepares(
    cluster: tuple[str, str, Processes], cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    url, node, _ = cluster
    runtime, _ = cri
    plugin = FakeDraPlugin(
        DRIVER, short_tmp / "dra.sock", (FakeDevice("pool", "gpu-0", (CDI_ID,), ("gpu",)),)
    )
    registrar = FakeRegistrar(
        short_tmp / "root" / "plugins_registry",
        DRIVER,
        plugin.endpoint,
        type="DRAPlugin",
        versions=tuple(plugin.services),
    )
    await plugin.start()
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10) as api, registrar.serve():
            with trio.fail_after(30):
                while not registrar.statuses:
                    await trio.sleep(0.2)
            assert registrar.statuses[-1][0], registrar.statuses
            r = await api.post("/api/v1/namespaces/default/pods", json=claim_pod(node))
            assert r.status_code == 201, r.text
            claim_uid = await allocate(api, node, r.json()["metadata"]["uid"])
            container = await running(runtime, "gpu")
            assert plugin.count("NodePrepareResources") == 1
            assert plugin.prepared == {claim_uid}
            # containerd 1.6: the annotation arrives; the CDI_devices field is not in its
            # CRI, so neither its status nor its verbose info carries it
            status = await runtime.container_status(container.id, verbose=True)
            annotations = dict(status.status.annotations)
            assert annotations[f"cdi.k8s.io/{DRIVER}_{claim_uid}"] == CDI_ID
            info = json.dumps(dict(status.info))
            assert "CDI_devices" not in info and "cdi_devices" not in info
            await deleted(api, "gpu")
            with trio.fail_after(60):
                while plugin.count("NodeUnprepareResources") < 1:
                    await trio.sleep(0.2)
            assert plugin.prepared == set()
            assert plugin.count("NodePrepareResources") == 1
    finally:
        await plugin.stop()
