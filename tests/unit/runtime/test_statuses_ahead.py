"""Image statuses read while the sandbox is created (``images.StatusesAhead``)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kubelet.api import Pod, from_wire
from kubelet.cri import CriError, api
from kubelet.decisions import Backoff
from kubelet.runtime.images import IMAGE_INSPECT_ERROR, ImageError, ImageManager


class Images:
    """ImageStatus only: counts the reads, answers after ``delay`` or fails."""

    def __init__(self, delay: float = 0.0, error: str = "") -> None:
        self.reads: list[str] = []
        self.delay = delay
        self.error = error

    async def image_status(self, image: str) -> api.Image | None:
        self.reads.append(image)
        await trio.sleep(self.delay)
        if self.error:
            raise CriError("ImageStatus", self.error)
        return api.Image(id=f"sha256:{len(self.reads)}")


def pod(*containers: dict[str, Any]) -> Pod:
    return from_wire(
        Pod,
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": list(containers)},
        },
    )


def manager(images: Images) -> ImageManager:
    return ImageManager(images, Backoff(10, 300, trio.current_time))  # type: ignore[arg-type]


async def test_the_status_read_ahead_is_the_one_ensure_uses(autojump_clock: trio.abc.Clock) -> None:
    images = Images(delay=0.2)
    p = pod({"name": "a", "image": "busybox:1.35"}, {"name": "b", "image": "app:latest"})
    images_manager = manager(images)
    async with trio.open_nursery() as nursery:
        ahead = images_manager.statuses_ahead()
        ahead.start(nursery, list(p.spec.containers))
        await trio.sleep(0.1)  # the sandbox is being created meanwhile
        ref = await images_manager.ensure(p, p.spec.containers[0], None, ahead)
    assert ref == "sha256:1"
    assert images.reads == ["busybox:1.35"]  # app:latest is pulled ("Always"): not read
    assert trio.current_time() == pytest.approx(0.2)  # waited for the read in flight only


async def test_a_failed_read_ahead_fails_the_start_as_a_direct_read_would(
    autojump_clock: trio.abc.Clock,
) -> None:
    images = Images(error="runtime down")
    p = pod({"name": "a", "image": "busybox:1.35"})
    images_manager = manager(images)
    async with trio.open_nursery() as nursery:
        ahead = images_manager.statuses_ahead()
        ahead.start(nursery, list(p.spec.containers))
        with pytest.raises(ImageError) as caught:
            await images_manager.ensure(p, p.spec.containers[0], None, ahead)
    assert caught.value.reason == IMAGE_INSPECT_ERROR
    assert len(images.reads) == 1


async def test_an_answer_is_used_once(autojump_clock: trio.abc.Clock) -> None:
    images = Images()
    p = pod({"name": "a", "image": "busybox:1.35"})
    images_manager = manager(images)
    async with trio.open_nursery() as nursery:
        ahead = images_manager.statuses_ahead()
        ahead.start(nursery, list(p.spec.containers))
        await images_manager.ensure(p, p.spec.containers[0], None, ahead)
        await images_manager.ensure(p, p.spec.containers[0], None, ahead)
    assert len(images.reads) == 2
