"""The static memory policy: blocks on NUMA nodes, groups, hints, reuse, restore."""

import pytest

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, ResourceRequirements
from kubelet.boundedio import inline
from kubelet.cm import AssignedMemory
from kubelet.cm.hints import TopologyHint, mask_of
from kubelet.cm.memory import MemoryManager
from kubelet.cm.memory.policy import (
    AllocationError,
    StateMismatch,
    StaticPolicy,
    pod_requested,
)
from kubelet.cm.memory.state import Block, MemoryState, clone_machine

GI = 1024**3
TWO_MI = 2 * 1024**2


def _c(name: str, memory: str, restart: str | None = None, **extra: str) -> Container:
    amounts = {"cpu": "1", "memory": memory, **extra}
    return Container(
        name=name,
        image="i",
        resources=ResourceRequirements(requests=amounts, limits=amounts),
        restart_policy=restart,
    )


def _pod(uid: str, *containers: Container, init: tuple[Container, ...] = ()) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=uid, namespace="default", uid=uid),
        spec=PodSpec(containers=containers, init_containers=init),
    )


def _two_nodes(hugepages: int = 0) -> StaticPolicy:
    """Two NUMA nodes of 4 GiB (and ``hugepages`` 2 MiB pages each); 1 GiB reserved on 0."""
    nodes = {n: (4 * GI, {TWO_MI: hugepages} if hugepages else {}) for n in (0, 1)}
    return StaticPolicy(nodes, {0: {"memory": GI}, 1: {}})


def test_the_machine_state_subtracts_the_reservation_and_hugepages() -> None:
    policy = _two_nodes(hugepages=512)
    node0 = policy.machine[0].memory
    assert node0["memory"].allocatable == 4 * GI - GI - GI  # 512 pages of 2 MiB
    assert node0["hugepages-2Mi"].total == GI
    assert policy.machine[1].memory["memory"].free == 3 * GI
    assert policy.machine[0].cells == [0]
    assert [(b.numa_affinity, b.type, b.size) for b in policy.allocatable()] == [
        ((0,), "hugepages-2Mi", GI),
        ((0,), "memory", 2 * GI),
        ((1,), "hugepages-2Mi", GI),
        ((1,), "memory", 3 * GI),
    ]


def test_a_guaranteed_container_gets_its_memory_on_the_narrowest_node() -> None:
    policy = _two_nodes()
    pod = _pod("g", _c("app", "2Gi"))
    assert policy.hints(pod, pod.spec.containers[0]) == {
        "memory": [
            TopologyHint(mask_of([0]), True),
            TopologyHint(mask_of([1]), True),
            TopologyHint(mask_of([0, 1]), False),
        ]
    }
    assert policy.allocate(pod, pod.spec.containers[0], None) is True
    assert policy.blocks("g", "app") == [Block((0,), "memory", 2 * GI)]
    assert policy.numa_nodes("g", "app") == [0]
    assert policy.machine[0].memory["memory"].free == GI
    assert policy.machine[0].assignments == 1


def test_the_topology_affinity_is_followed() -> None:
    policy = _two_nodes()
    pod = _pod("g", _c("app", "1Gi"))
    policy.allocate(pod, pod.spec.containers[0], TopologyHint(mask_of([1]), True))
    assert policy.numa_nodes("g", "app") == [1]


def test_a_request_larger_than_a_node_spans_a_group_that_stays_apart() -> None:
    policy = _two_nodes()
    big = _pod("big", _c("app", "5Gi"))
    hints = policy.hints(big, big.spec.containers[0])
    assert hints == {"memory": [TopologyHint(mask_of([0, 1]), True)]}
    policy.allocate(big, big.spec.containers[0], None)
    assert policy.blocks("big", "app") == [Block((0, 1), "memory", 5 * GI)]
    assert policy.machine[0].cells == [0, 1] and policy.machine[1].cells == [0, 1]
    # a node of a group is not used for a single-node allocation
    small = _pod("small", _c("app", "100Mi"))
    assert policy.hints(small, small.spec.containers[0]) == {
        "memory": [TopologyHint(mask_of([0, 1]), False)]
    }
    assert policy.remove("big", "app") is True
    assert policy.machine[0].cells == [0] and policy.machine[0].memory["memory"].free == 3 * GI


def test_a_node_used_alone_is_not_grouped() -> None:
    policy = _two_nodes()
    one = _pod("one", _c("app", "1Gi"))
    policy.allocate(one, one.spec.containers[0], TopologyHint(mask_of([1]), True))
    big = _pod("big", _c("app", "5Gi"))
    assert policy.hints(big, big.spec.containers[0]) == {}
    with pytest.raises(AllocationError) as refused:
        policy.allocate(big, big.spec.containers[0], None)
    assert str(refused.value) == (
        "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough "
        "memory is available"
    )


