"""The topology manager over the CPU manager (a hint provider) and a device-like
provider, on a machine of two NUMA nodes (CPUs 0-1 and 2-3), CPU 0 reserved."""

from __future__ import annotations

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, ResourceRequirements
from kubelet.boundedio import inline
from kubelet.cm import ContainerManager, NodeResources
from kubelet.cm.capabilities import HintProvider, ResourceManager, bind_all
from kubelet.cm.cpu import CpuManager
from kubelet.cm.cpu.policy import PolicyOptions, StaticPolicy
from kubelet.cm.cpu.topology import uniform
from kubelet.cm.hints import TopologyHint, TopologyHints, mask_of
from kubelet.cm.topology import TopologyManager
from kubelet.cm.topology.merge import NumaInfo
from kubelet.cm.topology.merge import PolicyOptions as TopologyOptions

TOPOLOGY_ERROR = ("TopologyAffinityError", "Resources cannot be allocated with Topology locality")


class DeviceOn(ResourceManager, HintProvider):
    """A provider whose device sits on one NUMA node."""

    name = "devices"

    def __init__(self, node: int) -> None:
        self.node = node

    def topology_hints(self, pod: Pod, container: Container) -> TopologyHints:
        return {"example.com/dev": [TopologyHint(mask_of([self.node]), True)]}

    def pod_topology_hints(self, pod: Pod) -> TopologyHints:
        return self.topology_hints(pod, pod.spec.containers[0])


def _pod(uid: str, *cpus: str) -> Pod:
    containers = []
    for i, cpu in enumerate(cpus):
        amounts = {"cpu": cpu, "memory": "64Mi"}
        res = ResourceRequirements(requests=amounts, limits=amounts)
        containers.append(Container(name=f"c{i}", image="i", resources=res))
    meta = ObjectMeta(name=uid, namespace="default", uid=uid)
    return Pod(metadata=meta, spec=PodSpec(containers=tuple(containers)))


def _node(
    policy: str, scope: str = "container", device: int | None = None
) -> tuple[ContainerManager, TopologyManager, StaticPolicy, list[tuple[str, float]]]:
    seen: list[tuple[str, float]] = []
    topo = TopologyManager(
        policy,
        scope,
        NumaInfo(nodes=(0, 1)),
        TopologyOptions(),
        observe=lambda kind, value: seen.append((kind, value)),
    )
    cpus = StaticPolicy(uniform(1, 4, 1, numa_per_socket=2), frozenset({0}), PolicyOptions())
    cpu = CpuManager(cpus, path="unused", runtime=None, active=list, io=inline, period=10.0)  # type: ignore[arg-type]
    managers: list[ResourceManager] = [topo, cpu]
    if device is not None:
        managers.append(DeviceOn(device))
    bind_all(managers)
    return ContainerManager(NodeResources(), managers), topo, cpus, seen


def test_the_cpu_manager_offers_numa_hints() -> None:
    _, _, cpus, _ = _node("restricted")
    assert cpus.hints(_pod("a", "1"), _pod("a", "1").spec.containers[0]) == {
        "cpu": [
            TopologyHint(mask_of([0]), True),
            TopologyHint(mask_of([1]), True),
            TopologyHint(mask_of([0, 1]), False),
        ]
    }
    three = _pod("b", "3")
    assert cpus.hints(three, three.spec.containers[0]) == {
        "cpu": [TopologyHint(mask_of([0, 1]), True)]
    }


def test_cpus_are_taken_on_the_node_of_the_device() -> None:
    cm, topo, cpus, seen = _node("restricted", device=1)
    pod = _pod("a", "1")
    assert cm.admit(pod, []) is None
    assert topo.affinity("a", "c0") == TopologyHint(mask_of([1]), True)
    assert cpus.exclusive("a", "c0") == {2}  # without the device's node: CPU 1
    assert cm.exclusive_cpus("a", "c0") == {2}  # as the pod-resources API reports them
    assert cm.allocatable_cpus() == {1, 2, 3}
    assert [k for k, _ in seen] == ["requests", "duration"]


def test_without_alignment_cpus_pack_from_the_lowest_node() -> None:
    cm, topo, cpus, _ = _node("none", device=1)
    assert cm.admit(_pod("a", "1"), []) is None
    assert topo.affinity("a", "c0") is None
    assert cpus.exclusive("a", "c0") == {1}


def test_restricted_refuses_what_cannot_sit_with_the_device() -> None:
    cm, _, cpus, seen = _node("restricted", device=0)
    refusal = cm.admit(_pod("a", "2"), [])  # node 0 has one free CPU
    assert refusal == TOPOLOGY_ERROR
    assert cpus.exclusive("a", "c0") == frozenset()
    assert ("errors", 0) in seen
    be, _, cpus, _ = _node("best-effort", device=0)
    assert be.admit(_pod("a", "2"), []) is None
    assert len(cpus.exclusive("a", "c0")) == 2


def test_single_numa_node_refuses_a_request_wider_than_a_node() -> None:
    cm, _, _, _ = _node("single-numa-node")
    assert cm.admit(_pod("a", "3"), []) == TOPOLOGY_ERROR
    assert cm.admit(_pod("b", "2"), []) is None


def test_pod_scope_aligns_all_containers_on_one_node() -> None:
    cm, topo, cpus, _ = _node("single-numa-node", scope="pod")
    assert cm.admit(_pod("a", "1", "1"), []) is None  # two CPUs: only node 1 holds them
    assert topo.affinity("a", "c0") == topo.affinity("a", "c1") == TopologyHint(mask_of([1]), True)
    assert cpus.exclusive("a", "c0") | cpus.exclusive("a", "c1") == {2, 3}
    container_scope, _, _, _ = _node("single-numa-node")
    assert container_scope.admit(_pod("b", "1", "1"), []) is None  # each fits a node alone


def test_single_numa_node_counts_aligned_containers_and_failures() -> None:
    cm, _, _, seen = _node("single-numa-node")
    assert cm.admit(_pod("a", "1", "1"), []) is None
    assert cm.admit(_pod("b", "3"), []) == TOPOLOGY_ERROR
    aligned = [kind for kind, _ in seen if "aligned" in kind]
    assert aligned == ["aligned-container", "aligned-container", "unaligned-container"]
    pod_scope, _, _, seen = _node("single-numa-node", scope="pod")
    assert pod_scope.admit(_pod("c", "1", "1"), []) is None
    assert [kind for kind, _ in seen if "aligned" in kind] == ["aligned-pod"]
    best_effort, _, _, seen = _node("best-effort")
    assert best_effort.admit(_pod("d", "1"), []) is None
    assert not [kind for kind, _ in seen if "aligned" in kind]
