"""A kubelet killed in the middle of a pod's teardown finishes it once restarted.

The whole kubelet joined to a FakeApiServer, on FakeRuntime, fake clock. The kubelet is
stopped dead (its task tree cancelled: nothing of it runs afterwards) at each point of a
teardown; the runtime keeps what it had and the API keeps the deletion timestamps. The
restarted kubelet must stop what is left with what is left of the grace period, remove
the sandbox, write the final status and delete the API object (upstream starts the pod
worker of a pod with a deletion timestamp terminating: it never runs again). A static
pod whose manifest went while the kubelet was down is found on the runtime and removed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

from kubelet.testing import ContainerBehaviour, FakeRuntime

from .cluster_harness import Cluster, running_cluster, start_cluster_kubelet
from .kubelet_harness import KUBELET_IMAGES, NODE

GRACE = 5
DOWN = 2.0
"""How long the kubelet stays dead before it is started again."""
SLACK = 3.0
"""What a restarted kubelet may take beyond the grace period left (a relist, a sync)."""
STARTS = ("RunPodSandbox", "CreateContainer", "StartContainer")


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


async def kill_kubelet(c: Cluster) -> None:
    """Stop the kubelet dead, as SIGKILL would: whatever it was doing stops there."""
    assert c.scope is not None
    c.scope.cancel()
    await trio.lowlevel.checkpoint()


async def run_pods(c: Cluster, names: Iterable[str], **spec: Any) -> None:
    for name in names:
        c.create_pod(name, **spec)
    await c.wait_for(lambda: all(c.phase(name) == "Running" for name in names))


async def restart_after_a_while(c: Cluster) -> float:
    """Start the kubelet again ``DOWN`` seconds after it was killed; returns when."""
    await trio.sleep(DOWN)
    c.api.faults.clear()
    c.fake.faults.clear()
    restarted = trio.current_time()
    await start_cluster_kubelet(c)
    return restarted


def calls_since(fake: FakeRuntime, since: float, rpcs: Iterable[str]) -> list[str]:
    wanted = set(rpcs)
    return [call.rpc for call in fake.calls if call.time >= since and call.rpc in wanted]


async def all_gone(c: Cluster, names: Iterable[str], timeout: float = 30.0) -> float | None:
    """When none of ``names`` was left on the runtime or in the API (None: still there
    ``timeout`` seconds on)."""
    names = list(names)

    def gone() -> bool:
        on_node = {s.config.metadata.name for s in c.fake.sandboxes.values()}
        on_node |= {
            x.config.labels.get("io.kubernetes.pod.name", "") for x in c.fake.containers.values()
        }
        return all(c.pod(n) is None and n not in on_node for n in names)

    with trio.move_on_after(timeout):
        return await c.wait_for(gone, timeout=math.inf)
    return None


async def test_pods_deleted_just_before_a_kill_are_finished_after_the_restart(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(stop_takes=math.inf))  # each stop takes the whole grace
    names = [f"p{i}" for i in range(3)]
    async with running_cluster(fake, short_tmp) as c:
        await run_pods(c, names)
        deleted = trio.current_time()
        for name in names:
            c.api.delete("pods", "default", name, grace=GRACE)
        await c.wait_for(lambda: len(fake.calls_of("StopContainer")) == len(names))
        await trio.sleep(0.5)
        await kill_kubelet(c)
        assert all(c.pod(n) is not None for n in names) and len(fake.running()) == len(names)
        restarted = await restart_after_a_while(c)
        left = GRACE - (restarted - deleted)
        done = await all_gone(c, names)
        assert calls_since(fake, restarted, STARTS) == []  # never started again
        assert done is not None and done - restarted <= left + SLACK
        stops = [x for x in fake.calls_of("StopContainer") if x.time >= restarted]
        assert len(stops) == len(names)
        assert all(x.args["timeout"] <= math.ceil(left) for x in stops)  # what was left


async def test_a_kill_between_containers_is_finished_after_the_restart(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(stop_takes=math.inf), container="proxy")
    sidecar = {"name": "proxy", "image": "busybox:1.35", "restartPolicy": "Always"}
    async with running_cluster(fake, short_tmp) as c:
        await run_pods(c, ["web"], initContainers=[sidecar])
        c.api.delete("pods", "default", "web", grace=GRACE)
        # the app stopped; the sidecar's stop (its turn comes after the app's) in flight
        await c.wait_for(lambda: len(fake.calls_of("StopContainer")) == 2)
        assert [x.config.metadata.name for x in fake.running()] == ["proxy"]
        await kill_kubelet(c)
        restarted = await restart_after_a_while(c)
        done = await all_gone(c, ["web"])
        assert calls_since(fake, restarted, STARTS) == []  # never started again
        assert done is not None and done - restarted <= GRACE + SLACK


async def test_a_kill_after_the_sandbox_stop_never_starts_the_pod_again(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    names = ["a", "b"]
    async with running_cluster(fake, short_tmp) as c:
        await run_pods(c, names)
        fake.faults.hang("RemoveContainer")
        for name in names:
            c.api.delete("pods", "default", name, grace=GRACE)
        await c.wait_for(lambda: len(fake.calls_of("RemoveContainer")) == len(names))
        assert len(fake.calls_of("StopPodSandbox")) == len(names)
        await kill_kubelet(c)
        restarted = await restart_after_a_while(c)
        done = await all_gone(c, names)
        assert calls_since(fake, restarted, STARTS) == []  # never started again
        assert done is not None and done - restarted <= SLACK


async def test_a_kill_before_the_final_status_is_written_is_finished(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        await run_pods(c, ["web"])
        c.api.faults.stall("patch", "pods/status")
        c.api.delete("pods", "default", "web", grace=GRACE)
        await c.wait_for(lambda: not fake.sandboxes and not fake.containers)
        await trio.sleep(0.5)
        assert c.phase("web") == "Running"  # the runtime is clean, the API not told
        await kill_kubelet(c)
        restarted = await restart_after_a_while(c)
        done = await all_gone(c, ["web"])
        assert calls_since(fake, restarted, STARTS) == []  # never started again
        assert done is not None and done - restarted <= SLACK


async def test_a_kill_before_the_api_delete_is_finished(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        await run_pods(c, ["web"])
        c.api.faults.stall("delete", "pods")
        c.api.delete("pods", "default", "web", grace=GRACE)
        await c.wait_for(lambda: c.api.requests_of("delete", "pods", name="web"))
        assert c.phase("web") == "Succeeded"  # the final status is written
        await kill_kubelet(c)
        restarted = await restart_after_a_while(c)
        done = await all_gone(c, ["web"])
        assert calls_since(fake, restarted, STARTS) == []  # never started again
        assert done is not None and done - restarted <= SLACK


STATIC = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: busybox:1.35
"""


async def test_a_static_pod_removed_while_the_kubelet_was_down_is_removed(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(STATIC)
    mirror = f"web-{NODE}"
    async with running_cluster(fake, short_tmp, manifests=manifests) as c:
        await c.wait_for(lambda: c.phase(mirror) == "Running")
        await kill_kubelet(c)
        (manifests / "web.yaml").unlink()
        restarted = await restart_after_a_while(c)
        done = await all_gone(c, [mirror])
        assert calls_since(fake, restarted, STARTS) == []  # never started again
        assert done is not None and done - restarted <= GRACE + SLACK


async def test_a_static_pod_killed_in_its_teardown_is_removed_after_the_restart(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(stop_takes=math.inf))
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(STATIC)
    mirror = f"web-{NODE}"
    async with running_cluster(fake, short_tmp, manifests=manifests) as c:
        await c.wait_for(lambda: c.phase(mirror) == "Running")
        (manifests / "web.yaml").unlink()
        await c.wait_for(lambda: fake.calls_of("StopContainer"))
        await kill_kubelet(c)
        restarted = await restart_after_a_while(c)
        done = await all_gone(c, [mirror])
        assert calls_since(fake, restarted, STARTS) == []  # never started again
        assert done is not None and done - restarted <= GRACE + SLACK
