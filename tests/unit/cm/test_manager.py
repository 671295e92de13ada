"""The container manager fans each question out to its resource managers in order: the
first refusal wins admission, contributions and extended resources add up, hooks run in
turn, and the cgroups part turns a cgroup failure into the sync's FailedCreatePodContainer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pytest
import trio

from kubelet.api import Container, Pod
from kubelet.cgroups import FAILED_CREATE_POD_CONTAINER, CgroupError, PodCgroups
from kubelet.cm import ContainerManager, NodeResources, ResourceError
from kubelet.cm.capabilities import (
    Admits,
    ContributesConfig,
    ExtendsNode,
    PostStopHook,
    PreStartHook,
    ResourceManager,
)
from kubelet.cm.podcgroups import CgroupsPart
from kubelet.cm.resources import Refusal
from kubelet.decisions import ContainerContribution
from kubelet.testing.builders import make_container, make_pod

BASE = NodeResources(
    capacity={"cpu": "4", "memory": str(8 * 1024**3)}, allocatable={"cpu": "3500m", "memory": "7Gi"}
)


class Recording(
    ResourceManager, Admits, ExtendsNode, ContributesConfig, PreStartHook, PostStopHook
):
    def __init__(self, name: str, calls: list[str], refuse: bool = False) -> None:
        self.name = name
        self.calls = calls
        self.refuse = refuse

    def admit(self, pod: Pod, others: Sequence[Pod]) -> Refusal | None:
        self.calls.append(f"{self.name}.admit")
        return (f"{self.name}Refused", "no") if self.refuse else None

    def extended_resources(self) -> NodeResources:
        return NodeResources({f"example.com/{self.name}": "2"}, {f"example.com/{self.name}": "1"})

    def contribute(self, pod: Pod, container: Container) -> ContainerContribution:
        return ContainerContribution(env=((self.name, "1"),))

    async def pre_start(self, pod: Pod, container: Container, container_id: str) -> None:
        self.calls.append(f"{self.name}.pre_start {container_id}")

    async def post_stop(self, container_id: str) -> None:
        self.calls.append(f"{self.name}.post_stop {container_id}")


def test_admission_stops_at_the_first_refusal() -> None:
    calls: list[str] = []
    cm = ContainerManager(
        BASE,
        [Recording("a", calls), Recording("b", calls, refuse=True), Recording("c", calls)],
    )
    assert cm.admit(make_pod(), []) == ("bRefused", "no")
    assert calls == ["a.admit", "b.admit"]


async def test_resources_contributions_and_hooks_follow_the_registration_order() -> None:
    calls: list[str] = []
    cm = ContainerManager(BASE, [Recording("a", calls), Recording("b", calls)])
    assert cm.resources.capacity == {**BASE.capacity, "example.com/a": "2", "example.com/b": "2"}
    assert cm.allocatable == {**BASE.allocatable, "example.com/a": "1", "example.com/b": "1"}
    assert cm.memory_capacity == 8 * 1024**3
    pod = make_pod(make_container())
    assert cm.contribution(pod, pod.spec.containers[0]).env == (("a", "1"), ("b", "1"))
    await cm.pre_start(pod, pod.spec.containers[0], "c1")
    await cm.post_stop("c1")
    assert calls == ["a.pre_start c1", "b.pre_start c1", "a.post_stop c1", "b.post_stop c1"]


def test_without_pod_cgroups_the_parent_is_named_under_the_cgroup_root() -> None:
    pod = make_pod()
    assert ContainerManager(BASE, cgroup_root="/").pod_cgroup_parent(pod).startswith("/kubepods")


class _BrokenCgroups:
    async def ensure(self, pod: Pod) -> bool:
        raise CgroupError("mkdir /sys/fs/cgroup/kubepods/podu: read-only file system")

    async def remove(self, uid: str) -> bool:
        raise CgroupError("rmdir: busy")


async def test_the_cgroups_part_reports_a_pod_cgroup_it_cannot_make(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    part = CgroupsPart(cast(PodCgroups, _BrokenCgroups()))
    cm = ContainerManager(BASE, [part])
    with pytest.raises(ResourceError) as raised:
        await cm.prepare_pod(make_pod())
    assert raised.value.reason == FAILED_CREATE_POD_CONTAINER
    assert raised.value.message == (
        "unable to ensure pod container exists: "
        "mkdir /sys/fs/cgroup/kubepods/podu: read-only file system"
    )
    await cm.release_pod(make_pod())  # logged; housekeeping's sweep tries again
    assert "pod cgroup not removed: rmdir: busy" in caplog.text


class OnlyAdmits(ResourceManager, Admits):
    """A manager that declares admission and nothing else (no other method exists)."""

    name = "only-admits"

    def admit(self, pod: Pod, others: Sequence[Pod]) -> Refusal | None:
        return None


async def test_a_manager_is_asked_only_what_it_declared() -> None:
    manager = OnlyAdmits()
    cm = ContainerManager(BASE, [manager])
    assert cm.roster.admits == (manager,)
    assert cm.roster.contributes == cm.roster.prepares_pod == cm.roster.extends_node == ()
    pod = make_pod(make_container())
    container = pod.spec.containers[0]
    assert cm.admit(pod, []) is None
    assert cm.admit_resize(pod, pod) is None
    assert cm.resources == BASE
    assert cm.contribution(pod, container) == ContainerContribution()
    await cm.prepare_pod(pod)
    await cm.prepare_sandbox(pod)
    await cm.pre_start(pod, container, "c1")
    await cm.post_stop("c1")
    await cm.release_pod(pod)
    assert cm.container_devices(pod.uid, container.name) == []
    assert cm.allocatable_devices() == []
    assert cm.dynamic_resources(pod, container) == []
    assert cm.resource_health(pod) == {}
    assert cm.exclusive_cpus(pod.uid, container.name) == frozenset()
    assert cm.allocatable_cpus() == frozenset()
    assert cm.container_memory(pod.uid, container.name) == []
    assert cm.allocatable_memory() == []
    assert cm.plugin_handlers() == {}
