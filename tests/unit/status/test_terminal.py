"""The last status of a finished pod (upstream's status manager TerminatePod), pure."""

from __future__ import annotations

from kubelet.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodStatus,
)
from kubelet.status import terminated_status
from kubelet.status.terminal import MSG_NOT_LOCATED
from kubelet.testing.builders import make_pod

RUNNING = ContainerState(running=ContainerStateRunning(started_at="2027-01-01T00:00:00Z"))
WAITING = ContainerState(waiting=ContainerStateWaiting(reason="PodInitializing"))


def done(code: int = 0) -> ContainerState:
    return ContainerState(terminated=ContainerStateTerminated(exit_code=code, reason="Completed"))


def cs(name: str, state: ContainerState, last: ContainerState | None = None) -> ContainerStatus:
    return ContainerStatus(name=name, state=state, last_state=last)


def pod(status: PodStatus, *, inits: int = 0, static: bool = False) -> Pod:
    annotations = {"kubernetes.io/config.source": "file"} if static else {}
    return make_pod(
        Container(name="a", image="x"),
        Container(name="b", image="x"),
        name="p",
        namespace="d",
        uid="u",
        annotations=annotations,
        init=tuple(Container(name=f"i{n}", image="x") for n in range(inits)),
        status=status,
    )


def unknown(status: ContainerStatus) -> bool:
    t = status.state.terminated if status.state else None
    return t is not None and (t.exit_code, t.reason, t.message) == (
        137,
        "ContainerStatusUnknown",
        MSG_NOT_LOCATED,
    )


def test_terminated_containers_are_kept_as_they_are() -> None:
    status = PodStatus(phase="Succeeded", container_statuses=(cs("a", done()), cs("b", done())))
    assert terminated_status(pod(status), status) == status


def test_running_or_waiting_containers_become_unknown_terminated_and_the_phase_failed() -> None:
    status = PodStatus(phase="Running", container_statuses=(cs("a", RUNNING), cs("b", done(1))))
    out = terminated_status(pod(status), status)
    assert out.phase == "Failed"
    assert unknown(out.container_statuses[0])
    assert out.container_statuses[1] == status.container_statuses[1]


def test_a_terminal_phase_is_kept_and_a_static_pod_keeps_its_phase() -> None:
    status = PodStatus(phase="Succeeded", container_statuses=(cs("a", RUNNING),))
    assert terminated_status(pod(status), status).phase == "Succeeded"
    running = PodStatus(phase="Running", container_statuses=(cs("a", RUNNING),))
    assert terminated_status(pod(running, static=True), running).phase == "Running"


def test_regular_containers_of_a_pod_that_never_initialized_stay_waiting() -> None:
    status = PodStatus(
        phase="Pending",
        init_container_statuses=(cs("i0", done(1)), cs("i1", WAITING)),
        container_statuses=(cs("a", WAITING), cs("b", WAITING)),
    )
    out = terminated_status(pod(status, inits=2), status)
    assert out.container_statuses == status.container_statuses
    # init containers: the trailing ones that never started stay waiting
    assert out.init_container_statuses == status.init_container_statuses
    crashing = PodStatus(
        phase="Pending",
        init_container_statuses=(cs("i0", WAITING, last=done(1)), cs("i1", WAITING)),
    )
    out = terminated_status(pod(crashing, inits=2), crashing)
    assert unknown(out.init_container_statuses[0])
    assert out.init_container_statuses[1] == crashing.init_container_statuses[1]