def test_a_narrower_affinity_is_extended_to_hold_the_request() -> None:
    policy = _two_nodes()
    pod = _pod("g", _c("app", "5Gi"))
    policy.allocate(pod, pod.spec.containers[0], TopologyHint(mask_of([0]), False))
    assert policy.numa_nodes("g", "app") == [0, 1]
    preferred = _pod("p", _c("app", "5Gi"))
    fresh = _two_nodes()
    fresh.allocate(_pod("x", _c("app", "1Gi")), _c("app", "1Gi"), TopologyHint(1, True))
    with pytest.raises(AllocationError, match="failed to find NUMA nodes to extend"):
        fresh.allocate(preferred, preferred.spec.containers[0], TopologyHint(mask_of([0]), True))


def test_hugepages_are_placed_beside_memory() -> None:
    policy = _two_nodes(hugepages=512)
    pod = _pod("h", _c("app", "1Gi", **{"hugepages-2Mi": "512Mi"}))
    policy.allocate(pod, pod.spec.containers[0], TopologyHint(mask_of([1]), True))
    assert sorted(policy.blocks("h", "app"), key=lambda b: b.type) == [
        Block((1,), "hugepages-2Mi", 512 * 1024**2),
        Block((1,), "memory", GI),
    ]
    assert policy.machine[1].memory["hugepages-2Mi"].free == 512 * 1024**2


def test_burstable_pods_get_no_blocks() -> None:
    policy = _two_nodes()
    res = ResourceRequirements(requests={"memory": "1Gi"}, limits={"memory": "2Gi"})
    pod = _pod("b", Container(name="app", image="i", resources=res))
    assert policy.hints(pod, pod.spec.containers[0]) == {}
    assert policy.allocate(pod, pod.spec.containers[0], None) is False
    assert policy.entries == {}


def test_an_init_containers_memory_is_reused_by_the_app_container() -> None:
    policy = _two_nodes()
    init = _c("init", "2Gi")
    pod = _pod("g", _c("app", "1Gi"), init=(init,))
    hint = TopologyHint(mask_of([0]), True)
    policy.allocate(pod, init, hint)
    policy.allocate(pod, pod.spec.containers[0], hint)
    assert policy.machine[0].memory["memory"].reserved == 2 * GI  # not 3 GiB
    # the init container's block shrank by what the app container reused
    assert policy.blocks("g", "init") == [Block((0,), "memory", GI)]
    assert pod_requested(pod) == {"memory": 2 * GI}
    policy.release(["g"])
    assert policy.machine[0].memory["memory"].free == 3 * GI


def test_restore_replays_the_entries_and_refuses_a_different_machine() -> None:
    policy = _two_nodes()
    pod = _pod("g", _c("app", "2Gi"))
    policy.allocate(pod, pod.spec.containers[0], None)
    saved = MemoryState("Static", clone_machine(policy.machine), dict(policy.entries))
    again = _two_nodes()
    again.restore(saved)
    assert again.blocks("g", "app") == [Block((0,), "memory", 2 * GI)]
    regenerated = again.hints(pod, pod.spec.containers[0])
    assert regenerated == {"memory": [TopologyHint(mask_of([0]), True)]}
    other = StaticPolicy({n: (8 * GI, {}) for n in (0, 1)}, {0: {"memory": GI}})
    with pytest.raises(StateMismatch) as refused:
        other.restore(saved)
    assert str(refused.value) == (
        "[memorymanager] the expected machine state is different from the real one"
    )
    missing_node = MemoryState("Static", saved.machine, {"p": {"c": [Block((7,), "memory", 1)]}})
    with pytest.raises(StateMismatch, match="uses the NUMA that does not exist"):
        _two_nodes().restore(missing_node)


def test_the_manager_refuses_as_upstream_counts_and_binds_cpuset_mems() -> None:
    counted: list[str] = []
    manager = MemoryManager(_two_nodes(), path="/nonexistent", io=inline, count=counted.append)
    first = _pod("a", _c("app", "3Gi"))
    assert manager.admit(first, []) is None
    assert manager.contribute(first, first.spec.containers[0]).cpuset_mems == "0"
    assert manager.container_memory("a", "app") == [AssignedMemory("memory", 3 * GI, (0,))]
    assert manager.admit(_pod("b", _c("app", "3Gi")), [first]) is None
    refused = manager.admit(_pod("c", _c("app", "2Gi")), [first, _pod("b")])
    assert refused == (
        "UnexpectedAdmissionError",
        "Allocate failed due to [memorymanager] failed to get the default NUMA affinity, no "
        "NUMA nodes with enough memory is available, which is unexpected",
    )
    assert counted == ["requests", "requests", "requests", "errors"]
    # a pod no longer active gives its memory back at the next admission
    assert manager.admit(_pod("d", _c("app", "2Gi")), [first]) is None
    assert manager.policy is not None and "b" not in manager.policy.entries
