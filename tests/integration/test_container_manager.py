"""The container manager's seam, on a whole kubelet over FakeRuntime: one resource manager
registered beside the cgroups part (as a device manager would be) admits or refuses pods,
adds its devices, variables, annotations, CDI devices and cpuset to each container's CRI
config, is asked between CreateContainer and StartContainer (a failure keeps the
container from starting: PreStartHookError) and before a container is removed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import trio

from kubelet.api import Container, Pod
from kubelet.cm import CmParts, NodeResources, ResourceError
from kubelet.cm import run as cm_run
from kubelet.cm.capabilities import (
    Admits,
    ContributesConfig,
    ExtendsNode,
    PostStopHook,
    PreStartHook,
    ResourceManager,
)
from kubelet.cm.resources import Refusal
from kubelet.cri import api
from kubelet.decisions import ContainerContribution
from kubelet.decisions.contribution import DeviceSpec
from kubelet.testing import FakeRuntime

from .kubelet_harness import KUBELET_IMAGES, WEB, running_kubelet

GADGET = "example.com/gadget"


class Gadgets(ResourceManager, Admits, ExtendsNode, ContributesConfig, PreStartHook, PostStopHook):
    """A device manager in miniature: one gadget, refused to a pod named "greedy"."""

    name = "gadgets"

    def __init__(self) -> None:
        self.pre_started: list[str] = []
        self.post_stopped: list[str] = []

    def admit(self, pod: Pod, others: Sequence[Pod]) -> Refusal | None:
        if pod.metadata.name.startswith("greedy"):
            return ("UnexpectedAdmissionError", "no gadget left for the pod")
        return None

    def extended_resources(self) -> NodeResources:
        return NodeResources(capacity={GADGET: "1"}, allocatable={GADGET: "1"})

    def contribute(self, pod: Pod, container: Container) -> ContainerContribution:
        return ContainerContribution(
            devices=(DeviceSpec("/dev/gadget0", "/dev/null"),),
            env=(("GADGET", "0"),),
            annotations=((GADGET, "0"),),
            cdi_devices=(f"{GADGET}=0",),
            cpuset_cpus="0-1",
        )

    async def pre_start(self, pod: Pod, container: Container, container_id: str) -> None:
        self.pre_started.append(container_id)
        if pod.metadata.name.startswith("faulty"):
            raise ResourceError("", "gadget 0 is gone")

    async def post_stop(self, container_id: str) -> None:
        self.post_stopped.append(container_id)


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


@pytest.fixture
def gadgets(monkeypatch: pytest.MonkeyPatch) -> Gadgets:
    """One registration: the manager's start in the container manager's list."""
    manager = Gadgets()

    async def start(parts: CmParts, nursery: trio.Nursery) -> ResourceManager:
        return manager

    monkeypatch.setattr(cm_run, "RESOURCE_MANAGERS", (start,))
    return manager


def _named(name: str) -> str:
    return WEB.replace("name: web", f"name: {name}")


async def test_a_registered_manager_shapes_admission_configs_and_container_lifecycles(
    fake: FakeRuntime, gadgets: Gadgets, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, tmp_path) as h:
        assert h.components is not None
        cm = h.components.cm
        assert cm.resources.allocatable[GADGET] == "1"
        h.write("web.yaml", WEB)
        h.write("greedy.yaml", _named("greedy"))
        h.write("faulty.yaml", _named("faulty"))
        await h.wait_for(lambda: h.running("web", "app"))
        (app,) = h.running("web", "app")
        config = app.config
        assert [(d.container_path, d.host_path) for d in config.devices] == [
            ("/dev/gadget0", "/dev/null")
        ]
        assert ("GADGET", b"0") in [(kv.key, kv.value) for kv in config.envs]
        assert config.annotations[GADGET] == "0"
        assert [d.name for d in config.CDI_devices] == [f"{GADGET}=0"]
        assert config.linux.resources.cpuset_cpus == "0-1"
        assert app.id in gadgets.pre_started
        syncloop = h.components.lifecycle.syncloop
        await h.wait_for(lambda: any("no gadget left" in r for r in syncloop.rejected.values()))
        assert h.containers("greedy") == []
        await h.wait_for(lambda: h.containers("faulty", "app"))
        await trio.sleep(5)
        faulty = h.containers("faulty", "app")
        assert faulty and all(c.state == api.CONTAINER_CREATED for c in faulty)
        (h.manifests / "web.yaml").unlink()
        await h.wait_for(lambda: app.id in gadgets.post_stopped, timeout=300)
