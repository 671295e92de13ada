"""RuntimeView: neither a pod's status read nor a relist waits for one list before the other."""

from __future__ import annotations

from typing import Any, cast

import pytest
import trio

from kubelet.cri import (
    ContainerRunState,
    RuntimeClient,
    RuntimeUnavailable,
    SandboxState,
    api,
    labels,
)
from kubelet.pleg import RuntimeView
from kubelet.pleg.generator import PlegState

UID = "u1"


class OverlapRuntime:
    """Each list answers only once the other list has been asked for: read one after the
    other, the status read never finishes."""

    def __init__(self) -> None:
        self.asked_sandboxes = trio.Event()
        self.asked_containers = trio.Event()
        self.calls: list[str] = []

    async def list_pod_sandbox(self, labels: dict[str, str] | None = None) -> list[Any]:
        self.calls.append("ListPodSandbox")
        self.asked_sandboxes.set()
        await self.asked_containers.wait()
        return [_sandbox()]

    async def list_containers(self, labels: dict[str, str] | None = None) -> list[Any]:
        self.calls.append("ListContainers")
        self.asked_containers.set()
        await self.asked_sandboxes.wait()
        return [_container()]

    async def pod_sandbox_status(self, sandbox_id: str) -> api.PodSandboxStatusResponse:
        self.calls.append("PodSandboxStatus")
        status = api.PodSandboxStatus(id=sandbox_id, state=api.SANDBOX_READY, created_at=1)
        status.metadata.name = "web"
        status.network.ip = "10.0.0.7"
        status.labels[labels.POD_UID] = UID
        return api.PodSandboxStatusResponse(status=status)

    async def container_status(self, container_id: str) -> api.ContainerStatusResponse:
        self.calls.append("ContainerStatus")
        status = api.ContainerStatus(id=container_id, state=api.CONTAINER_RUNNING, created_at=2)
        status.metadata.name = "main"
        status.labels[labels.POD_UID] = UID
        return api.ContainerStatusResponse(status=status)


def _sandbox() -> api.PodSandbox:
    s = api.PodSandbox(id="s1", state=api.SANDBOX_READY, created_at=1)
    s.labels[labels.POD_UID] = UID
    s.labels[labels.POD_NAME] = "web"
    s.labels[labels.POD_NAMESPACE] = "default"
    return s


def _container() -> api.Container:
    c = api.Container(id="c1", pod_sandbox_id="s1", state=api.CONTAINER_RUNNING, created_at=2)
    c.labels[labels.POD_UID] = UID
    return c


async def test_pod_status_lists_sandboxes_and_containers_at_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    runtime = OverlapRuntime()
    view = RuntimeView(cast(RuntimeClient, runtime))
    with trio.fail_after(5):
        status = await view.pod_status(UID)
    assert sorted(runtime.calls[:2]) == ["ListContainers", "ListPodSandbox"]
    assert (status.name, status.namespace) == ("web", "default")
    assert [(s.id, s.state, s.ip) for s in status.sandboxes] == [
        ("s1", SandboxState.READY, "10.0.0.7")
    ]
    assert [(c.id, c.state, c.sandbox_id) for c in status.containers] == [
        ("c1", ContainerRunState.RUNNING, "s1")
    ]


async def test_unlisted_says_what_the_last_relist_did_not_list(
    autojump_clock: trio.abc.Clock,
) -> None:
    runtime = OverlapRuntime()
    runtime.asked_sandboxes.set()
    runtime.asked_containers.set()
    view = RuntimeView(cast(RuntimeClient, runtime))
    assert not view.unlisted(UID) and not view.unlisted("other")  # no relist yet: unknown
    await view.relist()
    assert not view.unlisted(UID)
    assert view.unlisted("other")


async def test_listed_uids_are_the_last_relists_while_it_is_recent(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Housekeeping's look: the uids of the last relist, counted from when it began;
    None before any relist and once it is older than asked."""
    runtime = OverlapRuntime()
    runtime.asked_sandboxes.set()
    runtime.asked_containers.set()
    view = RuntimeView(cast(RuntimeClient, runtime))
    assert view.listed_uids(2.0) is None
    await view.relist()
    await trio.sleep(2.0)
    assert view.listed_uids(2.0) == {UID}
    assert runtime.calls == ["ListPodSandbox", "ListContainers"]  # nothing listed for it
    await trio.sleep(0.1)
    assert view.listed_uids(2.0) is None


async def test_relist_lists_sandboxes_and_containers_at_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The relist's two lists overlap (each answers only once the other is asked), the
    sandboxes' request first, and the states are those of both lists."""
    runtime = OverlapRuntime()
    view = RuntimeView(cast(RuntimeClient, runtime))
    with trio.fail_after(5):
        states = await view.relist()
    assert runtime.calls == ["ListPodSandbox", "ListContainers"]
    assert states == {UID: {"s1": PlegState.RUNNING, "c1": PlegState.RUNNING}}


class FailingRuntime(OverlapRuntime):
    async def list_containers(self, labels: dict[str, str] | None = None) -> list[Any]:
        self.calls.append("ListContainers")
        raise RuntimeUnavailable("ListContainers", "connection refused")


async def test_a_failed_list_fails_the_relist_with_its_own_error(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Not an exception group: the PLEG logs the runtime's error as it is."""
    runtime = FailingRuntime()
    runtime.asked_containers.set()
    view = RuntimeView(cast(RuntimeClient, runtime))
    with pytest.raises(RuntimeUnavailable):
        await view.relist()
    assert view.unlisted("other") is False  # no relist finished
