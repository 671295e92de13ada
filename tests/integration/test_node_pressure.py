"""Node pressure, end to end on fake time: the whole kubelet joined to a FakeApiServer,
FakeRuntime reporting scripted container usage, the node's memory and filesystems
scripted (``ScriptedNode``). The right pod is evicted with upstream's message at the
next pass, the condition flips and holds for the transition period, BestEffort pods
are refused meanwhile, and image GC removes the unused images it should."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, cast

import pytest
import trio

from kubelet.stats import UsageReader
from kubelet.stats.host import FsSample
from kubelet.testing import FakeApiServer, FakeRuntime
from kubelet.testing.fakeruntime import IMAGE_FS_MOUNT, FakeContainer
from kubelet.testing.nodestats import GiB, MiB, ScriptedNode

from .cluster_harness import Cluster, start_cluster_kubelet
from .kubelet_harness import EPOCH, KUBELET_IMAGES, NODE


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def _config(tmp: Path, body: str) -> list[str]:
    path = tmp / "kubelet.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        + textwrap.dedent(body)
    )
    return ["--config", str(path)]


def _app(c: Cluster, pod: str) -> FakeContainer | None:
    for container in c.fake.containers.values():
        labels = container.config.labels
        if labels.get("io.kubernetes.pod.name") == pod and container.config.metadata.name == "app":
            return container
    return None


def _running(c: Cluster, pod: str) -> bool:
    app = _app(c, pod)
    return app is not None and app.state == 1  # CONTAINER_RUNNING


def _condition(c: Cluster, kind: str) -> str:
    node = c.api.get("nodes", None, NODE) or {}
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return ""


def _status(c: Cluster, pod: str) -> dict[str, Any]:
    return dict((c.pod(pod) or {}).get("status") or {})


def _resources(memory: str | None) -> dict[str, Any]:
    if memory is None:
        return {}
    return {"resources": {"requests": {"memory": memory}}}


async def test_memory_pressure_evicts_the_pod_furthest_over_its_request(
    fake: FakeRuntime, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, tmp_path, nursery)
        c.node = node = ScriptedNode(tmp_path / "host")
        extra = _config(
            tmp_path,
            """
            evictionHard: {memory.available: 1Gi}
            evictionPressureTransitionPeriod: 30s
            """,
        )
        await start_cluster_kubelet(c, extra=extra)
        usage = {"guaranteed": 500 * MiB, "burstable": 2 * GiB, "besteffort": 300 * MiB}
        requests = {"guaranteed": "1Gi", "burstable": "100Mi", "besteffort": None}
        for name, request in requests.items():
            c.create_pod(name, containers=[{"name": "app", "image": "busybox:1.35",
                                            **_resources(request)}])  # fmt: skip
        await c.wait_for(lambda: all(_running(c, n) for n in usage))
        for name, working_set in usage.items():
            app = _app(c, name)
            assert app is not None
            app.working_set = working_set
        await c.wait_for(lambda: _condition(c, "MemoryPressure") == "False")

        node.set_memory(working_set=node.total_memory - 512 * MiB)  # 512Mi left, under 1Gi
        crossed = trio.current_time()
        stopped = await c.wait_for(lambda: not _running(c, "burstable"), timeout=30)
        node.set_memory(working_set=8 * GiB)  # the eviction freed the memory
        assert stopped - crossed <= 10.5  # the next 10 s pass
        await c.wait_for(lambda: _status(c, "burstable").get("reason") == "Evicted")
        status = _status(c, "burstable")
        assert status["phase"] == "Failed"
        assert status["message"] == (
            "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. "
            "Container app was using 2Gi, request is 100Mi, has larger consumption of memory. "
        )
        disruption = [x for x in status["conditions"] if x["type"] == "DisruptionTarget"]
        assert disruption and disruption[0]["reason"] == "TerminationByKubelet"
        events = [e for e in api.list("events", "default") if e.get("reason") == "Evicted"]
        assert [e["involvedObject"]["name"] for e in events] == ["burstable"]
        assert events[0]["metadata"]["annotations"] == {
            "offending_containers": "app",
            "offending_containers_usage": "2Gi",
            "starved_resource": "memory",
        }
        assert _running(c, "guaranteed") and _running(c, "besteffort")

        await c.wait_for(lambda: _condition(c, "MemoryPressure") == "True", timeout=15)
        c.create_pod("late-besteffort")
        c.create_pod("late-burstable", containers=[{"name": "app", "image": "busybox:1.35",
                                                    **_resources("10Mi")}])  # fmt: skip
        await c.wait_for(lambda: _status(c, "late-besteffort").get("phase") == "Failed")
        refused = _status(c, "late-besteffort")
        assert refused["reason"] == "Evicted"
        assert refused["message"] == (
            "Pod was rejected: The node had condition: [MemoryPressure]. "
        )
        await c.wait_for(lambda: _running(c, "late-burstable"))

        # the condition holds for the transition period after the last crossing, then clears
        cleared = await c.wait_for(lambda: _condition(c, "MemoryPressure") == "False", timeout=60)
        assert 30 <= cleared - crossed <= 30 + 10 + 10 + 1
        assert _running(c, "guaranteed") and _running(c, "besteffort")
        nursery.cancel_scope.cancel()


async def test_image_gc_removes_unused_images_least_recently_used_first(
    fake: FakeRuntime, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    api = FakeApiServer(epoch=EPOCH)
    for name in ("old-a:1", "old-b:1", "old-c:1", "pinned:1", "in-use:1"):
        fake.add_image(name, size=6 * GiB)
    fake.images["docker.io/library/pinned:1"].pinned = True
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, tmp_path, nursery)
        c.node = node = ScriptedNode(tmp_path / "host")
        # 90 % used: over the 85 % high threshold; down to 80 % means freeing 10 GiB
        node.set_fs(IMAGE_FS_MOUNT, capacity=100 * GiB, available=10 * GiB)
        extra = _config(tmp_path, "evictionHard: {memory.available: 100Mi}\n")
        await start_cluster_kubelet(c, extra=extra)
        c.create_pod("user", image="in-use:1")
        c.create_pod("other")  # busybox:1.35
        await c.wait_for(lambda: _running(c, "user") and _running(c, "other"))
        assert c.components is not None and c.components.collectors is not None
        collector = c.components.collectors.images

        # at start every image is younger than imageMinimumGCAge (2m): nothing goes
        await trio.sleep(1)
        assert collector.removed == []
        failed = [e for e in api.list("events", None) if e.get("reason") == "FreeDiskSpaceFailed"]
        assert failed and "Attempted to free 10737418240 bytes" in failed[0]["message"]

        await trio.sleep(300)  # the next collection
        names = {i.repo_tags[0] for i in fake.images.values()}
        assert "docker.io/library/old-a:1" not in names
        assert "docker.io/library/old-b:1" not in names
        # 12 GiB freed is enough: the third unused image stays
        assert "docker.io/library/old-c:1" in names
        assert {
            "docker.io/library/pinned:1",
            "docker.io/library/in-use:1",
            "registry.k8s.io/pause:3.9",
            "docker.io/library/busybox:1.35",
        } <= names
        assert len(collector.removed) == 2
        nursery.cancel_scope.cancel()


async def test_disk_pressure_reclaims_unused_images_before_touching_a_pod(
    fake: FakeRuntime, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    api = FakeApiServer(epoch=EPOCH)
    fake.add_image("big-unused:1", size=12 * GiB)
    pressure = {"on": False}

    def image_fs() -> FsSample:
        # 100 GiB, 10 GiB free while under pressure, plus what image removal freed
        held = sum(i.size for i in fake.images.values())
        free = (10 * GiB if pressure["on"] else 60 * GiB) + 12 * GiB - min(held, 12 * GiB)
        return FsSample(
            capacity=100 * GiB, available=free, used=100 * GiB - free, inodes=1000, inodes_free=900
        )

    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, tmp_path, nursery)
        c.node = node = ScriptedNode(tmp_path / "host")
        node.set_fs_function(IMAGE_FS_MOUNT, image_fs)
        extra = _config(tmp_path, "evictionHard: {imagefs.available: 15%}\n")
        await start_cluster_kubelet(c, extra=extra)
        c.create_pod("web")
        await c.wait_for(lambda: _running(c, "web"))
        await trio.sleep(125)  # every image is now older than imageMinimumGCAge (2m)

        pressure["on"] = True  # 22 GiB free of 100: under 15 % only without the big image
        await c.wait_for(lambda: _condition(c, "DiskPressure") == "True", timeout=30)
        assert "docker.io/library/big-unused:1" not in fake.images
        met = [e for e in api.list("events", None) if e.get("reason") == "EvictionThresholdMet"]
        assert met and met[0]["message"] == "Attempting to reclaim ephemeral-storage"
        # reclaim was enough: no pod was evicted, and the pod keeps running
        await trio.sleep(30)
        assert _running(c, "web")
        assert not [e for e in api.list("events", "default") if e.get("reason") == "Evicted"]
        c.create_pod("refused")
        await c.wait_for(lambda: _status(c, "refused").get("phase") == "Failed")
        assert _status(c, "refused")["message"] == (
            "Pod was rejected: The node had condition: [DiskPressure]. "
        )
        nursery.cancel_scope.cancel()


async def test_emptydir_over_its_size_limit_is_evicted_and_pids_set_pid_pressure(
    fake: FakeRuntime, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, tmp_path, nursery)
        c.node = node = ScriptedNode(tmp_path / "host")
        extra = _config(tmp_path, "evictionHard: {pid.available: '1000'}\n")
        await start_cluster_kubelet(c, extra=extra)
        volume = {"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}
        mount = {"name": "scratch", "mountPath": "/scratch"}
        c.create_pod("writer", volumes=[volume],
                     containers=[{"name": "app", "image": "busybox:1.35",
                                  "volumeMounts": [mount]}])  # fmt: skip
        c.create_pod("quiet")
        await c.wait_for(lambda: _running(c, "writer") and _running(c, "quiet"))
        uid = (c.pod("writer") or {})["metadata"]["uid"]
        scratch = tmp_path / "root" / "pods" / uid / "volumes" / "kubernetes.io~empty-dir"
        (scratch / "scratch" / "fill").write_bytes(b"x" * (2 * MiB))  # the container's write
        await c.wait_for(lambda: _status(c, "writer").get("reason") == "Evicted", timeout=90)
        status = _status(c, "writer")
        assert status["message"] == 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". '
        # a limit eviction is not a threshold eviction: no DisruptionTarget condition
        assert not [x for x in status.get("conditions") or () if x["type"] == "DisruptionTarget"]
        assert _running(c, "quiet") and not _running(c, "writer")
        assert not scratch.exists()  # the volume went with the pod

        node.set_processes(4194304 - 500)  # 500 PIDs left, under 1000
        await c.wait_for(lambda: _condition(c, "PIDPressure") == "True", timeout=30)
        assert _condition(c, "MemoryPressure") == "False"
        nursery.cancel_scope.cancel()


async def test_emptydir_bytes_behind_many_files_are_still_evicted(
    fake: FakeRuntime, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A pass walks a bounded number of a volume's entries (here 50); what lies past them
    is walked by the next passes, so 1.6 MiB spread over 400 files (a pass sees a
    fraction) still puts the emptyDir over its 1Mi limit. The pod next to it stays."""
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, tmp_path, nursery)
        await start_cluster_kubelet(c)
        assert c.components.eviction is not None
        stats = cast(UsageReader, c.components.eviction.summaries).provider
        stats.volumes.max_entries = 50
        volume = {"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}
        mount = {"name": "scratch", "mountPath": "/scratch"}
        c.create_pod("hider", volumes=[volume],
                     containers=[{"name": "app", "image": "busybox:1.35",
                                  "volumeMounts": [mount]}])  # fmt: skip
        c.create_pod("quiet")
        await c.wait_for(lambda: _running(c, "hider") and _running(c, "quiet"))
        uid = (c.pod("hider") or {})["metadata"]["uid"]
        scratch = tmp_path / "root" / "pods" / uid / "volumes" / "kubernetes.io~empty-dir"
        for i in range(400):  # the container's writes: 4 KiB each, 1.6 MiB in all
            (scratch / "scratch" / f"f{i:03d}").write_bytes(b"x" * 4096)
        await c.wait_for(lambda: _status(c, "hider").get("reason") == "Evicted", timeout=120)
        status = _status(c, "hider")
        assert status["message"] == 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". '
        assert _running(c, "quiet") and not _running(c, "hider")
        nursery.cancel_scope.cancel()


async def test_a_runtime_orphan_being_torn_down_is_never_chosen_for_eviction(
    fake: FakeRuntime, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, tmp_path, nursery)
        c.node = node = ScriptedNode(tmp_path / "host")
        extra = _config(tmp_path, "evictionHard: {memory.available: 1Gi}\n")
        await start_cluster_kubelet(c, extra=extra)
        for name in ("orphan", "victim"):
            c.create_pod(name, containers=[{"name": "app", "image": "busybox:1.35"}])
        await c.wait_for(lambda: _running(c, "orphan") and _running(c, "victim"))
        for name, working_set in (("orphan", 3 * GiB), ("victim", 2 * GiB)):
            app = _app(c, name)
            assert app is not None
            app.working_set = working_set

        # the kubelet dies; the pod's API object goes meanwhile: its containers are an
        # orphan to the next kubelet, whose teardown of it hangs in StopContainer
        assert c.scope is not None
        c.scope.cancel()
        await trio.sleep(1)
        api.delete("pods", "default", "orphan", grace=0)
        fake.faults.hang("StopContainer", times=1)
        await start_cluster_kubelet(c, extra=extra)
        await c.wait_for(lambda: fake.calls_of("StopContainer"))
        assert _running(c, "orphan")  # its stop hangs
        assert c.components is not None
        active = c.components.lifecycle.evictor.active_pods()
        assert [p.metadata.name for p in active] == ["victim"]  # GetActivePods: no orphan

        node.set_memory(working_set=node.total_memory - 512 * MiB)
        crossed = trio.current_time()
        stopped = await c.wait_for(lambda: not _running(c, "victim"), timeout=60)
        assert stopped - crossed <= 10.5  # the next pass, not after the orphan's wait
        await c.wait_for(lambda: _status(c, "victim").get("reason") == "Evicted")
        nursery.cancel_scope.cancel()
