"""Pod status generation (conditions, phase, IPs, container statuses)."""

from __future__ import annotations

import attrs

from kubelet.api import Container, Pod, PodCondition, Probe
from kubelet.api.pod import PodReadinessGate
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    RuntimePodStatus,
    SandboxInfo,
    SandboxState,
)
from kubelet.status import generate_pod_status, owned_conditions
from kubelet.testing.builders import make_pod

NS = 1_800_000_000 * 10**9
SANDBOX = SandboxInfo(id="sb", state=SandboxState.READY, ip="10.88.0.7", created_at=NS)


def pod(*containers: Container, init: tuple[Container, ...] = (), **spec: object) -> Pod:
    return make_pod(*containers, uid="u1", init=init, restart_policy="Always", **spec)


def running(name: str, cid: str = "") -> ContainerInfo:
    return ContainerInfo(
        id=cid or f"id-{name}",
        name=name,
        state=ContainerRunState.RUNNING,
        created_at=NS,
        started_at=NS + 10**9,
        image="busybox:1.35",
        image_ref="sha256:abc",
    )


def exited(name: str, code: int = 0) -> ContainerInfo:
    return ContainerInfo(
        id=f"id-{name}",
        name=name,
        state=ContainerRunState.EXITED,
        created_at=NS,
        started_at=NS + 10**9,
        finished_at=NS + 2 * 10**9,
        exit_code=code,
        reason="Completed" if code == 0 else "Error",
    )


def conds(status: object) -> dict[str, PodCondition]:
    return {c.type: c for c in status.conditions}  # type: ignore[attr-defined]


APP = Container(name="app", image="busybox:1.35")


def test_running_pod_is_ready_in_upstream_condition_order() -> None:
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),))
    status = generate_pod_status(pod(APP), rt, host_ips=("10.0.0.5",), now_ns=NS + 5 * 10**9)
    assert status.phase == "Running"
    assert [c.type for c in status.conditions] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert all(c.status == "True" for c in status.conditions)
    assert (status.pod_ip, status.host_ip, status.qos_class) == (
        "10.88.0.7",
        "10.0.0.5",
        "BestEffort",
    )
    (cs,) = status.container_statuses
    assert cs.ready and cs.container_id == "containerd://id-app"
    assert cs.state is not None and cs.state.running is not None


def test_readiness_probe_not_passed_yet() -> None:
    probed = attrs.evolve(APP, readiness_probe=Probe())
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),))
    c = conds(generate_pod_status(pod(probed), rt, now_ns=NS))
    assert (
        c["ContainersReady"].status,
        c["ContainersReady"].reason,
        c["ContainersReady"].message,
    ) == (
        "False",
        "ContainersNotReady",
        "containers with unready status: [app]",
    )
    assert (c["Ready"].status, c["Ready"].reason) == ("False", "ContainersNotReady")
    ready = generate_pod_status(pod(probed), rt, ready={"id-app"}, now_ns=NS)
    assert conds(ready)["Ready"].status == "True"


def test_nothing_started_yet() -> None:
    rt = RuntimePodStatus(uid="u1")
    status = generate_pod_status(pod(APP), rt, now_ns=NS)
    assert status.phase == "Pending"
    c = conds(status)
    assert c["PodReadyToStartContainers"].status == "False"
    waiting = status.container_statuses[0].state.waiting  # type: ignore[union-attr]
    assert waiting is not None and waiting.reason == "ContainerCreating"


def test_init_containers_incomplete() -> None:
    init = (
        Container(name="init1", image="busybox:1.35"),
        Container(name="init2", image="busybox:1.35"),
    )
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("init1"),))
    status = generate_pod_status(pod(APP, init=init), rt, now_ns=NS)
    c = conds(status)
    assert (c["Initialized"].status, c["Initialized"].reason, c["Initialized"].message) == (
        "False",
        "ContainersNotInitialized",
        "containers with incomplete status: [init1 init2]",
    )
    assert status.phase == "Pending"
    assert status.container_statuses[0].state.waiting.reason == "PodInitializing"  # type: ignore[union-attr]


def test_succeeded_pod() -> None:
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(exited("app"),))
    status = generate_pod_status(
        attrs.evolve(pod(APP), spec=attrs.evolve(pod(APP).spec, restart_policy="OnFailure")),
        rt,
        now_ns=NS,
    )
    assert status.phase == "Succeeded"
    assert conds(status)["ContainersReady"].reason == "PodCompleted"


def test_readiness_gates() -> None:
    gated = pod(APP, readiness_gates=(PodReadinessGate(condition_type="example.com/lb"),))
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),))
    c = conds(generate_pod_status(gated, rt, now_ns=NS))
    assert (c["Ready"].status, c["Ready"].reason) == ("False", "ReadinessGatesNotReady")
    assert (
        c["Ready"].message
        == 'corresponding condition of pod readiness gate "example.com/lb" does not exist.'
    )
    assert c["ContainersReady"].status == "True"


def test_transition_times_and_foreign_conditions_kept() -> None:
    """Conditions others own come from the API's copy of the pod (upstream reads
    ``pod.Status.Conditions``), never from what the kubelet itself reported before."""
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),))
    first = generate_pod_status(pod(APP), rt, now_ns=NS)
    foreign = PodCondition(type="example.com/lb", status="True")
    stale = PodCondition(type="example.com/lb", status="False")
    previous = attrs.evolve(first, conditions=(stale, *first.conditions))
    in_api = attrs.evolve(pod(APP), status=attrs.evolve(first, conditions=(foreign,)))
    later = generate_pod_status(in_api, rt, previous=previous, now_ns=NS + 60 * 10**9)
    assert later.conditions[0] == foreign
    assert conds(later)["Ready"].last_transition_time == conds(first)["Ready"].last_transition_time
    assert later.start_time == first.start_time


def test_host_network_pod_has_the_node_ips() -> None:
    hn = pod(APP, host_network=True)
    sandbox = attrs.evolve(SANDBOX, ip="", host_network=True)
    rt = RuntimePodStatus(uid="u1", sandboxes=(sandbox,), containers=(running("app"),))
    status = generate_pod_status(hn, rt, host_ips=("10.0.0.5",), now_ns=NS)
    assert status.pod_ip == "10.0.0.5"


def test_terminal_phase_is_sticky() -> None:
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),))
    failed = attrs.evolve(pod(APP), status=attrs.evolve(pod(APP).status, phase="Failed"))
    assert generate_pod_status(failed, rt, now_ns=NS).phase == "Failed"


def test_ready_to_start_condition_follows_its_gate() -> None:
    """PodReadyToStartContainersCondition off: the kubelet neither writes the condition
    nor owns it, so one already on the pod is kept as someone else's."""
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),))
    on = generate_pod_status(pod(APP), rt, now_ns=NS)
    assert "PodReadyToStartContainers" in conds(on)
    off = generate_pod_status(pod(APP), rt, ready_to_start_condition=False, now_ns=NS)
    assert [c.type for c in off.conditions] == [
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    written = PodCondition(type="PodReadyToStartContainers", status="False")
    in_api = attrs.evolve(pod(APP), status=attrs.evolve(on, conditions=(written,)))
    kept = generate_pod_status(in_api, rt, ready_to_start_condition=False, now_ns=NS)
    assert kept.conditions[0] == written
    kubelets = ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    assert owned_conditions(False)[:4] == kubelets
    assert "PodReadyToStartContainers" not in owned_conditions(False)
