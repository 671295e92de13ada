"""The container manager's side of an in-place resize: swap, then each manager."""

from __future__ import annotations

from collections.abc import Sequence

from kubelet.api import (
    Container,
    ContainerResizePolicy,
    ObjectMeta,
    Pod,
    PodSpec,
    Quantity,
    ResourceRequirements,
)
from kubelet.cgroups import NodeSwap
from kubelet.cm import ContainerManager, NodeResources
from kubelet.cm.capabilities import AdmitsResize, ResourceManager
from kubelet.decisions import ContainerLimits

SWAP = NodeSwap(
    behavior="LimitedSwap",
    on=True,
    controller=True,
    cgroup_v2=True,
    memory_capacity=8 << 30,
    swap_capacity=1 << 30,
)
MESSAGE = "In-place resize of containers with swap is not supported."


def _pod(request: str, limit: str = "1Gi", policy: str = "NotRequired") -> Pod:
    resources = ResourceRequirements(
        requests={"cpu": Quantity("100m"), "memory": Quantity(request)},
        limits={"memory": Quantity(limit)},
    )
    app = Container(
        name="app",
        image="i",
        resources=resources,
        resize_policy=(ContainerResizePolicy(resource_name="memory", restart_policy=policy),),
    )
    return Pod(
        metadata=ObjectMeta(name="p", namespace="d", uid="u"), spec=PodSpec(containers=(app,))
    )


def _cm(swap: NodeSwap, managers: Sequence[ResourceManager] = ()) -> ContainerManager:
    return ContainerManager(NodeResources(), managers, limits=ContainerLimits(swap=swap))


def test_a_swapping_containers_memory_resize_is_infeasible() -> None:
    cm = _cm(SWAP)
    assert cm.admit_resize(_pod("512Mi"), _pod("256Mi")) == ("swap_limitation", MESSAGE)
    # the CPU alone, a memory policy that restarts the container, or no swap: admitted
    assert cm.admit_resize(_pod("256Mi"), _pod("256Mi")) is None
    restarts = "RestartContainer"
    assert cm.admit_resize(_pod("512Mi", policy=restarts), _pod("256Mi", policy=restarts)) is None
    assert _cm(NodeSwap()).admit_resize(_pod("512Mi"), _pod("256Mi")) is None
    # a container that would start swapping (its request was its limit) counts too
    assert cm.admit_resize(_pod("512Mi"), _pod("1Gi")) == ("swap_limitation", MESSAGE)


class _Refuses(ResourceManager, AdmitsResize):
    name = "refuses"

    def admit_resize(self, pod: Pod, allocated: Pod) -> tuple[str, str] | None:
        return ("detail", "no")


def test_a_managers_refusal_is_the_verdict() -> None:
    assert _cm(NodeSwap(), [_Refuses()]).admit_resize(_pod("1Gi"), _pod("1Gi")) == (
        "detail",
        "no",
    )
