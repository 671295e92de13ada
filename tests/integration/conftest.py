"""Integration fixtures: the real grpclib clients against an in-process FakeRuntime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubelet.cri import ImageClient, RuntimeClient, connect
from kubelet.testing import FakeRuntime


@pytest.fixture
async def fake(aio_loop: None, short_tmp: Path) -> AsyncIterator[FakeRuntime]:
    runtime = FakeRuntime(epoch=1_800_000_000.0)
    async with runtime.serve(short_tmp / "cri.sock"):
        yield runtime


@pytest.fixture
async def clients(fake: FakeRuntime) -> AsyncIterator[tuple[RuntimeClient, ImageClient]]:
    async with connect(fake.endpoint) as pair:
        yield pair
