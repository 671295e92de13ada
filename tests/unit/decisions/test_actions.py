"""computePodActions, test vectors CPA-* and CPI-* (kuberuntime_manager_test.go)."""

from __future__ import annotations

import attrs
import pytest

from kubelet.api import Container, ExecAction, ObjectMeta, Pod, PodSpec, Probe
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    RuntimePodStatus,
    SandboxInfo,
    SandboxState,
)
from kubelet.decisions import (
    ContainerToKill,
    KillReason,
    PodActions,
    compute_pod_actions,
    sandbox_changed,
    should_container_be_restarted,
)
from kubelet.decisions.hash import hash_container

RUNNING = ContainerRunState.RUNNING
EXITED = ContainerRunState.EXITED
CREATED = ContainerRunState.CREATED
UNKNOWN = ContainerRunState.UNKNOWN


def vector(*ids: str) -> pytest.MarkDecorator:
    """Put the test-vector IDs into the test IDs."""
    return pytest.mark.parametrize("vid", ids)


def make_base_pod_and_status(policy: str = "") -> tuple[Pod, RuntimePodStatus]:
    """Upstream makeBasePodAndStatus: foo/foo-ns, foo1..foo3 running, one ready sandbox."""
    containers = tuple(Container(name=f"foo{i}", image="busybox") for i in (1, 2, 3))
    pod = Pod(
        metadata=ObjectMeta(name="foo", namespace="foo-ns", uid="12345678"),
        spec=PodSpec(containers=containers, restart_policy=policy),
    )
    status = RuntimePodStatus(
        uid="12345678",
        name="foo",
        namespace="foo-ns",
        sandboxes=(
            SandboxInfo(id="sandboxID", state=SandboxState.READY, attempt=0, ip="10.0.0.1"),
        ),
        containers=tuple(
            ContainerInfo(id=f"id{i}", name=c.name, state=RUNNING, hash=hash_container(c))
            for i, c in enumerate(containers, start=1)
        ),
    )
    return pod, status


def make_base_with_init(policy: str = "") -> tuple[Pod, RuntimePodStatus]:
    """Upstream makeBasePodAndStatusWithInitContainers: init1..init3 exited 0, no regular."""
    pod, status = make_base_pod_and_status(policy)
    inits = tuple(Container(name=f"init{i}", image="bar-image") for i in (1, 2, 3))
    pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, init_containers=inits))
    status = attrs.evolve(
        status,
        containers=tuple(
            ContainerInfo(
                id=f"initid{i}", name=c.name, state=EXITED, exit_code=0, hash=hash_container(c)
            )
            for i, c in enumerate(inits, start=1)
        ),
    )
    return pod, status


def set_container(status: RuntimePodStatus, name: str, **changes: object) -> RuntimePodStatus:
    return attrs.evolve(
        status,
        containers=tuple(
            attrs.evolve(c, **changes) if c.name == name else c for c in status.containers
        ),
    )


def only(status: RuntimePodStatus, name: str) -> RuntimePodStatus:
    return attrs.evolve(status, containers=tuple(c for c in status.containers if c.name == name))


def sandbox(status: RuntimePodStatus, **changes: object) -> RuntimePodStatus:
    return attrs.evolve(status, sandboxes=(attrs.evolve(status.sandboxes[0], **changes),))


def actions(**kw: object) -> PodActions:
    base = {"sandbox_id": "sandboxID"}
    return PodActions(**{**base, **kw})  # type: ignore[arg-type]


# -- regular containers (CPA) -------------------------------------------------------------


@vector("CPA-01")
def test_cpa01_no_op(vid: str) -> None:
    pod, status = make_base_pod_and_status()
    assert compute_pod_actions(pod, status) == actions()


@vector("CPA-02")
def test_cpa02_new_pod(vid: str) -> None:
    pod, status = make_base_pod_and_status()
    status = attrs.evolve(status, sandboxes=(), containers=())
    assert compute_pod_actions(pod, status) == PodActions(
        kill_pod=True, create_sandbox=True, attempt=0, containers_to_start=(0, 1, 2)
    )


@pytest.mark.parametrize(
    ("vid", "policy", "expected"),
    [("CPA-03", "Always", (0, 1)), ("CPA-04", "OnFailure", (1,)), ("CPA-06", "Never", ())],
)
def test_cpa03_04_06_exited_by_policy(vid: str, policy: str, expected: tuple[int, ...]) -> None:
    pod, status = make_base_pod_and_status(policy)
    status = set_container(status, "foo1", state=EXITED, exit_code=0)
    status = set_container(status, "foo2", state=EXITED, exit_code=111)
    assert compute_pod_actions(pod, status) == actions(containers_to_start=expected), vid


