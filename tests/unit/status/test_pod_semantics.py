"""Pod status details upstream 1.36 writes: observedGeneration on every
kubelet-owned condition, PodCompleted on Initialized, the phase's reason and message,
readiness gates against the API's conditions, ephemeral container statuses, the active
deadline."""

from __future__ import annotations

import attrs

from kubelet.api import Container, EphemeralContainer, Pod, PodCondition, PodStatus
from kubelet.api.pod import PodReadinessGate
from kubelet.cri import RuntimePodStatus
from kubelet.status import (
    DEADLINE_EXCEEDED,
    DEADLINE_EXCEEDED_MESSAGE,
    Kill,
    deadline_left,
    generate_pod_status,
    needs_readiness_reconcile,
)

from .test_generate import APP, NS, SANDBOX, conds, exited, pod, running

GATE = "example.com/lb"


def with_generation(p: Pod, generation: int) -> Pod:
    return attrs.evolve(p, metadata=attrs.evolve(p.metadata, generation=generation))


def test_owned_conditions_carry_the_observed_generation() -> None:
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),))
    status = generate_pod_status(with_generation(pod(APP), 3), rt, now_ns=NS)
    assert status.observed_generation == 3
    assert [c.observed_generation for c in status.conditions] == [3] * 5


def test_initialized_says_pod_completed_without_init_containers() -> None:
    """Upstream: a Succeeded pod's Initialized is True with reason PodCompleted, init
    containers or not (it was True without a reason here)."""
    done = attrs.evolve(pod(APP), spec=attrs.evolve(pod(APP).spec, restart_policy="Never"))
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(exited("app"),))
    status = generate_pod_status(done, rt, now_ns=NS)
    assert status.phase == "Succeeded"
    assert (conds(status)["Initialized"].status, conds(status)["Initialized"].reason) == (
        "True",
        "PodCompleted",
    )


def test_initialized_names_init_containers_of_unknown_status() -> None:
    init = (Container(name="first", image="busybox"),)
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,))
    status = generate_pod_status(pod(APP, init=init), rt, now_ns=NS)
    c = conds(status)["Initialized"]
    assert (c.reason, c.message) == (
        "ContainersNotInitialized",
        "containers with incomplete status: [first]",
    )


def test_reason_and_message_go_with_a_new_phase() -> None:
    """Upstream keeps the reason and message only while the phase stays the same."""
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),))
    before = PodStatus(phase="Pending", reason="Something", message="said before")
    status = generate_pod_status(pod(APP), rt, previous=before, now_ns=NS)
    assert status.phase == "Running"
    assert (status.reason, status.message) == ("", "")
    same = attrs.evolve(before, phase="Running")
    kept = generate_pod_status(pod(APP), rt, previous=same, now_ns=NS)
    assert (kept.reason, kept.message) == ("Something", "said before")


def test_evicted_pod_is_failed_with_the_reason() -> None:
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(exited("app", 137),))
    status = generate_pod_status(
        pod(APP),
        rt,
        kill=Kill(DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_MESSAGE),
        pod_is_terminal=True,
        now_ns=NS,
    )
    assert (status.phase, status.reason, status.message) == (
        "Failed",
        "DeadlineExceeded",
        "Pod was active on the node longer than the specified deadline",
    )
    assert conds(status)["Ready"].reason == "PodFailed"


def gated(*conditions: PodCondition, ready: str = "") -> Pod:
    p = pod(APP, readiness_gates=(PodReadinessGate(condition_type=GATE),))
    extra = (PodCondition(type="Ready", status=ready),) if ready else ()
    return attrs.evolve(p, status=PodStatus(conditions=(*conditions, *extra)))


def test_readiness_gate_read_from_the_api_copy() -> None:
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),))
    previous = generate_pod_status(gated(), rt, now_ns=NS)
    assert conds(previous)["Ready"].status == "False"
    now_true = gated(PodCondition(type=GATE, status="True"))
    status = generate_pod_status(now_true, rt, previous=previous, now_ns=NS + 10**9)
    assert conds(status)["Ready"].status == "True"
    assert status.conditions[0].type == GATE  # others' conditions first, as upstream
    not_true = gated(PodCondition(type=GATE, status="False"))
    c = conds(generate_pod_status(not_true, rt, previous=status, now_ns=NS))["Ready"]
    assert (c.status, c.reason, c.message) == (
        "False",
        "ReadinessGatesNotReady",
        'the status of pod readiness gate "example.com/lb" is not "True", but False',
    )


def test_readiness_reconcile_only_when_ready_disagrees_with_the_gates() -> None:
    running_status = PodStatus(phase="Running")
    assert not needs_readiness_reconcile(pod(APP))
    opened = gated(PodCondition(type=GATE, status="True"), ready="False")
    opened = attrs.evolve(
        opened,
        status=attrs.evolve(
            opened.status,
            phase=running_status.phase,
            container_statuses=generate_pod_status(
                opened,
                RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),)),
                now_ns=NS,
            ).container_statuses,
        ),
    )
    assert needs_readiness_reconcile(opened)
    no_ready_yet = attrs.evolve(opened, status=attrs.evolve(opened.status, conditions=()))
    assert not needs_readiness_reconcile(no_ready_yet)


def test_ephemeral_container_statuses() -> None:
    debug = EphemeralContainer(name="debug", image="busybox:1.35", target_container_name="app")
    p = pod(APP, ephemeral_containers=(debug,))
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(running("app"),))
    status = generate_pod_status(p, rt, now_ns=NS)
    (waiting,) = status.ephemeral_container_statuses
    assert waiting.state is not None and waiting.state.waiting is not None
    assert waiting.state.waiting.reason == "ContainerCreating"
    rt = attrs.evolve(rt, containers=(running("debug"), running("app")))
    status = generate_pod_status(p, rt, previous=status, now_ns=NS)
    (cs,) = status.ephemeral_container_statuses
    assert cs.state is not None and cs.state.running is not None
    assert (cs.ready, cs.started, cs.container_id) == (False, None, "containerd://id-debug")
    assert [c.name for c in status.container_statuses] == ["app"]
    assert status.phase == "Running"


def test_deadline_counts_from_the_start_time() -> None:
    p = pod(APP, active_deadline_seconds=30)
    start = "2027-01-15T08:00:00Z"
    started = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    assert deadline_left(p, start, started + 10) == 20
    assert deadline_left(p, start, started + 30) == 0
    assert deadline_left(p, None, started + 100) is None
    assert deadline_left(pod(APP), start, started + 100) is None
