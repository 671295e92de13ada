"""In-place resize on the paths the node itself decides: the whole kubelet, FakeApiServer
+ FakeRuntime.

A memory resize of a container that swaps (LimitedSwap, cgroup v2) and a CPU resize of
a Guaranteed pod under the static CPU manager are Infeasible with upstream's messages
(the resize admit handler's), each counted by ``reason_detail``; a sidecar (restartable
init container) is resized in place like a regular container; and the resize metrics
count what happened (actuations, deferred resizes accepted, the pending gauge); a pod
removed from the API stops counting for resize and admission at once, and one that
terminates hands its room to a Deferred resize.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.testing import FakeRuntime
from kubelet.testing.cgroupfs import v2_tree
from kubelet.testing.fakeproc import fake_proc
from kubelet.testing.fakesysfs import write_sysfs

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES

SWAP_ON = "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 4194304 0 -2\n"
HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
SWAPS = {"requests": {"cpu": "500m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}
PINNED = {"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}}


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def config(tmp: Path, text: str) -> list[str]:
    path = tmp / "kubelet.yaml"
    path.write_text(HEADER + text)
    return ["--config", str(path)]


def resize(c: Cluster, name: str, resources: dict[str, Any], key: str = "containers") -> None:
    patch = {
        "spec": {key: [{"name": "app" if key == "containers" else "side", "resources": resources}]}
    }
    c.api.patch("pods", "default", name, patch, subresource="resize")


def status(c: Cluster, name: str) -> dict[str, Any]:
    return dict((c.pod(name) or {}).get("status") or {})


def condition(c: Cluster, name: str, kind: str) -> dict[str, Any] | None:
    return next((x for x in status(c, name).get("conditions") or [] if x["type"] == kind), None)


def container_status(c: Cluster, name: str, key: str = "containerStatuses") -> dict[str, Any]:
    (found,) = status(c, name)[key]
    return dict(found)


def updates(c: Cluster) -> list[Any]:
    return [r for r in c.fake.calls if r.rpc == "UpdateContainerResources"]


def running(c: Cluster, name: str) -> Any:
    (found,) = [x for x in c.fake.running() if x.config.metadata.name == name]
    return found


def events(c: Cluster, reason: str) -> list[str]:
    return [e["message"] for e in c.api.list("events", "default") if e.get("reason") == reason]


def sample(c: Cluster, name: str, **labels: str) -> float | None:
    assert c.components is not None
    return c.components.metrics.registry.get_sample_value(name, labels)


def swapping_host(tmp: Path) -> Path:
    """A v2 cgroup tree whose kubelet cgroup has the swap controller, and a /proc with a
    swap device: LimitedSwap can be on."""
    v2_tree(tmp / "cgroup")
    (tmp / "cgroup" / "memory.swap.max").write_text("max\n")
    proc = fake_proc(tmp / "proc", swaps=SWAP_ON)
    (proc / "self").symlink_to("1")
    return proc


async def test_a_memory_resize_of_a_container_that_swaps_is_infeasible(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream: a container with swap (LimitedSwap gives a Burstable one some) may not
    change its memory request in place (unless memory restarts it); its CPU may."""
    proc = swapping_host(short_tmp)
    extra = [
        "--fail-swap-on=false",
        *config(short_tmp, "memorySwap:\n  swapBehavior: LimitedSwap\n"),
    ]
    async with running_cluster(fake, short_tmp, extra=extra, cgroup_version=2, proc=proc) as c:
        c.create_pod(
            "web", containers=[{"name": "app", "image": "busybox:1.35", "resources": SWAPS}]
        )
        await c.wait_for(lambda: c.phase("web") == "Running")
        swap = running(c, "app").config.linux.resources.unified["memory.swap.max"]
        assert int(swap) > 0  # the premise: it swaps

        more = {
            "requests": {"cpu": "500m", "memory": "96Mi"},
            "limits": {"cpu": "1", "memory": "128Mi"},
        }
        resize(c, "web", more)
        await c.wait_for(lambda: condition(c, "web", "PodResizePending") is not None)
        pending = condition(c, "web", "PodResizePending")
        assert pending is not None
        assert (pending["reason"], pending["message"]) == (
            "Infeasible",
            "In-place resize of containers with swap is not supported.",
        )
        assert container_status(c, "web")["allocatedResources"] == SWAPS["requests"]
        assert updates(c) == []
        assert len(events(c, "ResizeInfeasible")) == 1
        assert (
            sample(c, "kubelet_pod_infeasible_resizes_total", reason_detail="swap_limitation") == 1
        )
        assert sample(c, "kubelet_pod_pending_resizes", reason="infeasible") == 1

        faster = {
            "requests": {"cpu": "800m", "memory": "64Mi"},
            "limits": {"cpu": "1500m", "memory": "128Mi"},
        }
        resize(c, "web", faster)  # memory as it was: CPU is resized in place
        await c.wait_for(lambda: container_status(c, "web").get("resources") == faster)
        assert condition(c, "web", "PodResizePending") is None
        assert len(updates(c)) == 1


