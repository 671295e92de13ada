"""Node reclaim per signal, the pod chosen, its grace period, status, message; admission.

Messages and statuses are upstream's exact strings (eviction_manager_test.go
TestMemoryPressure_VerifyPodStatus, TestPIDPressure_VerifyPodStatus,
TestDiskPressureNodeFs_VerifyPodStatus; helpers.go formats).
"""

from __future__ import annotations

import attrs
import pytest

from kubelet.api import PodCondition, Toleration
from kubelet.decisions import is_critical_pod, pod_qos
from kubelet.eviction import eviction_conditions, parse_thresholds
from kubelet.eviction.admission import admit
from kubelet.eviction.decide import (
    Reclaim,
    choose_eviction,
    local_storage_candidates,
    local_storage_evictions,
    node_reclaim,
)
from kubelet.eviction.messages import eviction_message
from kubelet.eviction.observations import Observation, observe_signals
from kubelet.eviction.ranking import rank
from kubelet.eviction.state import EvictionState, step
from kubelet.eviction.thresholds import Signal
from kubelet.stats import PodUsage

from .evictionkit import (
    Mi,
    disk_summary,
    disk_usage,
    empty_dir,
    memory_summary,
    memory_usage,
    pod,
    stats_of,
)

C, IMG = Reclaim.CONTAINERS, Reclaim.IMAGES
RECLAIM = {
    # signal, dedicated imagefs, split containerfs → node reclaim
    "memory: none": (Signal.MEMORY_AVAILABLE, False, False, ()),
    "pids: none": (Signal.PID_AVAILABLE, True, True, ()),
    "one fs, nodefs": (Signal.NODEFS_AVAILABLE, False, False, (C, IMG)),
    "one fs, imagefs inodes": (Signal.IMAGEFS_INODES_FREE, False, False, (C, IMG)),
    "imagefs, nodefs: logs only": (Signal.NODEFS_AVAILABLE, True, False, ()),
    "imagefs, imagefs": (Signal.IMAGEFS_AVAILABLE, True, False, (C, IMG)),
    "imagefs, containerfs": (Signal.CONTAINERFS_INODES_FREE, True, False, (C, IMG)),
    "split, imagefs": (Signal.IMAGEFS_AVAILABLE, True, True, (IMG,)),
    "split, nodefs": (Signal.NODEFS_AVAILABLE, True, True, (C,)),
    "split, containerfs": (Signal.CONTAINERFS_AVAILABLE, True, True, (C,)),
}


@pytest.mark.parametrize("name", RECLAIM)
def test_node_reclaim(name: str) -> None:
    signal, dedicated, split, expected = RECLAIM[name]
    assert node_reclaim(signal, dedicated, split) == expected


def one_pass(thresholds, summary, pods, *, max_grace: int = 0):  # type: ignore[no-untyped-def]
    obs = observe_signals(summary.node)
    result = step(EvictionState(), thresholds, obs, 0.0, 300.0)
    threshold = result.act_on[0]
    from kubelet.eviction.thresholds import SIGNAL_RESOURCE

    stats = stats_of(summary.pods)
    ranked = rank(threshold.signal, pods, stats)
    return choose_eviction(
        threshold,
        SIGNAL_RESOURCE[threshold.signal],
        result.act_on,
        obs,
        ranked,
        stats,
        max_pod_grace_period=max_grace,
        is_critical=is_critical_pod,
    )


def test_memory_pressure_message_names_threshold_available_and_container() -> None:
    app = pod("app", 0, {"memory": "100Mi"}, generation=3)
    other = pod("other", 0, {"memory": "1Gi"})
    summary = memory_summary(
        "50Mi", [memory_usage(app, "300Mi", "300Mi"), memory_usage(other, "200Mi", "200Mi")]
    )
    eviction = one_pass(parse_thresholds({"memory.available": "100Mi"}), summary, [other, app])
    assert eviction is not None and eviction.pod is app
    text = (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
        "Container app was using 300Mi, request is 100Mi, has larger consumption of memory. "
    )
    assert eviction.message.text == text
    assert eviction.message.annotations == {
        "offending_containers": "app",
        "offending_containers_usage": "300Mi",
        "starved_resource": "memory",
    }
    assert eviction.grace_period_override == 1  # hard threshold
    assert eviction_conditions(eviction, "2025-01-01T00:00:00Z") == (
        PodCondition(
            type="DisruptionTarget",
            status="True",
            observed_generation=3,
            last_transition_time="2025-01-01T00:00:00Z",
            reason="TerminationByKubelet",
            message=text,
        ),
    )


