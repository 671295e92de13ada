from __future__ import annotations

from kubelet.api import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStatus,
    PodStatus,
)
from kubelet.status import Termination, new_terminations

CRASH = ContainerStateTerminated(
    exit_code=139, reason="Error", container_id="containerd://a", finished_at="t1"
)
DONE = ContainerStateTerminated(exit_code=0, reason="Completed", container_id="containerd://i")


def app(
    state: ContainerStateTerminated | None, last: ContainerStateTerminated | None = None
) -> ContainerStatus:
    now = (
        ContainerState(terminated=state)
        if state
        else ContainerState(running=ContainerStateRunning())
    )
    return ContainerStatus(
        name="app", state=now, last_state=ContainerState(terminated=last) if last else None
    )


def test_a_crash_counted_when_first_reported_and_not_again() -> None:
    running = PodStatus(container_statuses=(app(None),))
    crashed = PodStatus(container_statuses=(app(CRASH),))
    assert new_terminations(running, crashed) == [Termination("container", 139, "Error")]
    assert new_terminations(crashed, crashed) == []
    restarted = PodStatus(container_statuses=(app(None, last=CRASH),))  # now the last state
    assert new_terminations(crashed, restarted) == []


def test_a_crash_between_two_reports_counted_from_the_last_state() -> None:
    running = PodStatus(container_statuses=(app(None),))
    restarted = PodStatus(container_statuses=(app(None, last=CRASH),))
    assert new_terminations(running, restarted) == [Termination("container", 139, "Error")]


def test_a_later_message_is_the_same_termination() -> None:
    crashed = PodStatus(container_statuses=(app(CRASH),))
    noted = ContainerStateTerminated(
        exit_code=139, reason="Error", container_id="containerd://a", finished_at="t1",
        message="segfault",
    )  # fmt: skip
    assert new_terminations(crashed, PodStatus(container_statuses=(app(noted),))) == []


def test_types_and_nothing_known_before() -> None:
    init = ContainerStatus(name="init", state=ContainerState(terminated=DONE))
    debug = ContainerStatus(name="debug", state=ContainerState(terminated=CRASH))
    status = PodStatus(init_container_statuses=(init,), ephemeral_container_statuses=(debug,))
    assert new_terminations(None, status) == [
        Termination("init_container", 0, "Completed"),
        Termination("ephemeral_container", 139, "Error"),
    ]
