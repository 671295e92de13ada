"""A pod removed while its container's StartContainer is in flight: the call runs to its
answer before the teardown stops the container. containerd 1.6, cancelled while it
creates the task, keeps the task and records the container exited, and then no CRI call
can remove the container or its sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kubelet.testing import FakeRuntime

from .kubelet_harness import KUBELET_IMAGES, WEB, running_kubelet


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


async def test_a_start_in_flight_is_answered_before_the_teardown(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.faults.delay("StartContainer", 3.0, times=1)
    async with running_kubelet(fake, short_tmp) as h:
        manifest = h.write("web.yaml", WEB)
        await h.wait_for(lambda: fake.calls_of("StartContainer"))
        manifest.unlink()
        await h.wait_for(lambda: not h.sandboxes("web"), timeout=30)
    (start,) = fake.calls_of("StartContainer")
    assert start.outcome == "ok"
    (stop,) = fake.calls_of("StopContainer")
    assert start.finished is not None
    assert stop.time >= start.finished
    assert not h.containers("web")
