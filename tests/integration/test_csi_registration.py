"""CSI drivers registering through the plugin watcher: CSINode, the Node's annotation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.testing import FakeRuntime
from kubelet.testing.fakecsi import FakeCsiDriver, FakeRegistrar

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES, NODE


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def registry(tmp: Path) -> Path:
    return tmp / "root" / "plugins_registry"


def csinode_drivers(c: Cluster) -> dict[str, Any]:
    obj = c.api.get("csinodes", None, NODE)
    return {d["name"]: d for d in ((obj or {}).get("spec") or {}).get("drivers") or []}


def node_ids(c: Cluster) -> dict[str, str]:
    node = c.api.get("nodes", None, NODE) or {}
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(
        "csi.volume.kubernetes.io/nodeid", "{}"
    )
    return dict(json.loads(text))


async def test_a_driver_registers_into_csinode_and_the_node_annotation(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        sock = short_tmp / "csi-a.sock"
        driver = FakeCsiDriver(
            sock,
            "a.csi.example",
            node_id="n-a",
            topology={"topo.example/zone": "z1"},
            max_volumes=7,
        )
        registrar = FakeRegistrar(registry(short_tmp), "a.csi.example", str(sock))
        async with driver.serve(), registrar.serve():
            at = await c.wait_for(lambda: "a.csi.example" in csinode_drivers(c))
            assert at < 30
            entry = csinode_drivers(c)["a.csi.example"]
            assert entry == {
                "name": "a.csi.example",
                "nodeID": "n-a",
                "topologyKeys": ["topo.example/zone"],
                "allocatable": {"count": 7},
            }
            csinode = c.api.get("csinodes", None, NODE)
            assert csinode is not None
            owner = csinode["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["name"]) == ("Node", NODE)
            assert node_ids(c) == {"a.csi.example": "n-a"}
            labels = c.api.get("nodes", None, NODE)["metadata"]["labels"]  # type: ignore[index]
            assert labels["topo.example/zone"] == "z1"
            await c.wait_for(lambda: registrar.registered is True)
            assert c.components is not None
            # the socket goes: the driver leaves CSINode and the annotation
            await registrar.stop()
            await c.wait_for(lambda: "a.csi.example" not in csinode_drivers(c), timeout=10)
            assert node_ids(c) == {}


async def test_a_hanging_or_garbled_plugin_does_not_block_another(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        hung = FakeRegistrar(registry(short_tmp), "hung.example", str(short_tmp / "x.sock"))
        hung.faults.hang = True
        garbled = FakeRegistrar(registry(short_tmp), "garbled.example", str(short_tmp / "y.sock"))
        garbled.garbage = True
        sock = short_tmp / "csi-b.sock"
        driver = FakeCsiDriver(sock, "b.csi.example", node_id="n-b")
        good = FakeRegistrar(registry(short_tmp), "b.csi.example", str(sock))
        async with hung.serve(), garbled.serve():
            await trio.sleep(2)  # both are being tried before the good one comes
            async with driver.serve(), good.serve():
                at = await c.wait_for(lambda: "b.csi.example" in csinode_drivers(c))
                assert at < 5
                assert set(node_ids(c)) == {"b.csi.example"}
                assert garbled.statuses == []  # GetInfo failed: nothing to tell it
                assert hung.statuses == []


async def test_unknown_plugin_types_and_old_versions_are_refused(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        foo = FakeRegistrar(registry(short_tmp), "foo.example", "", type="FooPlugin")
        old = FakeRegistrar(
            registry(short_tmp), "old.example", str(short_tmp / "o.sock"), versions=("0.3.0",)
        )
        async with foo.serve(), old.serve():
            await c.wait_for(lambda: bool(foo.statuses and old.statuses))
            assert foo.statuses[0] == (
                False,
                "RegisterPlugin error -- no handler registered for plugin type: FooPlugin "
                f"at socket {foo.path}",
            )
            assert old.statuses[0][0] is False
            assert "none of the versions specified ['0.3.0'] are supported" in old.statuses[0][1]
            assert csinode_drivers(c) == {}


async def test_dra_drivers_register_through_the_same_watcher(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """The container manager's DRA handler takes "DRAPlugin" sockets; a driver speaking
    no service of ours is refused with the handler's reason."""
    async with running_cluster(fake, short_tmp) as c:
        gpu = FakeRegistrar(
            registry(short_tmp),
            "gpu.example",
            str(short_tmp / "gpu.sock"),
            type="DRAPlugin",
            versions=("v1.DRAPlugin",),
        )
        odd = FakeRegistrar(
            registry(short_tmp), "odd.example", "", type="DRAPlugin", versions=("v9.DRAPlugin",)
        )
        async with gpu.serve(), odd.serve():
            await c.wait_for(lambda: bool(gpu.statuses and odd.statuses))
            assert gpu.statuses[0] == (True, "")
            assert odd.statuses[0][0] is False
            assert "invalid versions of plugin odd.example" in odd.statuses[0][1]


async def test_a_failing_driver_is_tried_again_until_it_answers(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    from grpclib.const import Status

    async with running_cluster(fake, short_tmp) as c:
        sock = short_tmp / "csi-c.sock"
        driver = FakeCsiDriver(sock, "c.csi.example", node_id="n-c")
        driver.faults.fail["NodeGetInfo"] = (Status.UNAVAILABLE, "not yet")
        registrar = FakeRegistrar(registry(short_tmp), "c.csi.example", str(sock))
        async with driver.serve(), registrar.serve():
            await c.wait_for(lambda: registrar.registered is False)
            assert "error during CSI NodeGetInfo() call" in registrar.statuses[0][1]
            driver.faults.fail.clear()
            await c.wait_for(lambda: registrar.registered is True, timeout=60)
            assert node_ids(c) == {"c.csi.example": "n-c"}
