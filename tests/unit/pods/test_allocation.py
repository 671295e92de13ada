"""The allocation store: decided at first sight, kept through resizes, read from the runtime."""

from __future__ import annotations

from kubelet.api import Pod, Quantity, ResourceRequirements
from kubelet.cri import RuntimePodStatus
from kubelet.decisions.resize import encode_resources
from kubelet.pods.allocation import Allocations
from kubelet.testing.builders import make_container, make_pod, running, runtime_status


def cpu(amount: str) -> ResourceRequirements:
    return ResourceRequirements(requests={"cpu": Quantity(amount)})


def pod(amount: str) -> Pod:
    return make_pod(make_container("app", resources=cpu(amount)), uid="u1")


def test_a_pod_keeps_what_it_was_first_met_with() -> None:
    store = Allocations()
    first = pod("1")
    assert store.allocated(first) is first
    assert store.allocated(first) is first
    resized = pod("2")
    running_pod = store.allocated(resized)
    assert running_pod.spec.containers[0].resources == cpu("1")
    assert store.allocated(resized) is running_pod  # the same object for the same pod
    assert "u1" in store and len(store) == 1
    store.forget("u1")
    assert store.allocated(resized) is resized  # a pod met afresh


def test_a_restarted_kubelet_reads_the_runtime_s_record() -> None:
    record = {"io.trio-kubelet.container.resources": encode_resources(cpu("1"))}
    views = {"u1": runtime_status(pod("2"), running("app", annotations=record))}

    def recorded(uid: str) -> RuntimePodStatus | None:
        return views.get(uid)

    store = Allocations(recorded)
    assert store.allocated(pod("2")).spec.containers[0].resources == cpu("1")
    other = make_pod(make_container("app", resources=cpu("3")), uid="u2")
    assert store.allocated(other) is other