def test_memory_message_without_container_names_upstream_case() -> None:
    # TestMemoryPressure_VerifyPodStatus: container stats carry no names → no container part
    below = pod("below-requests", 0, {"memory": "1Gi"}, {"memory": "1Gi"})
    above = pod("above-requests", 0, {"memory": "100Mi"}, {"memory": "1Gi"})
    usages = [
        attrs.evolve(memory_usage(p, ws), memory=None, containers=())
        for p, ws in ((below, "900Mi"), (above, "700Mi"))
    ]
    summary = memory_summary("1500Mi", usages)
    eviction = one_pass(parse_thresholds({"memory.available": "2Gi"}), summary, [below, above])
    assert eviction is not None
    assert eviction.message.text == (
        "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. "
    )


def test_pid_pressure_message() -> None:
    from kubelet.stats import NodeUsage, Summary

    pods = [pod("pod1", -1), pod("pod2", 0)]
    summary = Summary(
        node=NodeUsage(max_pid=1500, num_processes=1000),
        pods=tuple(PodUsage(uid=p.uid, process_count=2) for p in pods),
    )
    eviction = one_pass(parse_thresholds({"pid.available": "1200"}), summary, pods)
    assert eviction is not None and eviction.pod.metadata.name == "pod1"
    assert eviction.message.text == (
        "The node was low on resource: pids. Threshold quantity: 1200, available: 500. "
    )


def test_disk_pressure_message() -> None:
    above = pod("above-requests", 0, {"ephemeral-storage": "100Mi"}, {"ephemeral-storage": "1Gi"})
    below = pod("below-requests", 0, {"ephemeral-storage": "1Gi"}, {"ephemeral-storage": "1Gi"})
    summary = disk_summary(
        "1.5Gi",
        "10Gi",
        pods=[disk_usage(above, "600Mi", "100Mi", "0"), disk_usage(below, "100Mi", "100Mi", "0")],
    )
    eviction = one_pass(parse_thresholds({"nodefs.available": "2Gi"}), summary, [below, above])
    assert eviction is not None and eviction.pod is above
    assert eviction.message.text == (
        "The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, "
        "available: 1536Mi. Container above-requests was using 700Mi, request is 100Mi, "
        "has larger consumption of ephemeral-storage. "
    )


def test_inode_message_prints_counts_in_decimal() -> None:
    p = pod("p", 0, volumes=(empty_dir(),))
    summary = disk_summary(
        "10Gi", "10Gi", pods=[disk_usage(p, "0", "0", "0")], nodefs_inodes=(1500, 1_000_000)
    )
    eviction = one_pass(parse_thresholds({"nodefs.inodesFree": "5%"}), summary, [p])
    assert eviction is not None
    assert eviction.message.text == (
        "The node was low on resource: inodes. Threshold quantity: 50000, available: 1500. "
    )


def test_message_of_pod_without_stats_has_no_annotations() -> None:
    p = pod("p", 0)
    msg = eviction_message("memory", p, None, (), {})
    assert msg.text == "The node was low on resource: memory. "
    assert msg.annotations == {}


def test_pod_level_resources_in_message() -> None:
    from kubelet.eviction.messages import OFFENDING_POD, OFFENDING_POD_USAGE

    from .evictionkit import resources

    p = pod("p", 0)
    p = attrs.evolve(p, spec=attrs.evolve(p.spec, resources=resources({"memory": "100Mi"})))
    msg = eviction_message("memory", p, memory_usage(p, "200Mi"), (), {})
    assert msg.text == (
        "The node was low on resource: memory. "
        "Pod p was using 200Mi, request is 100Mi, has larger consumption of memory. "
    )
    assert msg.annotations[OFFENDING_POD] == "p"
    assert msg.annotations[OFFENDING_POD_USAGE] == "200Mi"


def test_critical_pods_are_never_chosen() -> None:
    static = pod("static", 0, annotations={"kubernetes.io/config.source": "file"})
    mirror = pod("mirror", 0, annotations={"kubernetes.io/config.mirror": "abc"})
    system = pod("system", 2_000_000_000)
    usages = [memory_usage(p, "1Gi") for p in (static, mirror, system)]
    summary = memory_summary("50Mi", usages)
    thresholds = parse_thresholds({"memory.available": "100Mi"})
    assert one_pass(thresholds, summary, [static, mirror, system]) is None
    plain = pod("plain", 1000, {"memory": "2Gi"})
    summary = memory_summary("50Mi", [*usages, memory_usage(plain, "1Mi")])
    eviction = one_pass(thresholds, summary, [static, mirror, system, plain])
    assert eviction is not None and eviction.pod is plain


