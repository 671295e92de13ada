"""The whole kubelet against FakeRuntime: a pod start writes no log line at the default
verbosity, as upstream's (its events at ``-v=3``, the sandbox and container lines at
``-v=4``); at ``-v=4`` they are all there."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from kubelet.testing import FakeRuntime

from .kubelet_harness import KUBELET_IMAGES, WEB, running_kubelet


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


async def _start_web(fake: FakeRuntime, tmp: Path) -> None:
    async with running_kubelet(fake, tmp) as h:
        h.write("web.yaml", WEB)
        await h.wait_for(lambda: h.running("web", "app"))


async def test_a_pod_start_logs_nothing_at_the_default_verbosity(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        await _start_web(fake, short_tmp)
    assert [r.getMessage() for r in caplog.records if "web" in r.getMessage()] == []


async def test_at_v4_the_events_sandbox_and_container_are_logged(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG):
        await _start_web(fake, short_tmp)
    text = caplog.text
    assert "sandbox" in text and "created (attempt 0)" in text
    assert "started container app" in text
    assert "Started: Started container app" in text  # the event
