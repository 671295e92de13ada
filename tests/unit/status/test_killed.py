"""The status of a pod the kubelet stops itself (node shutdown, eviction, a deadline)."""

from __future__ import annotations

import attrs

from kubelet.api import PodCondition, PodStatus
from kubelet.cri import RuntimePodStatus
from kubelet.status import Kill, generate_pod_status
from kubelet.status.killed import with_kill_conditions

from .test_generate import APP, NS, SANDBOX, conds, exited, pod

MESSAGE = "Pod was terminated in response to imminent node shutdown."
TARGET = PodCondition(
    type="DisruptionTarget",
    status="True",
    reason="TerminationByKubelet",
    message=MESSAGE,
    last_transition_time="2025-01-01T00:00:05Z",
)


def test_failed_with_the_kill_reason_message_and_condition() -> None:
    """A pod whose containers all exited 0 is still Failed with the kill's reason, and
    its kubelet-owned conditions follow that phase (PodFailed, as upstream's status
    manager makes them for a terminal phase); an old condition of the kill's type is
    replaced, not duplicated."""
    old_target = PodCondition(type="DisruptionTarget", status="False")
    p = pod(APP)
    p = attrs.evolve(p, status=PodStatus(conditions=(old_target,)))
    rt = RuntimePodStatus(uid="u1", sandboxes=(SANDBOX,), containers=(exited("app", 0),))
    kill = Kill("Terminated", MESSAGE, 5, (TARGET,))
    status = generate_pod_status(p, rt, kill=kill, pod_is_terminal=True, now_ns=NS)
    assert (status.phase, status.reason, status.message) == ("Failed", "Terminated", MESSAGE)
    assert [c for c in status.conditions if c.type == "DisruptionTarget"] == [TARGET]
    assert conds(status)["Ready"].reason == "PodFailed"
    assert conds(status)["ContainersReady"].reason == "PodFailed"


def test_a_condition_already_true_keeps_its_transition_time() -> None:
    before = attrs.evolve(TARGET, last_transition_time="2024-12-31T00:00:00Z")
    kill = Kill("Evicted", "low on memory", 1, (TARGET,))
    assert with_kill_conditions([before], kill, "now") == [
        attrs.evolve(TARGET, last_transition_time="2024-12-31T00:00:00Z")
    ]
    flipped = attrs.evolve(before, status="False")
    assert with_kill_conditions([flipped], kill, "now") == [TARGET]
    untimed = attrs.evolve(TARGET, last_transition_time=None)
    assert with_kill_conditions([], Kill("Evicted", "x", 1, (untimed,)), "now") == [
        attrs.evolve(TARGET, last_transition_time="now")
    ]