GRACE = {
    # max pod grace period, pod's terminationGracePeriodSeconds → override
    "soft, pod unset": (30, None, 30),
    "soft, pod shorter": (30, 10, 10),
    "soft, pod longer": (30, 60, 30),
    "soft, default max of 0": (0, 30, 0),
}


@pytest.mark.parametrize("name", GRACE)
def test_soft_eviction_grace_period(name: str) -> None:
    max_grace, own, expected = GRACE[name]
    p = pod("p", 0, grace=own)
    thresholds = parse_thresholds({}, {"memory.available": "1Gi"}, {"memory.available": "0s1ns"})
    summary = memory_summary("50Mi", [memory_usage(p, "1Gi")])
    obs = observe_signals(summary.node)
    state = step(EvictionState(), thresholds, obs, 0.0, 300.0).state
    result = step(
        state, thresholds, observe_signals(memory_summary("50Mi", time=5.0).node), 5.0, 300.0
    )
    (threshold,) = result.act_on
    eviction = choose_eviction(
        threshold,
        "memory",
        result.act_on,
        obs,
        [p],
        stats_of(summary.pods),
        max_pod_grace_period=max_grace,
        is_critical=is_critical_pod,
    )
    assert eviction is not None and eviction.grace_period_override == expected


def test_local_storage_limits() -> None:
    from kubelet.api import Container

    from .evictionkit import resources

    over_dir = pod("empty-dir", 0, volumes=(empty_dir("cache", "100Mi"),))
    under_dir = pod("under", 0, volumes=(empty_dir("cache", "1Gi"),))
    pod_limit = pod(
        "pod-limit",
        0,
        containers=[
            Container(name="a", resources=resources(limits={"ephemeral-storage": "100Mi"})),
            Container(name="b", resources=resources(limits={"ephemeral-storage": "100Mi"})),
        ],
    )
    container_limit = pod(
        "container-limit",
        0,
        containers=[
            Container(name="small", resources=resources(limits={"ephemeral-storage": "150Mi"})),
            Container(name="large", resources=resources(limits={"ephemeral-storage": "1Gi"})),
        ],
    )
    critical = pod("critical", 2_000_000_001, volumes=(empty_dir("cache", "1Mi"),))
    usages = [
        disk_usage(over_dir, "0", "0", "200Mi"),
        disk_usage(under_dir, "0", "0", "200Mi"),
        disk_usage(pod_limit, "50Mi", "50Mi", "0", ephemeral="250Mi"),
        disk_usage(container_limit, "100Mi", "60Mi", "0", ephemeral="320Mi"),
        disk_usage(critical, "0", "0", "200Mi"),
    ]
    pods = [over_dir, under_dir, pod_limit, container_limit, critical]
    evictions = local_storage_evictions(
        pods, stats_of(usages), dedicated_image_fs=False, is_critical=is_critical_pod
    )
    assert [(e.pod.metadata.name, e.message.text, e.grace_period_override) for e in evictions] == [
        ("empty-dir", 'Usage of EmptyDir volume "cache" exceeds the limit "100Mi". ', 1),
        (
            "pod-limit",
            "Pod ephemeral local storage usage exceeds the total limit of containers 200Mi. ",
            1,
        ),
        (
            "container-limit",
            'Container small exceeded its local ephemeral storage limit "150Mi". ',
            1,
        ),
    ]
    assert not any(e.disruption_condition for e in evictions)
    assert all(eviction_conditions(e, "2025-01-01T00:00:00Z") == () for e in evictions)
    # with a dedicated imagefs the writable layer does not count against the container limit
    again = local_storage_evictions(
        [container_limit], stats_of(usages), dedicated_image_fs=True, is_critical=is_critical_pod
    )
    assert again == []


