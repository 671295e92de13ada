"""Containers' swap settings as upstream 1.36 derives them (NoSwap, LimitedSwap)."""

from __future__ import annotations

from kubelet.api import Container, Quantity, ResourceRequirements
from kubelet.cgroups import NodeSwap, hugepage_unit
from kubelet.cri import api
from kubelet.decisions import ContainerLimits
from kubelet.decisions.criconfig import linux_container_resources
from kubelet.testing import builders

GI = 1024**3
MI = 1024**2


def container(requests: dict[str, str], limits: dict[str, str] | None = None) -> Container:
    return Container(
        name="c",
        image="busybox",
        resources=ResourceRequirements(
            requests={k: Quantity(v) for k, v in requests.items()},
            limits={k: Quantity(v) for k, v in (limits or {}).items()},
        ),
    )


def resources(c: Container, swap: NodeSwap, **pod: object) -> api.LinuxContainerResources:
    return linux_container_resources(
        builders.make_pod(c, **pod), c, memory_capacity=8 * GI, limits=ContainerLimits(swap=swap)
    )


V1 = NodeSwap(controller=True, memory_capacity=8 * GI, swap_capacity=4 * GI)
V2 = NodeSwap(controller=True, cgroup_v2=True, memory_capacity=8 * GI, swap_capacity=4 * GI)
LIMITED = NodeSwap(
    behavior="LimitedSwap", controller=True, cgroup_v2=True, memory_capacity=8 * GI,
    swap_capacity=4 * GI,
)  # fmt: skip


def test_without_the_swap_controller_nothing_is_set() -> None:
    r = resources(container({"memory": "1Gi"}, {"memory": "2Gi"}), NodeSwap())
    assert r.memory_swap_limit_in_bytes == 0
    assert dict(r.unified) == {}


def test_no_swap_on_v1_caps_memory_and_swap_at_the_memory_limit() -> None:
    r = resources(container({"memory": "1Gi"}, {"memory": "2Gi"}), V1)
    assert r.memory_swap_limit_in_bytes == 2 * GI
    assert dict(r.unified) == {}


def test_no_swap_on_v2_sets_swap_max_zero() -> None:
    r = resources(container({"memory": "1Gi"}, {"memory": "2Gi"}), V2)
    assert dict(r.unified) == {"memory.swap.max": "0"}


def test_limited_swap_is_the_request_share_of_the_swap() -> None:
    r = resources(container({"memory": "1Gi"}, {"memory": "2Gi"}), LIMITED)
    assert dict(r.unified) == {"memory.swap.max": str(512 * MI)}
    r = resources(container({"memory": "1Gi", "cpu": "100m"}), LIMITED)  # no limit: burstable
    assert dict(r.unified) == {"memory.swap.max": str(512 * MI)}


def test_limited_swap_falls_back_to_no_swap() -> None:
    equal = container({"memory": "1Gi", "cpu": "1"}, {"memory": "1Gi", "cpu": "1"})
    cpu_only = container({"cpu": "100m"})
    huge = container({"memory": "9Gi"})
    for c in (equal, cpu_only, huge):
        r = resources(c, LIMITED)
        assert dict(r.unified) == {"memory.swap.max": "0"}, c
    critical = resources(container({"memory": "1Gi"}), LIMITED, priority=2_000_000_000)
    assert dict(critical.unified) == {"memory.swap.max": "0"}


# -- hugepages ---------------------------------------------------------------------------------


def hugepages(c: Container, sizes: tuple[int, ...]) -> list[tuple[str, int]]:
    got = linux_container_resources(
        builders.make_pod(c),
        c,
        memory_capacity=8 * GI,
        limits=ContainerLimits(hugepage_sizes=sizes),
    )
    return [(h.page_size, h.limit) for h in got.hugepage_limits]


def test_every_page_size_is_limited_and_zero_unless_asked() -> None:
    # a container that asks for no hugepages may use none, so it cannot take another's
    sizes = (2 * MI, GI)
    assert hugepages(container({}), sizes) == [("2MB", 0), ("1GB", 0)]
    asks = container({"hugepages-2Mi": "20Mi"}, {"hugepages-2Mi": "20Mi", "memory": "1Gi"})
    assert hugepages(asks, sizes) == [("2MB", 20 * MI), ("1GB", 0)]


def test_without_a_hugetlb_controller_no_limit_is_sent() -> None:
    asks = container({"hugepages-2Mi": "20Mi"}, {"hugepages-2Mi": "20Mi"})
    assert hugepages(asks, ()) == []


def test_page_size_labels_are_the_runtimes() -> None:
    assert [hugepage_unit(s) for s in (64 * 1024, 2 * MI, 32 * MI, GI, 16 * GI)] == [
        "64KB", "2MB", "32MB", "1GB", "16GB",
    ]  # fmt: skip


def test_group_oom_kill_asks_for_memory_oom_group_beside_swap() -> None:
    """Upstream's calculateLinuxResources on v2 without singleProcessOOMKill: the whole
    container cgroup is OOM-killed; the swap setting joins the same map."""
    c = container({"memory": "1Gi"}, {"memory": "2Gi"})
    pod = builders.make_pod(c)
    r = linux_container_resources(
        pod, c, memory_capacity=8 * GI, limits=ContainerLimits(swap=V2, group_oom_kill=True)
    )
    assert dict(r.unified) == {"memory.oom.group": "1", "memory.swap.max": "0"}
    single = linux_container_resources(
        pod, c, memory_capacity=8 * GI, limits=ContainerLimits(swap=V2, group_oom_kill=False)
    )
    assert dict(single.unified) == {"memory.swap.max": "0"}
