"""The desired pods: which of them are active (what the QoS cgroups are sized from)."""

from __future__ import annotations

import attrs

from kubelet.api.pod import PodStatus
from kubelet.pods.manager import PodManager
from kubelet.testing.builders import make_pod


def test_active_pods_leave_out_rejected_finished_and_deleting_ones() -> None:
    pods = PodManager()
    running = make_pod(name="run", uid="run")
    rejected = make_pod(name="rej", uid="rej")
    finished = make_pod(name="done", uid="done", status=PodStatus(phase="Succeeded"))
    deleting = make_pod(name="del", uid="del")
    deleting = attrs.evolve(
        deleting,
        metadata=attrs.evolve(deleting.metadata, deletion_timestamp="2027-01-01T00:00:00Z"),
    )
    for pod in (running, rejected, finished, deleting):
        pods.upsert(pod)
    pods.set_rejected("rej")
    assert [p.uid for p in pods.active()] == ["run"]
    pods.remove("rej")
    pods.upsert(rejected)  # the same UID again (a restarted source): admitted afresh
    assert [p.uid for p in pods.active()] == ["run", "rej"]