@vector("CPA-03")
def test_cpa03_unset_policy_is_always(vid: str) -> None:
    pod, status = make_base_pod_and_status("")
    status = set_container(status, "foo1", state=EXITED, exit_code=0)
    assert compute_pod_actions(pod, status).containers_to_start == (0,)


@vector("CPA-05")
def test_cpa05_onfailure_created_never_started(vid: str) -> None:
    pod, status = make_base_pod_and_status("OnFailure")
    status = set_container(status, "foo1", state=EXITED, exit_code=0)
    status = set_container(status, "foo2", state=CREATED)
    assert compute_pod_actions(pod, status) == actions(containers_to_start=(1,))


@vector("CPA-07")
def test_cpa07_sandbox_not_ready(vid: str) -> None:
    pod, status = make_base_pod_and_status("Always")
    status = sandbox(status, state=SandboxState.NOTREADY)
    assert compute_pod_actions(pod, status) == actions(
        kill_pod=True, create_sandbox=True, attempt=1, containers_to_start=(0, 1, 2)
    )


@vector("CPA-08")
def test_cpa08_onfailure_sandbox_not_ready_succeeded_not_rerun(vid: str) -> None:
    pod, status = make_base_pod_and_status("OnFailure")
    status = sandbox(status, state=SandboxState.NOTREADY)
    status = set_container(status, "foo2", state=EXITED, exit_code=0)
    assert compute_pod_actions(pod, status) == actions(
        kill_pod=True, create_sandbox=True, attempt=1, containers_to_start=(0, 2)
    )


@vector("CPA-09")
def test_cpa09_sandbox_without_ip(vid: str) -> None:
    pod, status = make_base_pod_and_status()
    status = sandbox(status, ip="")
    assert compute_pod_actions(pod, status) == actions(
        kill_pod=True, create_sandbox=True, attempt=1, containers_to_start=(0, 1, 2)
    )


@vector("CPA-10")
def test_cpa10_hash_changed(vid: str) -> None:
    pod, status = make_base_pod_and_status("Never")
    status = set_container(status, "foo2", hash="deadbeef")
    assert compute_pod_actions(pod, status) == actions(
        containers_to_start=(1,),
        containers_to_kill={
            "id2": ContainerToKill("foo2", "Container foo2 definition changed, will be restarted")
        },
    )


@vector("CPA-11")
def test_cpa11_liveness_failure(vid: str) -> None:
    pod, status = make_base_pod_and_status()
    result = compute_pod_actions(pod, status, liveness_failed={"id2"})
    assert result == actions(
        containers_to_start=(1,),
        containers_to_kill={
            "id2": ContainerToKill(
                "foo2",
                "Container foo2 failed liveness probe, will be restarted",
                KillReason.LIVENESS_PROBE,
            )
        },
    )


@vector("CPA-12")
def test_cpa12_startup_failure(vid: str) -> None:
    pod, status = make_base_pod_and_status()
    result = compute_pod_actions(pod, status, startup_failed={"id2"})
    assert result == actions(
        containers_to_start=(1,),
        containers_to_kill={
            "id2": ContainerToKill(
                "foo2",
                "Container foo2 failed startup probe, will be restarted",
                KillReason.STARTUP_PROBE,
            )
        },
    )


@pytest.mark.parametrize(("vid", "policy"), [("CPA-13", "Never"), ("CPA-14", "OnFailure")])
def test_cpa13_14_all_done_no_new_sandbox(vid: str, policy: str) -> None:
    pod, status = make_base_pod_and_status(policy)
    status = sandbox(status, state=SandboxState.NOTREADY, attempt=1)
    for name in ("foo1", "foo2", "foo3"):
        status = set_container(status, name, state=EXITED, exit_code=0)
    assert compute_pod_actions(pod, status) == actions(
        kill_pod=True, create_sandbox=False, attempt=2
    ), vid


@vector("CPA-15")
def test_cpa15_never_ran_retry_sandbox(vid: str) -> None:
    pod, status = make_base_pod_and_status("Never")
    status = attrs.evolve(sandbox(status, state=SandboxState.NOTREADY, attempt=2), containers=())
    assert compute_pod_actions(pod, status) == actions(
        kill_pod=True, create_sandbox=True, attempt=3, containers_to_start=(0, 1, 2)
    )


