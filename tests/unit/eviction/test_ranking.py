"""Eviction order per signal (upstream helpers_test.go TestOrderedBy* cases, restated)."""

from __future__ import annotations

import pytest

from kubelet.api import Container, Pod
from kubelet.cgroups import resource_limit, resource_request
from kubelet.eviction.ranking import FsKind, disk_usage_kinds, rank
from kubelet.eviction.thresholds import Signal
from kubelet.stats import PodUsage

from .evictionkit import Mi, disk_usage, empty_dir, memory_usage, pod, resources, stats_of

MEM = Signal.MEMORY_AVAILABLE
NODEFS = Signal.NODEFS_AVAILABLE


def names(pods: list[Pod]) -> list[str]:
    return [p.metadata.name for p in pods]


def test_memory_exceeds_request_first() -> None:
    below = pod("below-requests", -1, {"memory": "200Mi"})
    exceeds = pod("exceeds-requests", 1, {"memory": "100Mi"})
    stats = stats_of([memory_usage(below, "199Mi"), memory_usage(exceeds, "101Mi")])
    assert names(rank(MEM, [below, exceeds], stats)) == ["exceeds-requests", "below-requests"]


def test_memory_priority_then_usage_above_request() -> None:
    # upstream TestOrderedByPriorityMemory: exceeds first, then low priority, then usage
    pods = [
        pod("below-requests-high-priority-low-usage", 1, {"memory": "1Gi"}),
        pod("below-requests-low-priority-high-usage", -1, {"memory": "1Gi"}),
        pod("above-requests-high-priority-high-usage", 1, {"memory": "100Mi"}),
        pod("above-requests-low-priority-low-usage", -1, {"memory": "100Mi"}),
        pod("above-requests-low-priority-high-usage", -1, {"memory": "100Mi"}),
        pod("above-requests-high-priority-low-usage", 1, {"memory": "100Mi"}),
        pod("below-requests-low-priority-low-usage", -1, {"memory": "1Gi"}),
        pod("below-requests-high-priority-high-usage", 1, {"memory": "1Gi"}),
    ]
    usage = {
        "below-requests-high-priority-low-usage": "200Mi",
        "below-requests-low-priority-high-usage": "900Mi",
        "above-requests-high-priority-high-usage": "800Mi",
        "above-requests-low-priority-low-usage": "200Mi",
        "above-requests-low-priority-high-usage": "800Mi",
        "above-requests-high-priority-low-usage": "200Mi",
        "below-requests-low-priority-low-usage": "200Mi",
        "below-requests-high-priority-high-usage": "900Mi",
    }
    stats = stats_of([memory_usage(p, usage[p.metadata.name]) for p in pods])
    assert names(rank(MEM, pods, stats)) == [
        "above-requests-low-priority-high-usage",
        "above-requests-low-priority-low-usage",
        "above-requests-high-priority-high-usage",
        "above-requests-high-priority-low-usage",
        "below-requests-low-priority-high-usage",
        "below-requests-low-priority-low-usage",
        "below-requests-high-priority-high-usage",
        "below-requests-high-priority-low-usage",
    ]


def test_best_effort_always_exceeds_and_pods_without_stats_go_first() -> None:
    guaranteed = pod("guaranteed", 0, {"memory": "1Gi"}, {"memory": "1Gi"})
    best_effort = pod("best-effort", 0)
    unknown = pod("no-stats", 0, {"memory": "1Gi"})
    stats = stats_of([memory_usage(guaranteed, "2Gi"), memory_usage(best_effort, "1Mi")])
    ranked = names(rank(MEM, [guaranteed, best_effort, unknown], stats))
    # no stats first; then both exceed (2Gi > 1Gi, 1Mi > 0): larger usage above request
    assert ranked == ["no-stats", "guaranteed", "best-effort"]


def test_priority_alone() -> None:
    low = pod("low-priority", -134)
    medium = pod("medium-priority", 1, {"memory": "100Mi"}, {"memory": "200Mi"})
    high = pod("high-priority", 12534, {"memory": "200Mi"}, {"memory": "200Mi"})
    stats = stats_of([memory_usage(p, "0") for p in (low, medium, high)])
    ranked = rank(Signal.PID_AVAILABLE, [high, medium, low], stats)
    assert names(ranked) == ["low-priority", "medium-priority", "high-priority"]


