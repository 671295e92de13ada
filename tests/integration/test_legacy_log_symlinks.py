"""The whole kubelet against FakeRuntime: each started container's log is linked into
the containers log directory (``/var/log/containers`` on a node) and the link goes with
the container."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from kubelet.testing import ContainerBehaviour, FakeRuntime

from .kubelet_harness import KUBELET_IMAGES, NODE, WEB, Harness, running_kubelet


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def _links(h: Harness) -> dict[str, str]:
    directory = h.manifests.parent / "containers"
    return {p.name: os.readlink(p) for p in directory.iterdir() if p.is_symlink()}


async def test_started_container_is_linked_and_the_link_goes_with_it(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        path = h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))
        (container,) = h.running("web", "app")
        assert container.log_path  # the path the runtime was given
        assert _links(h) == {f"web-{NODE}_default_app-{container.id}.log": container.log_path}

        await h.restart_kubelet()  # the adopted container keeps its link
        await trio.sleep(5)
        assert [c.id for c in h.running("web", "app")] == [container.id]
        assert _links(h) == {f"web-{NODE}_default_app-{container.id}.log": container.log_path}

        path.unlink()
        gone_at = await h.wait_for(lambda: not h.containers("web"))
        assert _links(h) == {}
        assert gone_at < 20  # removed with the container, not by a later GC sweep


CRASHER = """\
apiVersion: v1
kind: Pod
metadata:
  name: crasher
spec:
  containers:
  - name: app
    image: busybox:1.35
"""


async def test_a_pruned_dead_instance_loses_its_link(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(exit_after=0.5, exit_code=1), container="app")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("crasher.yaml", CRASHER)
        await h.wait_for(lambda: len(fake.calls_of("StartContainer")) >= 3)
        await trio.sleep(1)
        live = {f"crasher-{NODE}_default_app-{c.id}.log" for c in h.containers("crasher")}
        assert len(fake.calls_of("StartContainer")) > len(live)  # some were pruned
        assert set(_links(h)) == live