async def test_a_cpu_resize_of_a_pinned_guaranteed_pod_is_infeasible(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream (InPlacePodVerticalScalingExclusiveCPUs off, its default): the static CPU
    manager refuses any CPU resize of a Guaranteed pod, even one that would fit; its
    memory may still change."""
    sys = write_sysfs(short_tmp / "sys", cores=2)
    extra = config(short_tmp, "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\n")
    async with running_cluster(fake, short_tmp, extra=extra, sys=sys) as c:
        c.create_pod(
            "web", containers=[{"name": "app", "image": "busybox:1.35", "resources": PINNED}]
        )
        await c.wait_for(lambda: c.phase("web") == "Running")
        assert running(c, "app").config.linux.resources.cpuset_cpus == "1"

        smaller = {"requests": {"cpu": "500m", "memory": "64Mi"}}
        smaller["limits"] = smaller["requests"]
        resize(c, "web", smaller)
        await c.wait_for(lambda: condition(c, "web", "PodResizePending") is not None)
        pending = condition(c, "web", "PodResizePending")
        assert pending is not None
        assert (pending["reason"], pending["message"]) == (
            "Infeasible",
            'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
        )
        assert container_status(c, "web")["allocatedResources"] == PINNED["requests"]
        assert updates(c) == []
        detail = "guaranteed_pod_cpu_manager_static_policy"
        assert sample(c, "kubelet_pod_infeasible_resizes_total", reason_detail=detail) == 1

        more_memory = {"requests": {"cpu": "1", "memory": "96Mi"}}
        more_memory["limits"] = more_memory["requests"]
        resize(c, "web", more_memory)
        await c.wait_for(lambda: container_status(c, "web").get("resources") == more_memory)
        assert condition(c, "web", "PodResizePending") is None
        assert running(c, "app").config.linux.resources.cpuset_cpus == "1"


async def test_a_sidecar_is_resized_in_place(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    small = {
        "requests": {"cpu": "500m", "memory": "32Mi"},
        "limits": {"cpu": "500m", "memory": "64Mi"},
    }
    big = {"requests": {"cpu": "1", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "96Mi"}}
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        c.create_pod(
            "web",
            initContainers=[
                {
                    "name": "side",
                    "image": "busybox:1.35",
                    "restartPolicy": "Always",
                    "resources": small,
                }
            ],
            containers=[{"name": "app", "image": "busybox:1.35"}],
        )
        await c.wait_for(lambda: c.phase("web") == "Running")
        before = container_status(c, "web", "initContainerStatuses")
        assert before["allocatedResources"] == small["requests"]
        assert before["resources"] == small

        resize(c, "web", big, key="initContainers")
        side = lambda: container_status(c, "web", "initContainerStatuses")  # noqa: E731
        await c.wait_for(lambda: side().get("resources") == big)
        after = side()
        assert after["containerID"] == before["containerID"]  # resized, not restarted
        assert after["restartCount"] == 0
        assert after["allocatedResources"] == big["requests"]
        (update,) = updates(c)
        assert update.args["container_id"] == running(c, "side").id
        now = running(c, "side").resources
        assert (now.cpu_quota, now.memory_limit_in_bytes) == (100_000, 96 * 2**20)
        await c.wait_for(lambda: condition(c, "web", "PodResizeInProgress") is None)
        (started,) = events(c, "ResizeStarted")
        assert '"initContainers":[{"name":"side"' in started


async def test_the_resize_metrics_count_what_happened(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream's names: an actuation's duration by success, the pending gauge by
    reason, a deferred resize accepted by what retried it (another pod's resize that
    shrank it)."""
    small = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    big = {"requests": {"cpu": "1500m"}, "limits": {"cpu": "1500m"}}
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        c.create_pod(
            "web", containers=[{"name": "app", "image": "busybox:1.35", "resources": small}]
        )
        c.create_pod(
            "other",
            containers=[
                {"name": "app", "image": "busybox:1.35", "resources": {"requests": {"cpu": "800m"}}}
            ],
        )
        await c.wait_for(lambda: c.phase("web") == "Running" and c.phase("other") == "Running")
        assert not sample(c, "kubelet_pod_resize_duration_milliseconds_count", success="true")

        resize(c, "web", big)  # 1.5 + 0.8 > 2: Deferred
        await c.wait_for(lambda: condition(c, "web", "PodResizePending") is not None)
        assert sample(c, "kubelet_pod_pending_resizes", reason="deferred") == 1
        assert sample(c, "kubelet_pod_pending_resizes", reason="infeasible") == 0

        c.api.patch(  # the other pod shrinks: there is room now
            "pods",
            "default",
            "other",
            {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "200m"}}}]}},
            subresource="resize",
        )
        await c.wait_for(lambda: container_status(c, "web").get("resources") == big)
        await c.wait_for(lambda: condition(c, "web", "PodResizeInProgress") is None)
        trigger = "pod_resized"
        assert sample(c, "kubelet_pod_deferred_accepted_resizes_total", retry_trigger=trigger) == 1
        assert sample(c, "kubelet_pod_pending_resizes", reason="deferred") == 0
        assert sample(c, "kubelet_pod_in_progress_resizes") == 0
        assert sample(c, "kubelet_pod_resize_duration_milliseconds_count", success="true") == 2
        assert not sample(c, "kubelet_pod_resize_duration_milliseconds_count", success="false")


