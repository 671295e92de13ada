"""Hostile pods and API data against the whole kubelet: the pod concerned is refused or
skipped, every other pod keeps running and the kubelet keeps going."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.testing import FakeRuntime

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def waiting(c: Cluster, name: str) -> dict[str, Any]:
    statuses = ((c.pod(name) or {}).get("status") or {}).get("containerStatuses") or [{}]
    return dict(statuses[0].get("state", {}).get("waiting") or {})


def bomb_env(depth: int = 40) -> list[dict[str, str]]:
    """About 2 KB of env whose last value would be 2^39 characters."""
    env = [{"name": "A0", "value": "x"}]
    env += [{"name": f"A{i}", "value": f"$(A{i - 1})$(A{i - 1})"} for i in range(1, depth)]
    return env


async def test_an_env_expansion_bomb_fails_its_container_only(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod(
            "bomb", containers=[{"name": "app", "image": "busybox:1.35", "env": bomb_env()}]
        )
        c.create_pod("good")
        await c.wait_for(lambda: c.phase("good") == "Running" and waiting(c, "bomb"))
        message = (
            "cannot expand environment variable A21: the expanded value would be longer "
            "than 1048576 characters"
        )
        assert waiting(c, "bomb") == {"reason": "CreateContainerConfigError", "message": message}
        failed = [e for e in c.api.list("events", "default") if e.get("reason") == "Failed"]
        assert [e["message"] for e in failed] == [f"Error: {message}"]
        assert [x.labels["io.kubernetes.pod.name"] for x in fake.running()] == ["good"]
        assert c.phase("good") == "Running"
