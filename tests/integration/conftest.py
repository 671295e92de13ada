"""Integration fixtures: the real grpclib clients against an in-process FakeRuntime."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from kubelet.cri import ImageClient, RuntimeClient, connect
from kubelet.testing import FakeRuntime

from .kubelet_harness import EPOCH


@pytest.fixture
def fake_images() -> tuple[str, ...] | None:
    """The images the runtime holds at the start (None: FakeRuntime's defaults); a test
    module overrides it (``KUBELET_IMAGES`` for tests of the whole kubelet)."""
    return None


@pytest.fixture
def fake_setup() -> Callable[[FakeRuntime], None] | None:
    """What a test module does to the runtime before it serves (private repositories,
    images with users); override it."""
    return None


@pytest.fixture
async def fake(
    aio_loop: None,
    short_tmp: Path,
    fake_images: tuple[str, ...] | None,
    fake_setup: Callable[[FakeRuntime], None] | None,
) -> AsyncIterator[FakeRuntime]:
    """The one FakeRuntime of a test, served in-process on a unix socket."""
    if fake_images is None:
        runtime = FakeRuntime(epoch=EPOCH)
    else:
        runtime = FakeRuntime(epoch=EPOCH, images=list(fake_images))
    if fake_setup is not None:
        fake_setup(runtime)
    async with runtime.serve(short_tmp / "cri.sock"):
        yield runtime


@pytest.fixture
async def clients(fake: FakeRuntime) -> AsyncIterator[tuple[RuntimeClient, ImageClient]]:
    async with connect(fake.endpoint) as pair:
        yield pair