def test_disk_exceeds_request_first() -> None:
    below = pod("below-requests", -1, {"ephemeral-storage": "200Mi"})
    exceeds = pod("exceeds-requests", 1, {"ephemeral-storage": "100Mi"})
    stats = stats_of(
        [disk_usage(below, "100Mi", "99Mi", "0"), disk_usage(exceeds, "90Mi", "11Mi", "0")]
    )
    assert names(rank(NODEFS, [below, exceeds], stats)) == ["exceeds-requests", "below-requests"]


def test_disk_usage_above_request() -> None:
    # upstream TestOrderedbyDisk: rootfs + logs + local volume, minus the request
    vol = (empty_dir(),)
    cases = [
        ("best-effort-high", None, ("50Mi", "100Mi", "150Mi")),  # 300Mi
        ("best-effort-low", None, ("25Mi", "25Mi", "50Mi")),  # 100Mi
        ("burstable-high", "100Mi", ("150Mi", "150Mi", "50Mi")),  # 350 - 100 = 250Mi
        ("burstable-low", "100Mi", ("25Mi", "35Mi", "50Mi")),  # 110 - 100 = 10Mi
        ("guaranteed-high", "400Mi", ("225Mi", "100Mi", "50Mi")),  # 375 - 400 = -25Mi
        ("guaranteed-low", "400Mi", ("25Mi", "45Mi", "50Mi")),  # 120 - 400 = -280Mi
    ]
    pods, usages = [], []
    for name, request, (root, logs, volume) in cases:
        p = pod(name, 0, {"ephemeral-storage": request} if request else {}, volumes=vol)
        pods.append(p)
        usages.append(disk_usage(p, root, logs, volume))
    stats = stats_of(usages)
    ranked = names(rank(NODEFS, pods, stats))
    # all exceed except the guaranteed ones; same priority; then usage above request
    assert ranked == [
        "best-effort-high",
        "burstable-high",
        "best-effort-low",
        "burstable-low",
        "guaranteed-high",
        "guaranteed-low",
    ]


def test_inodes() -> None:
    vol = (empty_dir(),)
    pods = [pod(n, 0, volumes=vol) for n in ("low", "medium", "high")]
    inodes = {
        "low": (50000, 100000, 50000),
        "medium": (100000, 150000, 50000),
        "high": (200000, 150000, 50000),
    }
    usages = [
        disk_usage(
            p,
            "0",
            "0",
            "0",
            rootfs_inodes=inodes[p.metadata.name][0],
            logs_inodes=inodes[p.metadata.name][1],
            volume_inodes=inodes[p.metadata.name][2],
        )
        for p in pods
    ]
    ranked = rank(Signal.NODEFS_INODES_FREE, pods, stats_of(usages))
    assert names(ranked) == ["high", "medium", "low"]


def test_pids_priority_then_process_count() -> None:
    pods = [
        pod("high-priority-high-usage", 1),
        pod("low-priority-low-usage", -1),
        pod("low-priority-high-usage", -1),
        pod("high-priority-low-usage", 1),
    ]
    counts = {
        "high-priority-high-usage": 900,
        "low-priority-low-usage": 100,
        "low-priority-high-usage": 900,
        "high-priority-low-usage": 100,
    }
    stats = stats_of([PodUsage(uid=p.uid, process_count=counts[p.metadata.name]) for p in pods])
    assert names(rank(Signal.PID_AVAILABLE, pods, stats)) == [
        "low-priority-high-usage",
        "low-priority-low-usage",
        "high-priority-high-usage",
        "high-priority-low-usage",
    ]


KINDS = {
    # signal, dedicated imagefs, split containerfs → fs kinds measured
    "one fs, nodefs": (
        NODEFS,
        False,
        False,
        (FsKind.IMAGES, FsKind.ROOT, FsKind.LOGS, FsKind.LOCAL_VOLUMES),
    ),
    "imagefs, nodefs": (NODEFS, True, False, (FsKind.LOGS, FsKind.LOCAL_VOLUMES)),
    "imagefs, imagefs": (Signal.IMAGEFS_AVAILABLE, True, False, (FsKind.ROOT, FsKind.IMAGES)),
    "imagefs, containerfs": (
        Signal.CONTAINERFS_AVAILABLE,
        True,
        False,
        (FsKind.ROOT, FsKind.IMAGES),
    ),
    "split, nodefs": (NODEFS, True, True, (FsKind.LOGS, FsKind.LOCAL_VOLUMES, FsKind.ROOT)),
    "split, imagefs": (Signal.IMAGEFS_INODES_FREE, True, True, (FsKind.IMAGES,)),
}


