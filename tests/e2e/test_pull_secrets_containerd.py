"""Pull secrets end to end: the kubelet process, FakeApiServer, real containerd, and a
registry with basic authentication on 127.0.0.1 (containerd speaks plain HTTP to it).

The kubelet reads the pod's dockerconfigjson Secret, containerd authenticates with the
AuthConfig it got and pulls; a pod without the secret is refused the image, even though
it is now on the node (KubeletEnsureSecretPulledImages). The password appears nowhere.
"""

from __future__ import annotations

import base64
import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet.cri import CriError, ImageClient, RuntimeClient
from kubelet.testing.fakeregistry import FakeRegistry, single_layer_image

from .cluster import Processes, node_registered

pytestmark = pytest.mark.containerd

PASSWORD = "e2e-Pa55-" + uuid.uuid4().hex[:8]
LOOP = "trap 'exit 0' TERM; while true; do sleep 0.2; done"


def pod(name: str, node: str, image: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", LOOP],
                }
            ],
            **spec,
        },
    }


async def container_state(api: httpx.AsyncClient, name: str) -> dict[str, Any]:
    r = await api.get(f"/api/v1/namespaces/default/pods/{name}")
    statuses = (r.json().get("status") or {}).get("containerStatuses") or [{}]
    return dict(statuses[0].get("state") or {})


async def test_private_registry_pull_with_a_pull_secret(
    cluster: tuple[str, str, Processes],
    cri: tuple[RuntimeClient, ImageClient],
    short_tmp: Path,
) -> None:
    url, node, _ = cluster
    _, images = cri
    registry = FakeRegistry({"robot": PASSWORD})
    manifest, blobs = single_layer_image(
        {"/bin/busybox": (Path("/bin/busybox").read_bytes(), 0o755)},
        {"/bin/sh": "busybox", "/bin/sleep": "busybox"},
    )
    repository = f"e2e/pull-secret-{uuid.uuid4().hex[:8]}"
    registry.add_image(repository, "1", manifest, blobs)
    async with registry.serve() as host, httpx.AsyncClient(base_url=url, timeout=10) as api:
        image = f"{host}/{repository}:1"
        try:
            await node_registered(api, node)
            auth = base64.b64encode(f"robot:{PASSWORD}".encode()).decode()
            config = json.dumps({"auths": {host: {"auth": auth}}}).encode()
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "regcred", "namespace": "default"},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": base64.b64encode(config).decode()},
            }
            r = await api.post("/api/v1/namespaces/default/secrets", json=secret)
            assert r.status_code == 201, r.text
            owner = pod("owner", node, image, imagePullSecrets=[{"name": "regcred"}])
            assert (await api.post("/api/v1/namespaces/default/pods", json=owner)).is_success
            with trio.fail_after(60):
                while "running" not in await container_state(api, "owner"):
                    await trio.sleep(0.2)
            authenticated = [r for r in registry.requests if r.user == "robot"]
            assert any("/manifests/" in r.path and r.status == 200 for r in authenticated)
            assert any("/blobs/" in r.path for r in authenticated)

            # the image is on the node now; a pod without the secret still may not use it
            thief = pod("thief", node, image)
            assert (await api.post("/api/v1/namespaces/default/pods", json=thief)).is_success
            with trio.fail_after(60):
                while (await container_state(api, "thief")).get("waiting", {}).get(
                    "reason"
                ) not in ("ErrImagePull", "ImagePullBackOff"):
                    await trio.sleep(0.2)
            waiting = (await container_state(api, "thief"))["waiting"]
            assert "401" in waiting["message"]
            assert any(r.user is None and r.status == 401 for r in registry.requests)

            events = (await api.get("/api/v1/namespaces/default/events")).text
            pods = (await api.get("/api/v1/namespaces/default/pods")).text
            kubelet_log = (short_tmp / "kubelet.log").read_text()
            for text in (events, pods, kubelet_log):
                assert PASSWORD not in text
                assert auth not in text

            for name in ("owner", "thief"):
                await api.delete(f"/api/v1/namespaces/default/pods/{name}")
            with trio.fail_after(60):
                while (await api.get("/api/v1/namespaces/default/pods")).json()["items"]:
                    await trio.sleep(0.2)
        finally:
            with contextlib.suppress(CriError):
                await images.remove_image(image)
