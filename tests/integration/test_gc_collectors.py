"""The garbage collectors through the real CRI clients against FakeRuntime: what goes and
what never does (running containers, the newest dead instance, ready sandboxes, images in
use, pinned and sandbox images)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient
from kubelet.gc import GarbageCollectors
from kubelet.gc.collector import ContainerCollector, GcError, ImageCollector
from kubelet.gc.images import ImageGCPolicy
from kubelet.stats import FsUsage
from kubelet.testing import FakeRuntime

from .helpers import container_config, sandbox_config

GiB = 1 << 30


@attrs.define
class Pods:
    gone: set[str] = attrs.field(factory=set)
    terminated: set[str] = attrs.field(factory=set)

    def content_removable(self, uid: str) -> bool:
        return uid in self.gone

    def runtime_removable(self, uid: str) -> bool:
        return uid in self.gone or uid in self.terminated


async def _attempts(runtime: RuntimeClient, pod: str, count: int, *, last_running: bool) -> str:
    """A pod whose container ``app`` ran ``count`` times (the last one maybe still running)."""
    cfg = sandbox_config(pod, f"uid-{pod}")
    sandbox = await runtime.run_pod_sandbox(cfg)
    for attempt in range(count):
        config = container_config("app", pod=pod, uid=f"uid-{pod}", attempt=attempt)
        cid = await runtime.create_container(sandbox, config, cfg)
        await runtime.start_container(cid)
        if attempt < count - 1 or not last_running:
            await runtime.stop_container(cid, 0)
        await trio.sleep(1)
    return sandbox


def _collector(runtime: RuntimeClient, pods: Pods, tmp: Path) -> ContainerCollector:
    return ContainerCollector(
        runtime, pods, lambda: True, str(tmp), lambda: 2e9 + trio.current_time(),
        containers_log_dir=str(tmp / "containers"),
    )  # fmt: skip


async def test_container_gc_keeps_running_and_newest_dead_instances(
    fake: FakeRuntime,
    clients: tuple[RuntimeClient, ImageClient],
    tmp_path: Path,
    autojump_clock: trio.abc.Clock,
) -> None:
    runtime, _ = clients
    pods = Pods(gone={"uid-deleted", "uid-elsewhere"}, terminated={"uid-done"})
    await _attempts(runtime, "web", 4, last_running=True)
    await _attempts(runtime, "done", 3, last_running=False)
    deleted = await _attempts(runtime, "deleted", 2, last_running=False)
    await runtime.stop_pod_sandbox(deleted)
    (tmp_path / "default_deleted_uid-deleted").mkdir()
    (tmp_path / "default_web_uid-web").mkdir()
    # a pod this kubelet never ran and does not know: upstream removes its logs too
    (tmp_path / "default_elsewhere_uid-elsewhere").mkdir()
    before = {c.id: c for c in fake.containers.values()}

    plan = await _collector(runtime, pods, tmp_path).collect()

    left = {c.id: c for c in fake.containers.values()}
    by_pod: dict[str, list[int]] = {}
    for c in left.values():
        by_pod.setdefault(c.config.labels["io.kubernetes.pod.name"], []).append(
            c.config.metadata.attempt
        )
    # web: running attempt 3 and the newest dead one (2); done: its newest dead one (2)
    assert sorted(by_pod["web"]) == [2, 3]
    assert sorted(by_pod["done"]) == [2]
    assert "deleted" not in by_pod  # a removed pod loses every container
    assert len(plan.containers) == len(before) - len(left) == 6
    assert deleted in plan.remove_sandboxes and deleted not in fake.sandboxes
    assert sorted(plan.remove_log_dirs) == [
        "default_deleted_uid-deleted",
        "default_elsewhere_uid-elsewhere",
    ]
    assert not (tmp_path / "default_deleted_uid-deleted").exists()
    assert not (tmp_path / "default_elsewhere_uid-elsewhere").exists()
    assert (tmp_path / "default_web_uid-web").exists()

    # eviction's reclaim: a terminated pod's dead containers go too; running ones never
    await GarbageCollectors(
        _collector(runtime, pods, tmp_path),
        None,  # type: ignore[arg-type]
    ).delete_unused_containers()
    names = [c.config.labels["io.kubernetes.pod.name"] for c in fake.containers.values()]
    assert sorted(names) == ["web", "web"]


async def test_eviction_reclaim_removes_unused_images_but_never_protected_ones(
    fake: FakeRuntime,
    clients: tuple[RuntimeClient, ImageClient],
    autojump_clock: trio.abc.Clock,
) -> None:
    runtime, images = clients
    for name in ("unused:1", "pinned:1", "young:1"):
        fake.add_image(name, size=GiB)
    fake.images["docker.io/library/pinned:1"].pinned = True
    await _attempts(runtime, "web", 1, last_running=True)  # uses busybox

    async def image_fs() -> FsUsage | None:
        return FsUsage(capacity=100 * GiB, available=50 * GiB)

    counted: list[str] = []
    collector = ImageCollector(
        runtime,
        images,
        image_fs,
        lambda: 2e9 + trio.current_time(),
        ImageGCPolicy(min_age=120),
        protected=("registry.k8s.io/pause:3.9",),
        on_removed=counted.append,
    )
    await collector.detect()
    await trio.sleep(121)
    fake.add_image("young:2", size=GiB)  # detected now: younger than the minimum age
    await collector.delete_unused()
    names = {tag for i in fake.images.values() for tag in i.repo_tags}
    assert "docker.io/library/unused:1" not in names
    assert "docker.io/library/young:1" not in names
    assert {
        "docker.io/library/young:2",
        "docker.io/library/pinned:1",
        "registry.k8s.io/pause:3.9",
        "docker.io/library/busybox:latest",
    } <= names
    assert counted == ["space", "space"]  # one per image removed (eviction frees space)


async def test_image_gc_counts_each_removal_with_its_reason(
    fake: FakeRuntime,
    clients: tuple[RuntimeClient, ImageClient],
    autojump_clock: trio.abc.Clock,
) -> None:
    """Unused images past imageMaximumGCAge go for their age; over the high threshold,
    for space: each counted in kubelet_image_garbage_collected_total{reason}."""
    runtime, images = clients
    fake.add_image("stale:1", size=GiB)
    usage = {"available": 50 * GiB}

    async def image_fs() -> FsUsage | None:
        return FsUsage(capacity=100 * GiB, available=usage["available"])

    counted: list[str] = []
    collector = ImageCollector(
        runtime,
        images,
        image_fs,
        lambda: 2e9 + trio.current_time(),
        ImageGCPolicy(min_age=0, max_age=600),
        on_removed=counted.append,
    )
    await collector.detect()
    await trio.sleep(601)
    await collector.collect()  # 50 % used: the age pass only
    aged = len(counted)  # stale:1 and the runtime's other unused images
    assert aged >= 1 and counted == ["age"] * aged
    collector.policy = ImageGCPolicy(min_age=0)  # no age limit from here
    fake.add_image("big:1", size=GiB)
    await collector.detect()
    usage["available"] = 10 * GiB  # 90 % used: over the high threshold (85 %)
    await trio.sleep(1)
    with pytest.raises(GcError):  # 1 GiB of the 5 GiB wanted: FreeDiskSpaceFailed
        await collector.collect()
    assert counted == ["age"] * aged + ["space"]
    names = {tag for i in fake.images.values() for tag in i.repo_tags}
    assert not names & {"docker.io/library/stale:1", "docker.io/library/big:1"}


async def test_container_gc_removes_dead_log_symlinks_but_not_of_a_live_container(
    fake: FakeRuntime,
    clients: tuple[RuntimeClient, ImageClient],
    tmp_path: Path,
    autojump_clock: trio.abc.Clock,
) -> None:
    """/var/log/containers as upstream: a symlink whose target is gone goes, unless the
    runtime still has its container in a state other than exited (log rotation's gap);
    a live target, or a container the runtime no longer knows, decide the rest."""
    runtime, _ = clients
    running = await _attempts(runtime, "web", 1, last_running=True)
    [live] = [c.id for c in fake.containers.values() if c.sandbox_id == running]
    exited = await _attempts(runtime, "done", 1, last_running=False)
    [dead] = [c.id for c in fake.containers.values() if c.sandbox_id == exited]
    links = tmp_path / "containers"
    links.mkdir()
    target = tmp_path / "0.log"
    target.write_text("x")
    cases = {
        "rotating": f"web_default_app-{live}.log",  # target missing, container running: kept
        "exited": f"done_default_app-{dead}.log",  # target missing, container exited: goes
        "unknown": f"old_default_app-{'f' * 64}.log",  # runtime does not know it: goes
        "alive": f"ok_default_app-{'e' * 64}.log",  # target exists: kept
    }
    for name, link in cases.items():
        (links / link).symlink_to(target if name == "alive" else tmp_path / "gone.log")
    await _collector(runtime, Pods(), tmp_path).collect()
    assert sorted(p.name for p in links.iterdir()) == sorted([cases["rotating"], cases["alive"]])


async def test_container_gc_removes_the_log_symlink_of_each_container_it_removes(
    fake: FakeRuntime,
    clients: tuple[RuntimeClient, ImageClient],
    tmp_path: Path,
    autojump_clock: trio.abc.Clock,
) -> None:
    """As upstream's removeContainer: the link goes with the container even while its
    target (the pod's log file) is still there."""
    runtime, _ = clients
    await _attempts(runtime, "web", 4, last_running=True)
    links = tmp_path / "containers"
    links.mkdir()
    target = tmp_path / "0.log"
    target.write_text("x")
    for cid in fake.containers:
        (links / f"web__app-{cid}.log").symlink_to(target)  # no namespace label here
    await _collector(runtime, Pods(), tmp_path).collect()
    left = sorted(f"web__app-{cid}.log" for cid in fake.containers)
    assert len(left) == 2  # the running one and the newest dead one
    assert sorted(p.name for p in links.iterdir()) == left