@vector("CPA-16")
def test_cpa16_unknown_killed_then_restarted(vid: str) -> None:
    pod, status = make_base_pod_and_status("Never")
    status = set_container(status, "foo2", state=UNKNOWN)
    assert compute_pod_actions(pod, status) == actions(
        containers_to_start=(1,),
        containers_to_kill={
            "id2": ContainerToKill(
                "foo2", 'Container is in "unknown" state, try killing it before restart'
            )
        },
    )


@vector("CPA-17")
def test_cpa17_created_is_started(vid: str) -> None:
    pod, status = make_base_pod_and_status("Never")
    status = set_container(status, "foo2", state=CREATED)
    assert compute_pod_actions(pod, status) == actions(containers_to_start=(1,))


@vector("CPA-18")
def test_cpa18_nothing_running_nothing_to_start_kills_pod(vid: str) -> None:
    pod, status = make_base_pod_and_status("Never")
    for name in ("foo1", "foo2", "foo3"):
        status = set_container(status, name, state=EXITED, exit_code=0)
    assert compute_pod_actions(pod, status) == actions(kill_pod=True)


@vector("CPA-19")
def test_cpa19_never_liveness_failure_not_restarted(vid: str) -> None:
    pod, status = make_base_pod_and_status("Never")
    kill = {
        "id2": ContainerToKill(
            "foo2", "Container foo2 failed liveness probe", KillReason.LIVENESS_PROBE
        )
    }
    result = compute_pod_actions(pod, status, liveness_failed={"id2"})
    assert result == actions(containers_to_kill=kill)  # foo1 and foo3 keep the pod
    single = attrs.evolve(pod, spec=attrs.evolve(pod.spec, containers=pod.spec.containers[1:2]))
    result = compute_pod_actions(single, only(status, "foo2"), liveness_failed={"id2"})
    assert result == actions(kill_pod=True, containers_to_kill=kill)


def test_host_network_flip_recreates_without_old_id() -> None:
    pod, status = make_base_pod_and_status()
    host = attrs.evolve(pod, spec=attrs.evolve(pod.spec, host_network=True))
    assert sandbox_changed(host, status) == (True, 1, "")
    status = sandbox(status, host_network=True, ip="")
    assert sandbox_changed(host, status) == (False, 0, "sandboxID")  # no IP needed


def test_multiple_ready_sandboxes_recreate_after_highest_attempt() -> None:
    pod, status = make_base_pod_and_status()
    sandboxes = (
        SandboxInfo(id="new", state=SandboxState.READY, attempt=1, ip="10.0.0.2"),
        SandboxInfo(id="old", state=SandboxState.READY, attempt=4, ip="10.0.0.1"),
    )
    assert sandbox_changed(pod, attrs.evolve(status, sandboxes=sandboxes)) == (True, 5, "new")


# -- init containers (CPI) ----------------------------------------------------------------


@vector("CPI-01")
def test_cpi01_init_done_start_regular(vid: str) -> None:
    pod, status = make_base_with_init()
    assert compute_pod_actions(pod, status) == actions(containers_to_start=(0, 1, 2))


@vector("CPI-02")
def test_cpi02_no_statuses_start_first_init(vid: str) -> None:
    pod, status = make_base_with_init()
    status = attrs.evolve(status, containers=())
    result = compute_pod_actions(pod, status)
    assert result == actions(init_containers_to_start=(0,))
    assert result.next_init_container_to_start == 0


@vector("CPI-03")
def test_cpi03_init_running_wait(vid: str) -> None:
    pod, status = make_base_with_init("Always")
    status = set_container(status, "init3", state=RUNNING)
    assert compute_pod_actions(pod, status) == actions()


@vector("CPI-04")
def test_cpi04_sandbox_not_ready_restart_init(vid: str) -> None:
    pod, status = make_base_with_init("Always")
    status = sandbox(status, state=SandboxState.NOTREADY)
    assert compute_pod_actions(pod, status) == actions(
        kill_pod=True, create_sandbox=True, attempt=1, init_containers_to_start=(0,)
    )


@pytest.mark.parametrize(
    "policy", [pytest.param(p, id=f"CPI-05-{p}") for p in ("Always", "OnFailure")]
)
def test_cpi05_failed_init_restarted(policy: str) -> None:
    pod, status = make_base_with_init(policy)
    status = set_container(status, "init3", exit_code=137)
    assert compute_pod_actions(pod, status) == actions(init_containers_to_start=(2,))


