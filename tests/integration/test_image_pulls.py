"""Image policies and pull back-off through the whole kubelet (FakeRuntime, fake clock)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kubelet.testing import FakeRuntime

from .kubelet_harness import KUBELET_IMAGES, running_kubelet


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def pod(name: str, image: str, policy: str = "") -> str:
    line = f"\n    imagePullPolicy: {policy}" if policy else ""
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: app
    image: {image}{line}
"""


def waiting(h: object, name: str) -> tuple[str, str] | None:
    components = h.components
    assert components is not None
    syncer = components.syncer
    for uid, reasons in syncer.waiting.items():
        pod = components.pods.get(uid)
        if pod is not None and pod.metadata.name.startswith(name + "-"):
            return reasons.get("app")
    return None


async def test_pull_failures_back_off_10_20_40(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("p.yaml", pod("p", "registry.example/app:1"))
        await h.wait_for(lambda: waiting(h, "p") is not None)
        reason, message = waiting(h, "p")  # type: ignore[misc]
        assert reason == "ErrImagePull"
        assert "failed to pull and unpack image" in message
        await trio.sleep(1.5)
        # upstream repeats the last failure while backing off
        assert waiting(h, "p") == (
            "ImagePullBackOff",
            f'Back-off pulling image "registry.example/app:1": ErrImagePull: {message}',
        )
        await trio.sleep(100)
        pulls = [
            round(c.time - fake.calls_of("PullImage")[0].time) for c in fake.calls_of("PullImage")
        ]
        assert pulls[:4] == [0, 10, 30, 70]
        # once the registry has it, the pod starts at the next attempt
        fake.pullable.add("registry.example/app:1")
        await h.wait_for(lambda: h.running("p", "app"), timeout=200)


async def test_never_policy_and_absent_image(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("n.yaml", pod("n", "nginx:1.25", "Never"))
        await h.wait_for(lambda: waiting(h, "n") is not None)
        assert waiting(h, "n") == (
            "ErrImageNeverPull",
            'Container image "nginx:1.25" is not present with pull policy of Never',
        )
        assert fake.calls_of("PullImage") == []


async def test_if_not_present_uses_the_local_image_without_pulling(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("l.yaml", pod("l", "busybox:1.35"))
        await h.wait_for(lambda: h.running("l", "app"))
        assert fake.calls_of("PullImage") == []
        assert fake.calls_of("ImageStatus")


async def test_latest_is_always_pulled(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.pullable.add("docker.io/library/busybox:latest")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("a.yaml", pod("a", "busybox"))
        await h.wait_for(lambda: h.running("a", "app"))
        assert [c.args["image"] for c in fake.calls_of("PullImage")] == ["busybox:latest"]


async def test_invalid_image_name(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("i.yaml", pod("i", "Busy_Box:1"))
        await h.wait_for(lambda: waiting(h, "i") is not None)
        reason, message = waiting(h, "i")  # type: ignore[misc]
        assert reason == "InvalidImageName"
        assert message == (
            'Failed to apply default image tag "Busy_Box:1": couldn\'t parse image name '
            '"Busy_Box:1": invalid reference format'
        )


async def test_pulls_of_one_image_are_shared(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.pullable.add("registry.example/shared:1")
    fake.faults.delay("PullImage", 5)
    async with running_kubelet(fake, short_tmp) as h:
        for i in range(5):
            h.write(f"s{i}.yaml", pod(f"s{i}", "registry.example/shared:1", "IfNotPresent"))
        await h.wait_for(lambda: all(h.running(f"s{i}", "app") for i in range(5)), timeout=30)
        assert len(fake.calls_of("PullImage")) == 1