def test_local_storage_candidates_are_the_pods_it_may_evict() -> None:
    """Every pod is far over any limit it has: those evicted are exactly the candidates,
    the pods whose figures the pass reads when no threshold is met."""
    from kubelet.api import Container

    from .evictionkit import resources

    def ephemeral(limit: str) -> Container:
        return Container(name="c", resources=resources(limits={"ephemeral-storage": limit}))

    init = pod("init-limit", 0)
    init = attrs.evolve(init, spec=attrs.evolve(init.spec, init_containers=(ephemeral("1Mi"),)))
    pods = [
        pod("plain", 0, {"memory": "1Mi"}, {"memory": "1Mi", "cpu": "1"}),
        pod("dir-without-limit", 0, volumes=(empty_dir("cache"),)),
        pod("dir-limit", 0, volumes=(empty_dir("cache", "1Mi"),)),
        pod("container-limit", 0, containers=[ephemeral("1Mi")]),
        pod("zero-container-limit", 0, containers=[ephemeral("0")]),
        init,
        pod("critical", 2_000_000_001, limits={"ephemeral-storage": "1Mi"}),
    ]
    usages = [disk_usage(p, "1Gi", "1Gi", "1Gi", ephemeral="10Gi") for p in pods]
    for dedicated in (False, True):
        evicted = local_storage_evictions(
            pods, stats_of(usages), dedicated_image_fs=dedicated, is_critical=is_critical_pod
        )
        candidates = local_storage_candidates(pods, is_critical=is_critical_pod)
        assert {e.pod.uid for e in evicted} == candidates
    assert {p.metadata.name for p in pods if p.uid in candidates} == {
        "dir-limit",
        "container-limit",
        "zero-container-limit",
        "init-limit",
    }


def best_effort(**kw: object) -> object:
    return pod("be", 0, **kw)  # type: ignore[arg-type]


ADMIT = {
    # conditions, pod kind, tolerations → admitted?
    "no pressure": ((), "best-effort", (), True),
    "memory, burstable": (("MemoryPressure",), "burstable", (), True),
    "memory, best effort": (("MemoryPressure",), "best-effort", (), False),
    "memory, best effort tolerating": (
        ("MemoryPressure",),
        "best-effort",
        (
            Toleration(
                key="node.kubernetes.io/memory-pressure", operator="Exists", effect="NoSchedule"
            ),
        ),
        True,
    ),
    "memory, best effort tolerating everything": (
        ("MemoryPressure",),
        "best-effort",
        (Toleration(operator="Exists"),),
        True,
    ),
    "memory, best effort tolerating another taint": (
        ("MemoryPressure",),
        "best-effort",
        (
            Toleration(
                key="node.kubernetes.io/disk-pressure", operator="Exists", effect="NoSchedule"
            ),
        ),
        False,
    ),
    "memory, best effort, wrong effect": (
        ("MemoryPressure",),
        "best-effort",
        (
            Toleration(
                key="node.kubernetes.io/memory-pressure", operator="Exists", effect="NoExecute"
            ),
        ),
        False,
    ),
    "memory, critical best effort": (("MemoryPressure",), "critical", (), True),
    "disk, burstable": (("DiskPressure",), "burstable", (), False),
    "disk, critical": (("DiskPressure",), "critical", (), True),
    "memory and disk, burstable": (("MemoryPressure", "DiskPressure"), "burstable", (), False),
    "pid, guaranteed": (("PIDPressure",), "guaranteed", (), False),
}


@pytest.mark.parametrize("name", ADMIT)
def test_admission(name: str) -> None:
    conditions, kind, tolerations, admitted = ADMIT[name]
    requests = {
        "best-effort": None,
        "critical": None,
        "burstable": {"memory": "1Mi"},
        "guaranteed": {"memory": "1Mi", "cpu": "1"},
    }[kind]
    p = pod(
        "p",
        2_000_000_000 if kind == "critical" else 0,
        requests,
        requests if kind == "guaranteed" else None,
    )
    p = attrs.evolve(p, spec=attrs.evolve(p.spec, tolerations=tolerations))
    refusal = admit(p, conditions, is_critical=is_critical_pod, qos=pod_qos)
    assert (refusal is None) is admitted
    if refusal is not None:
        assert refusal.reason == "Evicted"
        assert refusal.message == f"The node had condition: [{' '.join(conditions)}]. "


def test_observation_times_and_missing_figures() -> None:
    obs = observe_signals(memory_summary("1Gi", time=12.5).node)
    assert obs[Signal.MEMORY_AVAILABLE] == Observation(1024 * Mi, 2048 * Mi, 12.5)
    assert Signal.NODEFS_AVAILABLE not in obs