@pytest.mark.parametrize("name", KINDS)
def test_disk_usage_kinds(name: str) -> None:
    signal, dedicated, split, expected = KINDS[name]
    assert disk_usage_kinds(signal, dedicated, split) == expected


def test_with_dedicated_imagefs_nodefs_ranks_on_logs_and_volumes_only() -> None:
    big_root = pod("big-rootfs", 0, volumes=(empty_dir(),))
    big_logs = pod("big-logs", 0, volumes=(empty_dir(),))
    stats = stats_of(
        [disk_usage(big_root, "900Mi", "1Mi", "1Mi"), disk_usage(big_logs, "1Mi", "100Mi", "1Mi")]
    )
    assert names(rank(NODEFS, [big_root, big_logs], stats, dedicated_image_fs=True)) == [
        "big-logs",
        "big-rootfs",
    ]
    assert names(rank(NODEFS, [big_root, big_logs], stats)) == ["big-rootfs", "big-logs"]


def test_memory_medium_empty_dir_is_not_local_disk() -> None:
    from kubelet.api import Volume

    tmpfs = pod("tmpfs", 0, volumes=(Volume(name="local-volume", empty_dir={"medium": "Memory"}),))
    disk = pod("disk", 0, volumes=(empty_dir(),))
    stats = stats_of([disk_usage(tmpfs, "0", "0", "500Mi"), disk_usage(disk, "0", "0", "100Mi")])
    assert names(rank(NODEFS, [tmpfs, disk], stats)) == ["disk", "tmpfs"]


def test_pod_request_sidecars_init_and_overhead() -> None:
    from kubelet.api import PodSpec

    p = pod("p", 0, containers=[Container(name="app", resources=resources({"memory": "100Mi"}))])
    spec = PodSpec(
        containers=p.spec.containers,
        init_containers=(
            Container(
                name="sidecar", restart_policy="Always", resources=resources({"memory": "50Mi"})
            ),
            Container(name="init", resources=resources({"memory": "300Mi"}, {"memory": "1Gi"})),
        ),
        overhead={"memory": "10Mi"},  # type: ignore[dict-item]
    )
    import attrs

    p = attrs.evolve(p, spec=spec)
    # regular + sidecar = 150Mi; init with the sidecar before it = 350Mi; + overhead
    assert resource_request(p, "memory") == 360 * Mi
    assert resource_request(p, "cpu") == 0
    limit = resource_limit(p, "memory")
    assert limit is not None and str(limit) == "1034Mi"  # the init container alone + overhead


def test_pod_level_resources_replace_containers() -> None:
    import attrs

    p = pod("p", 0, {"memory": "100Mi", "ephemeral-storage": "1Gi"})
    p = attrs.evolve(p, spec=attrs.evolve(p.spec, resources=resources({"memory": "1Gi"})))
    assert resource_request(p, "memory") == 1024 * Mi
    assert resource_request(p, "ephemeral-storage") == 0
    assert resource_request(p, "memory", pod_level_resources=False) == 100 * Mi


def test_overhead_goes_only_on_a_limit_that_is_set_and_not_zero() -> None:
    # upstream PodLimits: the cgroup, the tmpfs size and eviction read the same figure
    import attrs

    p = pod("p", 0, None, {"ephemeral-storage": "0"})
    p = attrs.evolve(p, spec=attrs.evolve(p.spec, overhead={"ephemeral-storage": "1Gi"}))
    limit = resource_limit(p, "ephemeral-storage")
    assert limit is not None and limit.amount == 0
    q = pod("q", 0, None, {"ephemeral-storage": "1Gi"})
    q = attrs.evolve(q, spec=attrs.evolve(q.spec, overhead={"ephemeral-storage": "1Gi"}))
    assert str(resource_limit(q, "ephemeral-storage")) == "2Gi"
