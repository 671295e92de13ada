"""A readiness verdict applied to the last reported status (no pod sync)."""

from __future__ import annotations

from kubelet.api import Container, Pod, PodStatus
from kubelet.api.pod import PodReadinessGate
from kubelet.cri import RuntimePodStatus
from kubelet.status import format_time, generate_pod_status, with_container_readiness
from kubelet.testing.builders import make_pod

from .test_generate import NS, SANDBOX, conds, running

APP = Container(name="app", image="busybox:1.35")
PROXY = Container(name="proxy", image="busybox:1.35", restart_policy="Always")
LATER = format_time(NS + 60 * 10**9)


def ready_pod(**spec: object) -> tuple[Pod, PodStatus]:
    """A pod with a sidecar and a regular container, both running and ready."""
    pod = make_pod(APP, uid="u1", init=(PROXY,), restart_policy="Always", **spec)
    rt = RuntimePodStatus(
        uid="u1", sandboxes=(SANDBOX,), containers=(running("proxy"), running("app"))
    )
    status = generate_pod_status(
        pod, rt, started={"id-proxy", "id-app"}, ready={"id-proxy", "id-app"}, now_ns=NS
    )
    assert conds(status)["ContainersReady"].status == "True"
    return pod, status


def test_an_unready_sidecar_makes_the_pod_unready_at_once() -> None:
    pod, status = ready_pod()
    assert conds(status)["Ready"].status == "True"
    updated = with_container_readiness(pod, status, "id-proxy", False, LATER)
    assert updated is not None
    assert updated.init_container_statuses[0].ready is False
    assert updated.container_statuses[0].ready is True
    ready, cready = conds(updated)["Ready"], conds(updated)["ContainersReady"]
    assert (ready.status, ready.reason) == ("False", "ContainersNotReady")
    assert ready.message == "containers with unready status: [proxy]"
    assert cready.status == "False" and cready.last_transition_time == LATER
    assert [c.type for c in updated.conditions] == [c.type for c in status.conditions]
    assert conds(updated)["Initialized"] == conds(status)["Initialized"]


def test_ready_again_moves_the_transition_time_once() -> None:
    pod, status = ready_pod()
    unready = with_container_readiness(pod, status, "id-app", False, LATER)
    assert unready is not None
    again = with_container_readiness(pod, unready, "id-app", True, format_time(NS + 90 * 10**9))
    assert again is not None
    assert conds(again)["Ready"].status == "True"
    assert conds(again)["Ready"].last_transition_time == format_time(NS + 90 * 10**9)


def test_nothing_to_change_gives_none() -> None:
    pod, status = ready_pod()
    assert with_container_readiness(pod, status, "id-app", True, LATER) is None
    assert with_container_readiness(pod, status, "id-elsewhere", False, LATER) is None


def test_readiness_gates_still_hold_the_pod_back() -> None:
    pod, status = ready_pod(readiness_gates=(PodReadinessGate(condition_type="lb/ready"),))
    assert conds(status)["Ready"].status == "False"
    unready = with_container_readiness(pod, status, "id-proxy", False, LATER)
    assert unready is not None
    back = with_container_readiness(pod, unready, "id-proxy", True, LATER)
    assert back is not None
    assert conds(back)["Ready"].reason == "ReadinessGatesNotReady"
