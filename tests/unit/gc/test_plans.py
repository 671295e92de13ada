"""Container and image GC decisions (kuberuntime_gc_test.go, image_gc_manager_test.go cases)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

from kubelet.gc.containers import GcContainer, GCPlan, GCPolicy, SandboxInfo, plan
from kubelet.gc.images import (
    FailureTracker,
    ImageGCPolicy,
    ImageInfo,
    ImageRecord,
    detect,
    eviction_order,
    free_space_candidates,
    ids_of,
    not_enough_freed_message,
    old_images,
    space_decision,
)

NOW = 10_000.0
HOUR = 3600.0


def c(
    cid: str,
    uid: str = "p1",
    name: str = "app",
    state: str = "exited",
    age: float = 2 * HOUR,
    sandbox: str | None = None,
) -> GcContainer:
    return GcContainer(cid, name, uid, sandbox or f"s-{uid}", state, NOW - age)


TEST_POLICY = GCPolicy(min_age=HOUR, max_per_pod_container=2, max_containers=6)


def run(
    containers: Sequence[GcContainer],
    sandboxes: Sequence[SandboxInfo] = (),
    *,
    policy: GCPolicy | None = None,
    deleted: Collection[str] = frozenset(),
    terminated: Collection[str] = frozenset(),
    ready: bool = True,
    evict_non_deleted: bool = False,
    log_dirs: Sequence[str] = (),
) -> GCPlan:
    return plan(
        containers,
        sandboxes,
        log_dirs,
        policy=policy or TEST_POLICY,
        now=NOW,
        all_sources_ready=ready,
        content_removable=lambda uid: uid in deleted,
        runtime_removable=lambda uid: uid in terminated or uid in deleted,
        evict_non_deleted=evict_non_deleted,
    )


CONTAINER_CASES: dict[str, tuple[list[GcContainer], GCPolicy | None, dict, set[str]]] = {  # type: ignore[type-arg]
    "no containers should be removed if both limits are unset": (
        [c("a", age=3 * HOUR), c("b", age=2 * HOUR)],
        GCPolicy(min_age=HOUR, max_per_pod_container=-1, max_containers=-1),
        {},
        set(),
    ),
    "all containers should be removed when max container limit is 0": (
        [c("a")],
        GCPolicy(min_age=HOUR, max_per_pod_container=1, max_containers=0),
        {},
        {"a"},
    ),
    "max containers complied when no per-pod limit is set": (
        [c(f"c{i}", age=(10 - i) * HOUR) for i in range(5)],
        GCPolicy(min_age=HOUR, max_per_pod_container=-1, max_containers=4),
        {},
        {"c0"},
    ),
    "no containers removed when limits are not exceeded": (
        [c("a", age=3 * HOUR), c("b", age=2 * HOUR)],
        None,
        {},
        set(),
    ),
    "oldest removed when per-pod limit is exceeded": (
        [c("a", age=3 * HOUR), c("b", age=2 * HOUR), c("c", age=1.5 * HOUR)],
        None,
        {},
        {"a"},
    ),
    "running containers are never removed": (
        [c("a", state="running", age=5 * HOUR), c("b"), c("d", age=1.5 * HOUR)],
        GCPolicy(min_age=HOUR, max_per_pod_container=0, max_containers=0),
        {},
        {"b", "d"},
    ),
    "recently created containers are kept": (
        [c("a", age=3 * HOUR), c("b", age=2 * HOUR), c("new", age=60)],
        GCPolicy(min_age=HOUR, max_per_pod_container=0, max_containers=-1),
        {},
        {"a", "b"},
    ),
    "per-pod limit applies per (UID, container name)": (
        [
            c("a1", name="a", age=3 * HOUR),
            c("a2", name="a", age=2 * HOUR),
            c("b1", name="b", age=3 * HOUR),
            c("b2", name="b", age=2 * HOUR),
        ],
        GCPolicy(min_age=HOUR, max_per_pod_container=1, max_containers=-1),
        {},
        {"a1", "b1"},
    ),
    "node limit keeps one per unit before the oldest go": (
        [
            c(f"{u}-{i}", uid=u, age=(10 - i) * HOUR + k)
            for k, u in enumerate("pqrst")
            for i in range(2)
        ],
        GCPolicy(min_age=HOUR, max_per_pod_container=-1, max_containers=3),
        {},
        # 10 dead over 5 units, 3 allowed: share 3 // 5 → 1 each (the older 5 go), then the
        # oldest 2 of the 5 newest go (t and s were created first: larger k is older here)
        {"p-0", "q-0", "r-0", "s-0", "t-0", "t-1", "s-1"},
    ),
    "containers of deleted pods go when sources are ready": (
        [c("gone", uid="deleted"), c("keep", uid="alive")],
        None,
        {"deleted": True},
        {"gone"},
    ),
    "unknown-state containers are stopped first": (
        [c("u", state="unknown", age=3 * HOUR), c("x", age=2 * HOUR)],
        GCPolicy(min_age=HOUR, max_per_pod_container=0, max_containers=-1),
        {},
        {"u", "x"},
    ),
}


@pytest.mark.parametrize("name", CONTAINER_CASES)
def test_container_gc(name: str) -> None:
    containers, policy, deleted, expected = CONTAINER_CASES[name]
    result = run(containers, policy=policy, deleted=set(deleted))
    assert set(result.containers) == expected
    assert len(result.containers) == len(expected)


def test_default_policy_keeps_newest_dead_instance() -> None:
    dead = [c("old", age=300), c("older", age=600), c("newest", age=10)]
    result = run(dead, policy=GCPolicy())
    assert result.containers == ("older", "old")  # oldest first; "newest" stays for --previous


def test_unknown_container_goes_through_stop() -> None:
    result = run([c("u", state="unknown")], policy=GCPolicy(max_per_pod_container=0))
    assert result.stop_then_remove == ("u",) and result.remove_containers == ()


def test_deleted_pods_wait_for_sources() -> None:
    result = run([c("gone", uid="deleted")], deleted={"deleted"}, ready=False)
    assert result.containers == ()


def test_terminated_pods_only_for_eviction_reclaim() -> None:
    dead = [c("t", uid="terminated")]
    assert run(dead, terminated={"terminated"}).containers == ()
    assert run(dead, terminated={"terminated"}, evict_non_deleted=True).containers == ("t",)


def s(sid: str, uid: str, state: str = "notready", age: float = HOUR) -> SandboxInfo:
    return SandboxInfo(sid, uid, state, NOW - age)


SANDBOX_CASES = {
    # sandboxes, containers, deleted pods → removed sandboxes
    "notready sandbox without containers of a deleted pod": ([s("s1", "p1")], [], {"p1"}, ["s1"]),
    "ready sandbox of a deleted pod stays": ([s("s1", "p1", "ready")], [], {"p1"}, []),
    "notready sandbox with a container stays": (
        [s("s1", "p1")],
        [c("x", uid="p1", state="exited", sandbox="s1", age=60)],
        {"p1"},
        [],
    ),
    "newest sandbox of an existing pod stays": (
        [s("new", "p1", age=60), s("old", "p1", age=600), s("older", "p1", age=900)],
        [],
        set(),
        ["older", "old"],
    ),
    "every empty sandbox of a deleted pod goes, not the ready one": (
        [s("ready", "p1", "ready", age=60), s("old", "p1", age=600)],
        [],
        {"p1"},
        ["old"],
    ),
    "single notready sandbox of an existing pod stays": ([s("s1", "p1")], [], set(), []),
}


@pytest.mark.parametrize("name", SANDBOX_CASES)
def test_sandbox_gc(name: str) -> None:
    sandboxes, containers, deleted, expected = SANDBOX_CASES[name]
    result = run(containers, sandboxes, deleted=deleted, policy=GCPolicy(min_age=HOUR))
    assert list(result.remove_sandboxes) == expected


def test_sandbox_emptied_by_this_collection_goes() -> None:
    dead = c("x", uid="gone", sandbox="s1")
    result = run([dead], [s("s1", "gone")], deleted={"gone"})
    assert result.containers == ("x",) and result.remove_sandboxes == ("s1",)


def test_log_dirs_of_removable_pods() -> None:
    dirs = ["ns_web_uid-1", "ns_db_uid-2", "kube-system_a_b_uid-3"]
    result = run([], deleted={"uid-1", "uid-3"}, log_dirs=dirs)
    assert result.remove_log_dirs == ("ns_web_uid-1", "kube-system_a_b_uid-3")
    assert run([], deleted={"uid-1"}, log_dirs=dirs, ready=False).remove_log_dirs == ()


# -- images ------------------------------------------------------------------------------


def test_detect_records_first_seen_and_last_used() -> None:
    images = [ImageInfo("sha256:a", 1024), ImageInfo("sha256:b", 2048, pinned=True)]
    records = detect({}, images, ["sha256:a"], now=100.0)
    assert records == {
        "sha256:a": ImageRecord(first_detected=100.0, last_used=100.0, size=1024),
        "sha256:b": ImageRecord(first_detected=100.0, size=2048, pinned=True),
    }
    later = detect(records, images[:1], [], now=200.0)
    assert later == {"sha256:a": ImageRecord(first_detected=100.0, last_used=100.0, size=1024)}


def test_eviction_order_lru_then_detected_skipping_in_use_pinned_and_protected() -> None:
    records = {
        "used": ImageRecord(first_detected=0, last_used=50),
        "never-old": ImageRecord(first_detected=10),
        "never-new": ImageRecord(first_detected=20),
        "recent": ImageRecord(first_detected=0, last_used=90),
        "in-use": ImageRecord(first_detected=0, last_used=100),
        "pinned": ImageRecord(first_detected=0, pinned=True),
        "pause": ImageRecord(first_detected=0),
    }
    order = eviction_order(records, in_use=["in-use"], protected=["pause"])
    assert [i for i, _ in order] == ["never-old", "never-new", "used", "recent"]


def test_space_decision_thresholds() -> None:
    policy = ImageGCPolicy(high_threshold_percent=90, low_threshold_percent=80)
    assert space_decision(1000, 600, policy).bytes_to_free == 0  # 40% used
    # 95% used: free down to 80% → 1000*20/100 - 50 = 150
    assert space_decision(1000, 50, policy).bytes_to_free == 150
    assert space_decision(1000, 100, policy).usage_percent == 90
    assert space_decision(1000, 100, policy).bytes_to_free == 100
    assert space_decision(1000, 5000, policy).bytes_to_free == 0  # available capped at capacity
    with pytest.raises(ValueError, match="invalid capacity 0 on image filesystem"):
        space_decision(0, 0, policy)


def test_free_space_skips_young_and_just_used_images() -> None:
    policy = ImageGCPolicy(min_age=120.0)
    order = [
        ("young", ImageRecord(first_detected=NOW - 60, size=1)),
        ("old", ImageRecord(first_detected=NOW - 600, last_used=NOW - 300, size=450)),
        ("used-now", ImageRecord(first_detected=NOW - 600, last_used=NOW, size=9)),
    ]
    assert free_space_candidates(order, policy, NOW) == [("old", 450)]
    assert free_space_candidates(order, ImageGCPolicy(min_age=0), NOW) == [
        ("young", 1),
        ("old", 450),
    ]


def test_not_enough_freed_event_text() -> None:
    assert not_enough_freed_message(150, 50) == (
        "Failed to garbage collect required amount of images. Attempted to free 150 bytes, "
        "but only found 50 bytes eligible to free."
    )


def test_max_age() -> None:
    policy = ImageGCPolicy(max_age=HOUR)
    order = [
        ("stale", ImageRecord(first_detected=0, last_used=NOW - 2 * HOUR)),
        ("fresh", ImageRecord(first_detected=0, last_used=NOW - 60)),
        ("never-used", ImageRecord(first_detected=NOW - 60)),
    ]
    assert old_images(order, policy, NOW, began=NOW - 30 * 60) == []  # kubelet too young
    assert old_images(order, policy, NOW, began=0) == ["stale", "never-used"]
    assert old_images(order, ImageGCPolicy(), NOW, began=0) == []


POLICY_CASES = {
    "defaults": (ImageGCPolicy(), None),
    "high over 100": (
        ImageGCPolicy(high_threshold_percent=101),
        "invalid HighThresholdPercent 101",
    ),
    "low negative": (ImageGCPolicy(low_threshold_percent=-1), "invalid LowThresholdPercent -1"),
    "low above high": (
        ImageGCPolicy(high_threshold_percent=50, low_threshold_percent=60),
        "LowThresholdPercent 60 can not be higher than HighThresholdPercent 50",
    ),
}


@pytest.mark.parametrize("name", POLICY_CASES)
def test_policy_validation(name: str) -> None:
    policy, error = POLICY_CASES[name]
    if error is None:
        policy.validate()
    else:
        with pytest.raises(ValueError, match=error):
            policy.validate()


def test_disabled_only_at_100_percent_without_max_age() -> None:
    assert not ImageGCPolicy(high_threshold_percent=100).enabled
    assert ImageGCPolicy(high_threshold_percent=100, max_age=HOUR).enabled
    assert ImageGCPolicy().enabled


def test_failure_tracker_reports_repeats_only() -> None:
    t = FailureTracker()
    assert t.failed() is False
    assert t.failed() is True
    assert t.succeeded() is True
    assert t.failed() is False


def test_ids_of_sandbox_image_by_tag() -> None:
    images = [
        ImageInfo("sha256:p", 1, repo_tags=("registry.k8s.io/pause:3.9",)),
        ImageInfo("sha256:b", 1, repo_tags=("docker.io/library/busybox:latest",)),
        ImageInfo("sha256:d", 1, repo_digests=("example.com/x@sha256:abc",)),
    ]
    assert ids_of(images, ["registry.k8s.io/pause:3.9"]) == {"sha256:p"}
    assert ids_of(images, ["docker.io/library/busybox"]) == {"sha256:b"}
    assert ids_of(images, ["example.com/x@sha256:abc", "sha256:p"]) == {"sha256:d", "sha256:p"}
