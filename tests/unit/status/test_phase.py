"""Pod phase (PH-01..13) and API container statuses (container state vectors)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kubelet.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    ExecAction,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    Probe,
)
from kubelet.cri import ContainerInfo, ContainerRunState, RuntimePodStatus
from kubelet.status import format_time
from kubelet.status.phase import (
    apply_probe_results,
    convert_container_statuses,
    get_phase,
    resolve_phase,
)
from kubelet.testing import builders

T0 = 1_700_000_000 * 10**9  # ns
T0_TEXT = "2023-11-14T22:13:20Z"


def vector(*ids: str) -> pytest.MarkDecorator:
    """Put the test-vector IDs into the test IDs."""
    return pytest.mark.parametrize("vid", ids)


def make_pod(policy: str = "Always", init: tuple[Container, ...] = (), names: str = "AB") -> Pod:
    return builders.make_pod(
        *(Container(name=n, image="busybox") for n in names),
        name="p",
        namespace="ns",
        uid="u",
        init=init,
        restart_policy=policy,
    )


def running(name: str, started: bool | None = None) -> ContainerStatus:
    return ContainerStatus(
        name=name, state=ContainerState(running=ContainerStateRunning()), started=started
    )


def terminated(name: str, code: int) -> ContainerStatus:
    return ContainerStatus(
        name=name, state=ContainerState(terminated=ContainerStateTerminated(exit_code=code))
    )


def waiting(name: str, last_code: int | None = None) -> ContainerStatus:
    last = (
        ContainerState(terminated=ContainerStateTerminated(exit_code=last_code))
        if last_code is not None
        else None
    )
    return ContainerStatus(
        name=name, state=ContainerState(waiting=ContainerStateWaiting()), last_state=last
    )


ALL = ("Always", "OnFailure", "Never")


def cases(
    vid: str, policies: tuple[str, ...], statuses: list[ContainerStatus], phase: str
) -> list[Any]:
    """One case per restart policy, the vector ID in the test ID."""
    return [pytest.param(p, statuses, phase, id=f"{vid}-{p}") for p in policies]


@pytest.mark.parametrize(
    ("policy", "statuses", "phase"),
    [
        *cases("PH-01", ALL, [], "Pending"),
        *cases("PH-01", ALL, [waiting("A"), waiting("B")], "Pending"),
        *cases("PH-02", ALL, [running("A"), running("B")], "Running"),
        *cases("PH-03", ("Always",), [terminated("A", 0), terminated("B", 0)], "Running"),
        *cases(
            "PH-04", ("OnFailure", "Never"), [terminated("A", 0), terminated("B", 0)], "Succeeded"
        ),
        *cases("PH-05", ("Never",), [terminated("A", 1), terminated("B", 2)], "Failed"),
        *cases(
            "PH-06", ("OnFailure", "Always"), [terminated("A", 1), terminated("B", 2)], "Running"
        ),
        *cases("PH-07", ("Never",), [running("A"), terminated("B", 0)], "Running"),
        *cases("PH-08", ALL, [running("A")], "Pending"),
        *cases("PH-09", ALL, [running("A"), waiting("B")], "Pending"),
        *cases("PH-10", ("OnFailure",), [terminated("A", 0), terminated("B", 1)], "Running"),
        # waiting after a termination counts as stopped (restarting)
        *cases("PH-06", ("Always",), [waiting("A", 1), waiting("B", 1)], "Running"),
    ],
)
def test_phase_regular(policy: str, statuses: list[ContainerStatus], phase: str) -> None:
    assert get_phase(make_pod(policy), statuses) == phase


@vector("PH-11")
def test_ph11_failed_init_never(vid: str) -> None:
    pod = make_pod("Never", init=(Container(name="i"),))
    assert get_phase(pod, [terminated("i", 1), waiting("A"), waiting("B")]) == "Failed"
    assert get_phase(pod, [waiting("i", last_code=1)]) == "Failed"
    restarting = make_pod("OnFailure", init=(Container(name="i"),))
    assert get_phase(restarting, [waiting("i", last_code=1)]) == "Pending"


@vector("PH-12")
def test_ph12_init_running(vid: str) -> None:
    for policy in ALL:
        pod = make_pod(policy, init=(Container(name="i"),))
        assert get_phase(pod, [running("i"), waiting("A"), waiting("B")]) == "Pending"


@vector("PH-13")
def test_ph13_sidecar_crashlooping_mains_done(vid: str) -> None:
    sidecar = Container(name="s", restart_policy="Always")
    pod = make_pod("OnFailure", init=(sidecar,))
    statuses = [waiting("s", last_code=1), terminated("A", 0), terminated("B", 0)]
    assert get_phase(pod, statuses) == "Succeeded"


def test_sidecar_not_started_keeps_pending() -> None:
    pod = make_pod("Always", init=(Container(name="s", restart_policy="Always"),))
    assert get_phase(pod, [running("s", started=False)]) == "Pending"
    assert get_phase(pod, [running("s", started=True), running("A"), running("B")]) == "Running"


def test_terminal_pod_ignores_policy() -> None:
    statuses = [terminated("A", 0), terminated("B", 1)]
    assert get_phase(make_pod("Always"), statuses, pod_is_terminal=True) == "Failed"
    ok = [terminated("A", 0), terminated("B", 0)]
    assert get_phase(make_pod("Always"), ok, pod_is_terminal=True) == "Succeeded"
    static = attrs.evolve(
        make_pod("Always"),
        metadata=ObjectMeta(
            name="p", namespace="ns", annotations={"kubernetes.io/config.source": "file"}
        ),
    )
    assert get_phase(static, statuses, pod_is_terminal=True) == "Running"


def test_terminal_phase_is_sticky() -> None:
    assert resolve_phase("Running", previous_phase="Failed") == "Failed"
    assert resolve_phase("Running", api_phase="Succeeded") == "Succeeded"
    assert resolve_phase("Failed", previous_phase="Succeeded") == "Failed"
    assert resolve_phase("Failed", api_phase="Succeeded") == "Succeeded"
    assert resolve_phase("Pending", previous_phase="Running") == "Pending"


# -- API container statuses ---------------------------------------------------------------


def info(
    name: str,
    cid: str,
    state: ContainerRunState,
    *,
    created: int = T0,
    exit_code: int = 0,
    reason: str = "",
    restart_count: int = 0,
) -> ContainerInfo:
    return ContainerInfo(
        id=cid,
        name=name,
        state=state,
        created_at=created,
        started_at=created + 10**9,
        finished_at=created + 5 * 10**9 if state is ContainerRunState.EXITED else 0,
        exit_code=exit_code,
        reason=reason,
        image="docker.io/library/busybox:latest",
        image_ref="docker.io/library/busybox@sha256:abc",
        restart_count=restart_count,
    )


def runtime(*containers: ContainerInfo) -> RuntimePodStatus:
    return RuntimePodStatus(uid="u", name="p", namespace="ns", containers=containers)


def test_default_waiting_reasons() -> None:
    init, regular = convert_container_statuses(make_pod(), runtime())
    assert init == ()
    assert [s.state.waiting.reason for s in regular if s.state and s.state.waiting] == [
        "ContainerCreating",
        "ContainerCreating",
    ]
    assert regular[0].image == "busybox"  # the spec's image until the runtime reports one
    pod = make_pod(init=(Container(name="i", image="busybox"),))
    init, regular = convert_container_statuses(pod, runtime())
    reasons = [s.state.waiting.reason for s in (*init, *regular) if s.state and s.state.waiting]
    assert reasons == ["PodInitializing"] * 3


def test_running_and_terminated_from_runtime() -> None:
    pod = make_pod(names="AB")
    rt = runtime(
        info("A", "a1", ContainerRunState.RUNNING, restart_count=2),
        info("B", "b1", ContainerRunState.EXITED, exit_code=1, reason="Error"),
    )
    _, (a, b) = convert_container_statuses(pod, rt)
    assert a.container_id == "containerd://a1"
    assert a.restart_count == 2
    assert a.image == "docker.io/library/busybox:latest"
    assert a.image_id == "docker.io/library/busybox@sha256:abc"
    assert a.state == ContainerState(
        running=ContainerStateRunning(started_at="2023-11-14T22:13:21Z")
    )
    assert a.started is True and a.ready is True  # no probes
    assert b.state is not None and b.state.terminated == ContainerStateTerminated(
        exit_code=1,
        reason="Error",
        started_at="2023-11-14T22:13:21Z",
        finished_at="2023-11-14T22:13:25Z",
        container_id="containerd://b1",
    )
    assert b.started is False and b.ready is False


def test_runtime_name_prefix() -> None:
    rt = runtime(info("A", "a1", ContainerRunState.RUNNING))
    _, statuses = convert_container_statuses(make_pod(names="A"), rt, runtime_name="cri-o")
    assert statuses[0].container_id == "cri-o://a1"


def test_two_instances_newest_state_previous_last_state() -> None:
    rt = runtime(
        info("A", "a3", ContainerRunState.RUNNING, created=T0 + 3 * 10**9, restart_count=2),
        info("A", "a1", ContainerRunState.EXITED, created=T0, exit_code=2, reason="Error"),
        info(
            "A",
            "a2",
            ContainerRunState.EXITED,
            created=T0 + 10**9,
            exit_code=137,
            reason="OOMKilled",
        ),
    )
    _, (a,) = convert_container_statuses(make_pod(names="A"), rt)
    assert a.container_id == "containerd://a3"
    assert a.last_state is not None and a.last_state.terminated is not None
    assert a.last_state.terminated.reason == "OOMKilled"  # the previous one, not the oldest


def test_crash_loop_reason_override() -> None:
    rt = runtime(
        info("A", "a1", ContainerRunState.EXITED, exit_code=1, reason="Error", restart_count=3)
    )
    message = "back-off 40s restarting failed container=A pod=p_ns(u)"
    _, (a,) = convert_container_statuses(
        make_pod(names="A"), rt, waiting_reasons={"A": ("CrashLoopBackOff", message)}
    )
    assert a.state == ContainerState(
        waiting=ContainerStateWaiting(reason="CrashLoopBackOff", message=message)
    )
    assert a.last_state is not None and a.last_state.terminated is not None
    assert a.last_state.terminated.exit_code == 1
    assert a.restart_count == 3


def test_reason_not_applied_to_container_that_will_not_restart() -> None:
    rt = runtime(info("A", "a1", ContainerRunState.EXITED, exit_code=0, reason="Completed"))
    _, (a,) = convert_container_statuses(
        make_pod("OnFailure", names="A"), rt, waiting_reasons={"A": ("CrashLoopBackOff", "x")}
    )
    assert a.state is not None and a.state.terminated is not None


def test_image_pull_reason_for_never_started_container() -> None:
    reason = (
        "ErrImageNeverPull",
        'Container image "busybox" is not present with pull policy of Never',
    )
    _, (a,) = convert_container_statuses(
        make_pod(names="A"), runtime(), waiting_reasons={"A": reason}
    )
    assert a.state == ContainerState(
        waiting=ContainerStateWaiting(reason=reason[0], message=reason[1])
    )
    assert a.last_state is None


def test_unknown_after_running_is_terminated_137() -> None:
    previous = [attrs.evolve(running("A"), restart_count=4)]
    rt = runtime(info("A", "a1", ContainerRunState.UNKNOWN))
    _, (a,) = convert_container_statuses(
        make_pod("Never", names="A"), rt, previous=PodStatus(container_statuses=tuple(previous))
    )
    assert a.state == ContainerState(
        terminated=ContainerStateTerminated(
            exit_code=137,
            reason="ContainerStatusUnknown",
            message="The container could not be located when the pod was terminated",
        )
    )
    assert a.restart_count == 5


def test_unknown_without_running_history_is_waiting() -> None:
    rt = runtime(info("A", "a1", ContainerRunState.UNKNOWN))
    _, (a,) = convert_container_statuses(make_pod("Never", names="A"), rt)
    assert a.state == ContainerState(waiting=ContainerStateWaiting())


def test_vanished_after_running() -> None:
    previous = [attrs.evolve(running("A"), restart_count=1)]
    _, (a,) = convert_container_statuses(
        make_pod(names="A"), runtime(), previous=PodStatus(container_statuses=tuple(previous))
    )
    assert a.state == ContainerState(waiting=ContainerStateWaiting(reason="ContainerCreating"))
    assert a.last_state == ContainerState(
        terminated=ContainerStateTerminated(
            exit_code=137,
            reason="ContainerStatusUnknown",
            message="The container could not be located when the pod was deleted.  "
            "The container used to be Running",
        )
    )
    assert a.restart_count == 2
    assert get_phase(make_pod(names="A"), [a]) == "Running"  # not back to Pending
    deleted = attrs.evolve(
        make_pod(names="A"),
        metadata=ObjectMeta(name="p", namespace="ns", uid="u", deletion_timestamp=T0_TEXT),
    )
    _, (d,) = convert_container_statuses(
        deleted, runtime(), previous=PodStatus(container_statuses=tuple(previous))
    )
    assert d.restart_count == 1


def test_previous_terminated_status_is_kept() -> None:
    previous = [terminated("A", 3)]
    _, (a,) = convert_container_statuses(
        make_pod("Never", names="A"),
        runtime(),
        previous=PodStatus(container_statuses=tuple(previous)),
    )
    assert a == attrs.evolve(previous[0], started=False, ready=False)


def test_completed_init_never_waiting_again() -> None:
    pod = make_pod(init=(Container(name="i", image="busybox"),), names="A")
    rt = runtime(info("i", "i1", ContainerRunState.EXITED, exit_code=0, reason="Completed"))
    init, _ = convert_container_statuses(pod, rt, waiting_reasons={"i": ("CrashLoopBackOff", "x")})
    assert init[0].state is not None and init[0].state.terminated is not None
    assert init[0].ready is True  # a plain init container is ready once it exited 0


def test_ordering() -> None:
    pod = make_pod(names="CAB", init=(Container(name="z"), Container(name="y")))
    init, regular = convert_container_statuses(pod, runtime())
    assert [s.name for s in init] == ["z", "y"]  # spec order
    assert [s.name for s in regular] == ["A", "B", "C"]  # by name, as upstream


def test_probe_results() -> None:
    probe = Probe(exec=ExecAction(command=("true",)))
    pod = Pod(
        metadata=ObjectMeta(name="p", namespace="ns", uid="u"),
        spec=PodSpec(
            containers=(
                Container(name="A", readiness_probe=probe),
                Container(name="B", startup_probe=probe, readiness_probe=probe),
            )
        ),
    )
    rt = runtime(
        info("A", "a1", ContainerRunState.RUNNING), info("B", "b1", ContainerRunState.RUNNING)
    )
    _, (a, b) = convert_container_statuses(pod, rt)
    assert (a.started, a.ready, b.started, b.ready) == (True, False, False, False)
    _, (a, b) = convert_container_statuses(pod, rt, ready={"a1", "containerd://b1"}, started={"b1"})
    assert (a.started, a.ready, b.started, b.ready) == (True, True, True, True)
    statuses = apply_probe_results(pod, (a, b), is_init=False, started=(), ready=())
    assert [s.ready for s in statuses] == [False, False]


def test_format_time() -> None:
    assert format_time(T0) == T0_TEXT
    assert format_time(T0 + 999_999_999) == T0_TEXT  # whole seconds
    assert format_time(0) == "1970-01-01T00:00:00Z"