@vector("CPI-05")
def test_cpi05_oom_killed_init_counts_as_failed(vid: str) -> None:
    pod, status = make_base_with_init("Always")
    status = set_container(status, "init3", exit_code=0, reason="OOMKilled")
    assert compute_pod_actions(pod, status) == actions(init_containers_to_start=(2,))


def test_oom_killed_init_that_exited_0_is_not_restarted_on_failure_only() -> None:
    """With ContainerRestartRules (on since 1.35) upstream asks ShouldContainerBeRestarted
    about a failed init container, and that reads the exit code: OnFailure and 0 is no
    restart, so the pod is killed."""
    pod, status = make_base_with_init("OnFailure")
    status = set_container(status, "init3", exit_code=0, reason="OOMKilled")
    assert compute_pod_actions(pod, status) == actions(kill_pod=True)


@vector("CPI-06")
def test_cpi06_failed_init_never_kills_pod(vid: str) -> None:
    pod, status = make_base_with_init("Never")
    status = set_container(status, "init3", exit_code=137)
    assert compute_pod_actions(pod, status) == actions(kill_pod=True)


@pytest.mark.parametrize(
    "policy", [pytest.param(p, id=f"CPI-07-{p}") for p in ("Always", "OnFailure")]
)
def test_cpi07_unknown_init_killed_and_restarted(policy: str) -> None:
    pod, status = make_base_with_init(policy)
    status = set_container(status, "init3", state=UNKNOWN)
    assert compute_pod_actions(pod, status) == actions(
        init_containers_to_start=(2,),
        containers_to_kill={
            "initid3": ContainerToKill(
                "init3", 'Init container is in "unknown" state, try killing it before restart'
            )
        },
    )


@vector("CPI-08")
def test_cpi08_unknown_init_never_kills_pod(vid: str) -> None:
    pod, status = make_base_with_init("Never")
    status = set_container(status, "init3", state=UNKNOWN)
    assert compute_pod_actions(pod, status) == actions(kill_pod=True)


@vector("CPI-09")
def test_cpi09_never_sandbox_not_ready_init_done(vid: str) -> None:
    pod, status = make_base_with_init("Never")
    status = sandbox(status, state=SandboxState.NOTREADY)
    assert compute_pod_actions(pod, status) == actions(
        kill_pod=True, create_sandbox=False, attempt=1
    )


@vector("CPI-10")
def test_cpi10_never_sandbox_not_ready_no_statuses(vid: str) -> None:
    pod, status = make_base_with_init("Never")
    status = attrs.evolve(sandbox(status, state=SandboxState.NOTREADY), containers=())
    assert compute_pod_actions(pod, status) == actions(
        kill_pod=True, create_sandbox=True, attempt=1, init_containers_to_start=(0,)
    )


@vector("CPI-11")
def test_cpi11_onfailure_sandbox_not_ready_failed_init_restarts_from_first(vid: str) -> None:
    pod, status = make_base_with_init("OnFailure")
    status = sandbox(status, state=SandboxState.NOTREADY)
    status = set_container(status, "init3", exit_code=137)
    assert compute_pod_actions(pod, status) == actions(
        kill_pod=True, create_sandbox=True, attempt=1, init_containers_to_start=(0,)
    )


@vector("CPI-12")
def test_cpi12_only_last_init_running(vid: str) -> None:
    pod, status = make_base_with_init("Always")
    status = only(set_container(status, "init3", state=RUNNING), "init3")
    assert compute_pod_actions(pod, status) == actions()


@vector("CPI-13")
def test_cpi13_created_init_restarted(vid: str) -> None:
    pod, status = make_base_with_init("Always")
    status = set_container(status, "init3", state=CREATED)
    assert compute_pod_actions(pod, status) == actions(init_containers_to_start=(2,))


def test_init_progress_starts_next() -> None:
    pod, status = make_base_with_init()
    status = only(status, "init1")
    assert compute_pod_actions(pod, status) == actions(init_containers_to_start=(1,))


def test_running_regular_container_means_initialized() -> None:
    """Init containers garbage-collected after the pod started must not run again."""
    pod, status = make_base_pod_and_status()
    inits = (Container(name="init1", image="bar-image"),)
    pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, init_containers=inits))
    assert compute_pod_actions(pod, status) == actions()


# -- sidecars: not in the vectors, must not break ------------------------------------------


