"""The status of a pod whose spec was resized: what runs is reported, and the refusal."""

from __future__ import annotations

import attrs

from kubelet.api import Container, Pod, PodStatus, Quantity, ResourceRequirements
from kubelet.cri import ContainerInfo, ContainerRunState, RunningResources, RuntimePodStatus
from kubelet.decisions import Allocation, ResizeState, allocated_pod
from kubelet.status import format_time, generate_pod_status
from kubelet.status.generate import foreign_conditions
from kubelet.testing.builders import make_pod, ready_sandbox

NS = 1_800_000_000 * 10**9


def res(requests: dict[str, str], limits: dict[str, str]) -> ResourceRequirements:
    return ResourceRequirements(
        requests={k: Quantity(v) for k, v in requests.items()},
        limits={k: Quantity(v) for k, v in limits.items()},
    )


SMALL = res({"cpu": "100m"}, {"cpu": "200m"})
BIG = res({"cpu": "300m"}, {"cpu": "400m"})


def resized(generation: int = 2) -> tuple[Pod, Pod]:
    """(the pod as the API has it now, as it runs: admitted with SMALL)."""
    pod = make_pod(Container(name="app", image="busybox", resources=BIG), uid="u1")
    pod = attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, generation=generation))
    return pod, allocated_pod(pod, Allocation({"app": SMALL}))


def runtime(state: ContainerRunState = ContainerRunState.RUNNING) -> RuntimePodStatus:
    app = ContainerInfo(id="c1", name="app", state=state, created_at=NS, started_at=NS)
    return RuntimePodStatus(uid="u1", sandboxes=(ready_sandbox(),), containers=(app,))


WAITS = ResizeState(pending=("Infeasible", "never here", 2))


def test_what_runs_is_reported_and_the_resize_is_pending_infeasible() -> None:
    pod, running = resized()
    status = generate_pod_status(pod, runtime(), allocated=running, resize=WAITS, now_ns=NS)
    (app,) = status.container_statuses
    assert app.resources == SMALL
    assert app.allocated_resources == SMALL.requests
    types = [c.type for c in status.conditions]
    assert types == [
        "PodResizePending",
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    pending = status.conditions[0]
    assert (pending.status, pending.reason, pending.message) == (
        "True",
        "Infeasible",
        "never here",
    )
    assert pending.observed_generation == 2
    assert pending.last_transition_time == pending.last_probe_time == format_time(NS)


def test_the_condition_stands_until_the_resize_is_undone() -> None:
    pod, running = resized()
    first = generate_pod_status(pod, runtime(), allocated=running, resize=WAITS, now_ns=NS)
    later = generate_pod_status(
        pod, runtime(), previous=first, allocated=running, resize=WAITS, now_ns=NS + 60 * 10**9
    )
    assert later.conditions[0] == first.conditions[0]
    undone = attrs.evolve(pod, spec=running.spec)
    cleared = generate_pod_status(undone, runtime(), previous=later, allocated=running, now_ns=NS)
    assert "PodResizePending" not in [c.type for c in cleared.conditions]


def test_the_api_s_stale_condition_is_the_kubelet_s_to_drop() -> None:
    pod, running = resized()
    api_status = generate_pod_status(pod, runtime(), allocated=running, resize=WAITS, now_ns=NS)
    assert foreign_conditions(api_status.conditions) == []
    undone = attrs.evolve(pod, spec=running.spec, status=api_status)
    fresh = generate_pod_status(undone, runtime(), now_ns=NS)  # a restarted kubelet
    assert "PodResizePending" not in [c.type for c in fresh.conditions]


def test_a_finished_pod_has_no_resize_condition() -> None:
    pod, running = resized()
    pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, restart_policy="Never"))
    running = attrs.evolve(running, spec=attrs.evolve(running.spec, restart_policy="Never"))
    done = runtime(ContainerRunState.EXITED)
    status = generate_pod_status(
        pod, done, allocated=running, resize=WAITS, previous=PodStatus(), now_ns=NS
    )
    assert status.phase == "Succeeded"
    assert "PodResizePending" not in [c.type for c in status.conditions]
    (app,) = status.container_statuses
    assert app.resources == SMALL


def test_resources_are_what_the_runtime_reports_running() -> None:
    """Allocated BIG, the runtime still at SMALL's values: status.resources says SMALL's
    (a resize in progress); values the same as the allocation keep its quantities."""
    pod, _ = resized()
    old = RunningResources(cpu_shares=102, cpu_quota=20_000, cpu_period=100_000)
    app = ContainerInfo(
        id="c1",
        name="app",
        state=ContainerRunState.RUNNING,
        created_at=NS,
        started_at=NS,
        resources=old,
    )
    status = generate_pod_status(
        pod,
        RuntimePodStatus(uid="u1", sandboxes=(ready_sandbox(),), containers=(app,)),
        now_ns=NS,
    )
    (reported,) = status.container_statuses
    assert reported.resources == res({"cpu": "99m"}, {"cpu": "200m"})
    assert reported.allocated_resources == BIG.requests
    same = attrs.evolve(
        app, resources=RunningResources(cpu_shares=307, cpu_quota=40_000, cpu_period=100_000)
    )
    status = generate_pod_status(
        pod,
        RuntimePodStatus(uid="u1", sandboxes=(ready_sandbox(),), containers=(same,)),
        now_ns=NS,
    )
    assert status.container_statuses[0].resources == BIG