async def deferred_beside(c: Cluster, other_cpu: str) -> None:
    """``web`` (1 cpu) asks for 1.5 beside ``other`` on a 2-cpu node: Deferred."""
    small = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    c.create_pod("web", containers=[{"name": "app", "image": "busybox:1.35", "resources": small}])
    c.create_pod(
        "other",
        containers=[
            {"name": "app", "image": "busybox:1.35", "resources": {"requests": {"cpu": other_cpu}}}
        ],
    )
    await c.wait_for(lambda: c.phase("web") == "Running" and c.phase("other") == "Running")
    resize(c, "web", BIG)
    await c.wait_for(lambda: condition(c, "web", "PodResizePending") is not None)


BIG = {"requests": {"cpu": "1500m"}, "limits": {"cpu": "1500m"}}


def accepted(c: Cluster) -> dict[str, float]:
    """The deferred resizes accepted, by what retried them."""
    found = {}
    for trigger in ("pods_removed", "pod_terminated", "pod_updated", "periodic_retry"):
        value = sample(c, "kubelet_pod_deferred_accepted_resizes_total", retry_trigger=trigger)
        if value:
            found[trigger] = value
    return found


async def test_a_deferred_resize_is_accepted_as_soon_as_another_pod_is_removed(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A pod deleted at once (grace 0) stops counting when the API removes it, while its
    containers are still stopping (upstream counts the pod manager's pods): the
    Deferred resize waiting for its room is judged again right then, counted
    ``pods_removed``, not at the next periodic retry."""
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        await deferred_beside(c, "800m")
        fake.faults.hang("StopContainer", times=1)  # its container stops slowly
        assert c.api.delete("pods", "default", "other", grace=0) is not None
        removed = trio.current_time()
        await c.wait_for(lambda: condition(c, "web", "PodResizePending") is None)
        assert trio.current_time() - removed < 1.0  # not the periodic retry's 2 s
        assert accepted(c) == {"pods_removed": 1}
        assert len(c.fake.running()) == 2  # the removed pod's container still stops
        await c.wait_for(lambda: container_status(c, "web").get("resources") == BIG)


async def test_a_deferred_resize_is_accepted_when_a_deleted_pod_has_terminated(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A pod deleted gracefully counts until it has stopped; its terminal phase, once
    reported, judges the Deferred resize again (``pod_terminated``)."""
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        await deferred_beside(c, "800m")
        c.api.delete("pods", "default", "other", grace=30)
        await c.wait_for(lambda: condition(c, "web", "PodResizePending") is None)
        assert accepted(c) == {"pod_terminated": 1}
        await c.wait_for(lambda: container_status(c, "web").get("resources") == BIG)


async def test_a_new_pod_is_admitted_beside_a_removed_pod_still_stopping(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Admission counts the same pods as resize: a pod removed from the API (grace 0)
    no longer holds its CPU, though the runtime has not stopped its container yet."""
    wide = {"requests": {"cpu": "1500m"}}
    async with running_cluster(fake, short_tmp) as c:  # 2 cpus
        c.create_pod(
            "old", containers=[{"name": "app", "image": "busybox:1.35", "resources": wide}]
        )
        await c.wait_for(lambda: c.phase("old") == "Running")
        fake.faults.hang("StopContainer", times=1)
        c.api.delete("pods", "default", "old", grace=0)
        await c.wait_for(lambda: bool(fake.calls_of("StopContainer")))
        c.create_pod(
            "new", containers=[{"name": "app", "image": "busybox:1.35", "resources": wide}]
        )
        await c.wait_for(lambda: c.phase("new") in ("Running", "Failed"), timeout=5)
        assert c.phase("new") == "Running"
        assert len(c.fake.running()) == 2  # the old pod's container has not stopped yet