def with_sidecar(startup: bool = False) -> tuple[Pod, RuntimePodStatus, Container]:
    pod, status = make_base_pod_and_status()
    probe = Probe(exec=ExecAction(command=("true",)))
    sidecar = Container(
        name="side",
        image="busybox",
        restart_policy="Always",
        startup_probe=probe if startup else None,
        liveness_probe=probe,
    )
    pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, init_containers=(sidecar,)))
    return pod, status, sidecar


def test_sidecar_started_first_then_regular() -> None:
    pod, status, _ = with_sidecar()
    status = attrs.evolve(status, containers=())
    assert compute_pod_actions(pod, status) == actions(init_containers_to_start=(0,))


def test_sidecar_running_lets_regular_start() -> None:
    pod, status, sidecar = with_sidecar()
    info = ContainerInfo(id="s1", name="side", state=RUNNING, hash=hash_container(sidecar))
    regular_gone = attrs.evolve(status, containers=(info,))
    assert compute_pod_actions(pod, regular_gone) == actions(containers_to_start=(0, 1, 2))


def test_sidecar_exited_is_restarted_and_liveness_kills() -> None:
    pod, status, sidecar = with_sidecar()
    exited = ContainerInfo(
        id="s1", name="side", state=EXITED, exit_code=1, hash=hash_container(sidecar)
    )
    result = compute_pod_actions(pod, attrs.evolve(status, containers=(exited, *status.containers)))
    assert result == actions(init_containers_to_start=(0,))
    running = attrs.evolve(exited, state=RUNNING)
    result = compute_pod_actions(
        pod, attrs.evolve(status, containers=(running, *status.containers)), liveness_failed={"s1"}
    )
    assert result.init_containers_to_start == (0,)
    assert result.containers_to_kill["s1"].reason is KillReason.LIVENESS_PROBE


def test_a_sidecar_a_resize_restarts_is_killed_and_started_again() -> None:
    pod, status, sidecar = with_sidecar()
    running = ContainerInfo(id="s1", name="side", state=RUNNING, hash=hash_container(sidecar))
    status = attrs.evolve(status, containers=(running, *status.containers))
    result = compute_pod_actions(pod, status, resize_restart={"s1"})
    assert result.init_containers_to_start == (0,)
    assert result.containers_to_kill["s1"].message == "Container side resize requires restart"
    assert not result.kill_pod and result.containers_to_start == ()


def test_sidecar_waits_for_startup_probe() -> None:
    pod, status, sidecar = with_sidecar(startup=True)
    running = ContainerInfo(id="s1", name="side", state=RUNNING, hash=hash_container(sidecar))
    status = attrs.evolve(status, containers=(running,))
    assert compute_pod_actions(pod, status, startup_succeeded=()) == actions()
    started = compute_pod_actions(pod, status, startup_succeeded={"s1"})
    assert started.containers_to_start == (0, 1, 2)


def test_sidecar_startup_probe_without_a_verdict_or_with_unknown_waits() -> None:
    """computeInitContainerActions: no result yet, or Unknown: wait; Failure: restart it."""
    pod, status, sidecar = with_sidecar(startup=True)
    init2 = Container(name="setup", image="busybox")
    pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, init_containers=(sidecar, init2)))
    running = ContainerInfo(id="s1", name="side", state=RUNNING, hash=hash_container(sidecar))
    status = attrs.evolve(status, containers=(running,))
    assert compute_pod_actions(pod, status, startup_succeeded=frozenset()) == actions()
    failed = compute_pod_actions(pod, status, startup_succeeded=(), startup_failed={"s1"})
    assert failed.init_containers_to_start == (0,)
    assert failed.containers_to_kill["s1"].reason is KillReason.STARTUP_PROBE
    started = compute_pod_actions(pod, status, startup_succeeded={"s1"})
    assert started == actions(init_containers_to_start=(1,))


def test_sidecar_without_startup_probe_counts_as_started_once_running() -> None:
    pod, status, sidecar = with_sidecar(startup=False)
    init2 = Container(name="setup", image="busybox")
    pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, init_containers=(sidecar, init2)))
    running = ContainerInfo(id="s1", name="side", state=RUNNING, hash=hash_container(sidecar))
    status = attrs.evolve(status, containers=(running,))
    result = compute_pod_actions(pod, status, startup_succeeded=frozenset())
    assert result == actions(init_containers_to_start=(1,))


