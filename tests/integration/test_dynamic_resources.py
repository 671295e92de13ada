"""Pods with resource claims: this kubelet has no DRA drivers, so such a pod waits
(``FailedPrepareDynamicResources``, as upstream's kubelet while it cannot prepare a
claim) and is never started without its devices. API pods against FakeApiServer and
FakeRuntime; fake clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.testing import FakeRuntime

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import NODE

REASON = "FailedPrepareDynamicResources"


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return ("registry.k8s.io/pause:3.9", "busybox:1.35")


def events(c: Cluster, reason: str) -> list[str]:
    return [e["message"] for e in c.api.list("events", "default") if e.get("reason") == reason]


async def test_a_pod_with_resource_claims_waits_and_says_why(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod(
            "gpu",
            resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}],
            containers=[
                {"name": "app", "image": "busybox:1.35", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        )
        c.create_pod("plain")
        await c.wait_for(lambda: events(c, REASON) and c.phase("plain") == "Running")
        assert events(c, REASON)[0] == (
            "Failed to prepare dynamic resources: dynamic resource allocation is not "
            "implemented by this kubelet; the pod needs resource claims: gpu"
        )
        await trio.sleep(60)
        names = [s.config.metadata.name for s in fake.sandboxes.values()]
        assert names == ["plain"]  # the claimed pod never got a sandbox
        assert c.phase("gpu") == "Pending"


async def test_extended_resources_claimed_by_the_scheduler_are_not_ignored(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    # DRAExtendedResource: the scheduler makes a claim for an extended resource no device
    # plugin offers and records it in the pod's status before it binds the pod here.
    async with running_cluster(fake, short_tmp) as c:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "ext", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "busybox:1.35",
                        "resources": {"requests": {"example.com/gpu": "1"}},
                    }
                ]
            },
        }
        c.api.create(body)
        claim = {"resourceClaimName": "ext-extended-resources-x7k2p", "requestMappings": []}
        c.api.update_status(
            "Pod", "default", "ext", lambda s: s.update(extendedResourceClaimStatus=claim)
        )
        c.api.patch("Pod", "default", "ext", {"spec": {"nodeName": NODE}})
        await c.wait_for(lambda: events(c, REASON))
        assert events(c, REASON)[0].endswith("resource claims: ext-extended-resources-x7k2p")
        await trio.sleep(30)
        assert fake.calls_of("RunPodSandbox") == []
        status = (c.pod("ext") or {}).get("status") or {}
        assert status.get("extendedResourceClaimStatus") == claim  # the kubelet keeps it
