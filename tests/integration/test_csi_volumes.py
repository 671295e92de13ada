"""CSI volumes on a kubelet joined to FakeApiServer, published by FakeCsiDriver."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from grpclib.const import Status

from kubelet.testing import FakeRuntime
from kubelet.testing.fakecsi import FakeCsiDriver, FakeRegistrar

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES

DRIVER = "inline.csi.example"


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def csidriver(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": DRIVER},
        "spec": {"attachRequired": False, "volumeLifecycleModes": ["Ephemeral"], **spec},
    }


def inline_pod(c: Cluster, name: str = "web") -> dict[str, Any]:
    return c.create_pod(
        name,
        containers=[
            {
                "name": "app",
                "image": "busybox:1.35",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }
        ],
        volumes=[{"name": "data", "csi": {"driver": DRIVER, "volumeAttributes": {"size": "1Gi"}}}],
    )


def events(c: Cluster, reason: str) -> list[str]:
    return [e["message"] for e in c.api.list("events", "default") if e.get("reason") == reason]


async def registered(c: Cluster, tmp: Path, driver: FakeCsiDriver) -> FakeRegistrar:
    registrar = FakeRegistrar(tmp / "root" / "plugins_registry", driver.name, str(driver.path))
    await registrar.start()
    await c.wait_for(lambda: registrar.registered is True)
    return registrar


async def test_an_inline_csi_volume_is_published_and_unpublished(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.api.create(csidriver(podInfoOnMount=True))
        driver = FakeCsiDriver(short_tmp / "d.sock", DRIVER)
        async with driver.serve():
            registrar = await registered(c, short_tmp, driver)
            pod = inline_pod(c)
            uid = pod["metadata"]["uid"]
            await c.wait_for(lambda: c.phase("web") == "Running")
            base = short_tmp / "root" / "pods" / uid / "volumes" / "kubernetes.io~csi" / "data"
            target = str(base / "mount")
            assert driver.published == {target: "csi-" + _sha(uid + "data")}
            (request,) = driver.requests("NodePublishVolume")
            assert request.volume_context["size"] == "1Gi"
            assert request.volume_context["csi.storage.k8s.io/pod.name"] == "web"
            assert request.volume_context["csi.storage.k8s.io/ephemeral"] == "true"
            assert driver.requests("NodeStageVolume") == []  # inline volumes are never staged
            vol_data = json.loads((base / "vol_data.json").read_text())
            assert vol_data["driverName"] == DRIVER
            assert vol_data["volumeLifecycleMode"] == "Ephemeral"
            (container,) = c.running_containers()
            assert ("/data", target) in [
                (m.container_path, m.host_path) for m in container.config.mounts
            ]
            c.api.delete("pods", "default", "web", grace=0)
            await c.wait_for(lambda: not driver.published, timeout=60)
            await c.wait_for(lambda: not os.path.exists(short_tmp / "root" / "pods" / uid))
            await registrar.stop()


async def test_a_csi_volume_of_a_driver_not_registered_or_failing_keeps_the_pod_waiting(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.api.create(csidriver())
        inline_pod(c)
        await c.wait_for(lambda: bool(events(c, "FailedMount")))
        assert "not found in the list of registered CSI drivers" in events(c, "FailedMount")[0]
        assert c.phase("web") == "Pending"
        driver = FakeCsiDriver(short_tmp / "d.sock", DRIVER)
        driver.faults.fail["NodePublishVolume"] = (Status.INTERNAL, "disk on fire")
        async with driver.serve():
            registrar = await registered(c, short_tmp, driver)
            await c.wait_for(
                lambda: any("disk on fire" in m for m in events(c, "FailedMount")), timeout=60
            )
            assert any(
                'MountVolume.SetUp failed for volume "data" : rpc error: code = Internal '
                "desc = disk on fire" in m
                for m in events(c, "FailedMount")
            )
            driver.faults.fail.clear()
            await c.wait_for(lambda: c.phase("web") == "Running", timeout=120)
            c.api.delete("pods", "default", "web", grace=0)
            await c.wait_for(lambda: not driver.published, timeout=60)
            await registrar.stop()


async def test_an_inline_volume_needs_the_ephemeral_mode_in_its_csidriver(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        driver = FakeCsiDriver(short_tmp / "d.sock", DRIVER)
        async with driver.serve():
            registrar = await registered(c, short_tmp, driver)
            inline_pod(c)
            await c.wait_for(lambda: bool(events(c, "FailedMount")))
            assert (
                f'volume mode "Ephemeral" not supported by driver {DRIVER} (no CSIDriver object)'
                in events(c, "FailedMount")[0]
            )
            assert driver.published == {}
            await registrar.stop()


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


async def restart(c: Cluster) -> None:
    from .cluster_harness import start_cluster_kubelet

    assert c.scope is not None
    c.scope.cancel()
    await trio.sleep(5)
    await start_cluster_kubelet(c)


async def test_a_restarted_kubelet_keeps_a_running_pods_csi_volume_and_unpublishes_an_orphans(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.api.create(csidriver())
        driver = FakeCsiDriver(short_tmp / "d.sock", DRIVER)
        async with driver.serve():
            registrar = await registered(c, short_tmp, driver)
            keep = inline_pod(c, "keep")
            inline_pod(c, "gone")
            await c.wait_for(lambda: c.phase("keep") == c.phase("gone") == "Running")
            assert len(driver.published) == 2
            c.api.delete("pods", "default", "gone", grace=0)
            await restart(c)  # the deletion happened while it was down
            await c.wait_for(lambda: len(driver.published) == 1, timeout=60)
            keep_uid = keep["metadata"]["uid"]
            (target,) = driver.published
            assert keep_uid in target  # the running pod's volume stays
            assert not any(
                keep_uid in r.target_path for r in driver.requests("NodeUnpublishVolume")
            )
            await trio.sleep(30)
            assert c.phase("keep") == "Running"
            assert len(driver.published) == 1
            await registrar.stop()