@pytest.mark.parametrize("policy", ["Never", "OnFailure", "Always"])
def test_an_exited_sidecar_should_be_restarted_whatever_the_pod_policy(policy: str) -> None:
    """ShouldContainerBeRestarted with ContainerRestartRules (on by default since 1.35):
    the container's own restartPolicy Always wins over the pod's."""
    pod, status, sidecar = with_sidecar()
    pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, restart_policy=policy))
    exited = ContainerInfo(
        id="s1", name="side", state=EXITED, exit_code=0, hash=hash_container(sidecar)
    )
    status = attrs.evolve(status, containers=(exited, *status.containers))
    assert should_container_be_restarted(sidecar, pod, status) is True
    assert compute_pod_actions(pod, status).init_containers_to_start == (0,)


def test_sidecar_does_not_keep_finished_pod_alive() -> None:
    pod, status, sidecar = with_sidecar()
    pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, restart_policy="Never"))
    running = ContainerInfo(id="s1", name="side", state=RUNNING, hash=hash_container(sidecar))
    done = tuple(attrs.evolve(c, state=EXITED) for c in status.containers)
    result = compute_pod_actions(pod, attrs.evolve(status, containers=(running, *done)))
    assert result == actions(kill_pod=True)


# -- ShouldContainerBeRestarted ------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "state", "exit_code", "expected"),
    [
        ("Always", RUNNING, 0, False),
        ("Never", UNKNOWN, 0, True),
        ("Never", CREATED, 0, True),
        ("Never", EXITED, 1, False),
        ("OnFailure", EXITED, 0, False),
        ("OnFailure", EXITED, 2, True),
        ("Always", EXITED, 0, True),
    ],
)
def test_should_container_be_restarted(
    policy: str, state: ContainerRunState, exit_code: int, expected: bool
) -> None:
    pod, status = make_base_pod_and_status(policy)
    status = set_container(status, "foo1", state=state, exit_code=exit_code)
    assert should_container_be_restarted(pod.spec.containers[0], pod, status) is expected


def test_should_not_restart_deleted_pod_or_restart_missing() -> None:
    pod, status = make_base_pod_and_status()
    assert should_container_be_restarted(
        pod.spec.containers[0], pod, attrs.evolve(status, containers=())
    )
    deleted = attrs.evolve(
        pod, metadata=attrs.evolve(pod.metadata, deletion_timestamp="2024-01-01T00:00:00Z")
    )
    assert not should_container_be_restarted(
        pod.spec.containers[0], deleted, attrs.evolve(status, containers=())
    )


def test_a_deleted_pod_is_only_killed_never_started_again() -> None:
    pod, status = make_base_pod_and_status()
    deleted = attrs.evolve(
        pod, metadata=attrs.evolve(pod.metadata, deletion_timestamp="2024-01-01T00:00:00Z")
    )
    stopped = sandbox(status, state=SandboxState.NOTREADY)
    stopped = attrs.evolve(
        stopped, containers=tuple(attrs.evolve(c, state=EXITED) for c in status.containers)
    )
    assert compute_pod_actions(deleted, stopped) == actions(kill_pod=True, attempt=1)
    assert compute_pod_actions(deleted, attrs.evolve(status, sandboxes=(), containers=())) == (
        actions(kill_pod=True, sandbox_id="", attempt=0)
    )
    assert compute_pod_actions(deleted, status) == actions(kill_pod=True)


# -- ephemeral containers (upstream TestComputePodActionsWithEphemeralContainers) ----------


def with_ephemeral(pod: Pod, *names: str) -> Pod:
    from kubelet.api import EphemeralContainer

    ephemeral = tuple(EphemeralContainer(name=n, image="busybox") for n in names)
    return attrs.evolve(pod, spec=attrs.evolve(pod.spec, ephemeral_containers=ephemeral))


def test_ephemeral_containers_start_once() -> None:
    pod, status = make_base_pod_and_status()
    pod = with_ephemeral(pod, "debug", "debug2")
    assert compute_pod_actions(pod, status) == actions(ephemeral_containers_to_start=(0, 1))
    ran = ContainerInfo(id="dbg", name="debug", state=EXITED, exit_code=1)
    status = attrs.evolve(status, containers=(*status.containers, ran))
    assert compute_pod_actions(pod, status) == actions(ephemeral_containers_to_start=(1,))


def test_ephemeral_containers_wait_for_a_sandbox() -> None:
    pod, status = make_base_pod_and_status()
    pod = with_ephemeral(pod, "debug")
    got = compute_pod_actions(pod, sandbox(status, state=SandboxState.NOTREADY))
    assert got.create_sandbox and got.ephemeral_containers_to_start == ()
