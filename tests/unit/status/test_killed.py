"""The status of a pod the kubelet stopped for the node (graceful shutdown)."""

from __future__ import annotations

from kubelet.api.pod import PodCondition, PodStatus
from kubelet.status.killed import Kill, killed_status

MESSAGE = "Pod was terminated in response to imminent node shutdown."


def test_failed_with_the_kill_reason_message_and_condition() -> None:
    old_target = PodCondition(type="DisruptionTarget", status="False")
    ready = PodCondition(type="Ready", status="False", reason="PodCompleted")
    status = PodStatus(phase="Succeeded", conditions=(ready, old_target), qos_class="BestEffort")
    target = PodCondition(
        type="DisruptionTarget", status="True", reason="TerminationByKubelet", message=MESSAGE
    )
    killed = killed_status(status, Kill("Terminated", MESSAGE, (target,)))
    assert (killed.phase, killed.reason, killed.message) == ("Failed", "Terminated", MESSAGE)
    assert killed.conditions == (ready, target)  # replaced, not duplicated
    assert killed.qos_class == "BestEffort"
