"""A container's own restartPolicy and restartPolicyRules (``ContainerRestartRules``, on by
default since 1.35): upstream's ``ContainerShouldRestart`` and every place that asks it."""

from __future__ import annotations

import attrs
import pytest

from kubelet.api import (
    ContainerRestartRule,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    drop_container_restart_rules,
)
from kubelet.api.pod import ContainerRestartRuleOnExitCodes
from kubelet.cri import ContainerRunState, SandboxState
from kubelet.decisions import (
    KillReason,
    compute_pod_actions,
    container_should_restart,
    exited_instance_restarts,
    should_container_be_restarted,
)
from kubelet.decisions.hash import hash_container
from kubelet.decisions.restart import matching_rule, restarts_after_kill
from kubelet.status.phase import FAILED, PENDING, RUNNING, SUCCEEDED, get_phase
from kubelet.testing.builders import (
    exited,
    make_container,
    make_pod,
    ready_sandbox,
    running,
    runtime_status,
)


def rule(operator: str, *codes: int, action: str = "Restart") -> ContainerRestartRule:
    return ContainerRestartRule(
        action=action, exit_codes=ContainerRestartRuleOnExitCodes(operator=operator, values=codes)
    )


ON_42 = rule("In", 42)


# -- the decision ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod_policy", "own", "rules", "code", "expected"),
    [
        ("Always", "Never", (), 0, False),
        ("Always", "Never", (), 1, False),
        ("Never", "Always", (), 0, True),
        ("Never", "OnFailure", (), 0, False),
        ("Never", "OnFailure", (), 3, True),
        ("OnFailure", None, (), 0, False),
        ("", None, (), 0, True),  # the pod's default is Always
        ("Never", "Never", (ON_42,), 42, True),
        ("Never", "Never", (ON_42,), 1, False),
        ("Never", "Never", (rule("NotIn", 0, 1),), 99, True),
        ("Never", "Never", (rule("NotIn", 0, 1),), 1, False),
        ("Always", "Never", (rule("NotIn", 0),), 0, False),  # no match: own policy
        ("Never", "Never", (rule("In"),), 0, False),  # an empty In list matches nothing
        ("Never", "Never", (rule("NotIn"),), 0, True),  # ... and NotIn everything
        ("Never", None, (ON_42,), 42, False),  # rules count only with an own policy
        ("Never", "Never", (ContainerRestartRule(action="Restart"),), 0, False),
    ],
)
def test_container_should_restart(
    pod_policy: str,
    own: str | None,
    rules: tuple[ContainerRestartRule, ...],
    code: int,
    expected: bool,
) -> None:
    pod = make_pod(
        make_container(restart_policy=own, restart_policy_rules=rules), restart_policy=pod_policy
    )
    assert container_should_restart(pod.spec.containers[0], pod.spec, code) is expected


def test_the_first_matching_rule_decides() -> None:
    """Rules are read in order and the first match wins: a RestartAllContainers rule first
    (an action this kubelet does not take) leaves the decision to the policy, even though
    a later Restart rule matches too."""
    wide, narrow = rule("In", 42, 50), rule("In", 42)
    container = make_container(restart_policy="Never", restart_policy_rules=(wide, narrow))
    assert matching_rule(container, 42) is wide
    assert matching_rule(container, 50) is wide
    assert matching_rule(container, 7) is None
    first = rule("In", 42, action="RestartAllContainers")
    ordered = make_container(restart_policy="Never", restart_policy_rules=(first, ON_42))
    spec = make_pod(ordered, restart_policy="Never").spec
    assert container_should_restart(ordered, spec, 42) is False
    swapped = attrs.evolve(ordered, restart_policy_rules=(ON_42, first))
    assert container_should_restart(swapped, spec, 42) is True


@pytest.mark.parametrize(
    ("pod_policy", "own", "expected"),
    [("Always", "Never", False), ("Never", "Always", True), ("Never", "OnFailure", True),
     ("Never", None, False), ("OnFailure", None, True)],
)  # fmt: skip
def test_a_container_stopped_while_running_follows_the_policies_only(
    pod_policy: str, own: str | None, expected: bool
) -> None:
    container = make_container(restart_policy=own, restart_policy_rules=(ON_42,))
    spec = make_pod(container, restart_policy=pod_policy).spec
    assert restarts_after_kill(container, spec) is expected


# -- the sync's actions -----------------------------------------------------------------------


def test_pod_always_container_never_that_exited_0_is_not_restarted() -> None:
    app, side = make_container("app", restart_policy="Never"), make_container("side")
    pod = make_pod(app, side, restart_policy="Always")
    status = runtime_status(pod, exited("app", 0), running("side", hash=hash_container(side)))
    assert should_container_be_restarted(app, pod, status) is False
    assert compute_pod_actions(pod, status).containers_to_start == ()
    failed = runtime_status(pod, exited("app", 1), running("side", hash=hash_container(side)))
    assert compute_pod_actions(pod, failed).containers_to_start == ()


@pytest.mark.parametrize(("code", "restarted"), [(42, True), (1, False), (0, False)])
def test_pod_never_with_a_restart_rule_on_42(code: int, restarted: bool) -> None:
    app = make_container("app", restart_policy="Never", restart_policy_rules=(ON_42,))
    pod = make_pod(app, restart_policy="Never")
    status = runtime_status(pod, exited("app", code))
    assert should_container_be_restarted(app, pod, status) is restarted
    result = compute_pod_actions(pod, status)
    assert result.containers_to_start == ((0,) if restarted else ())
    assert result.kill_pod is not restarted  # nothing left to run: the pod is done


def test_not_in_rule_restarts_every_other_code() -> None:
    app = make_container("app", restart_policy="Never", restart_policy_rules=(rule("NotIn", 0),))
    pod = make_pod(app, restart_policy="Always")
    assert compute_pod_actions(pod, runtime_status(pod, exited("app", 3))).containers_to_start == (
        0,
    )
    assert compute_pod_actions(pod, runtime_status(pod, exited("app", 0))).kill_pod


def test_a_failed_probe_restarts_by_the_container_policy() -> None:
    app = make_container("app", restart_policy="Never")
    pod = make_pod(app, restart_policy="Always")
    info = running("app", hash=hash_container(app))
    result = compute_pod_actions(pod, runtime_status(pod, info), liveness_failed={info.id})
    assert result.containers_to_start == ()
    assert result.containers_to_kill[info.id].reason is KillReason.LIVENESS_PROBE
    assert result.containers_to_kill[info.id].message == "Container app failed liveness probe"
    own = attrs.evolve(app, restart_policy="Always")
    pod = make_pod(own, restart_policy="Never")
    result = compute_pod_actions(pod, runtime_status(pod, info), liveness_failed={info.id})
    assert result.containers_to_start == (0,)
    assert result.containers_to_kill[info.id].message.endswith(", will be restarted")


@pytest.mark.parametrize(
    ("own", "rules", "code", "killed"),
    [
        ("Never", (), 1, True),
        ("OnFailure", (), 1, False),
        ("Never", (ON_42,), 42, False),
        ("Never", (ON_42,), 1, True),
    ],
)
def test_a_failed_init_container_by_its_own_policy_and_rules(
    own: str, rules: tuple[ContainerRestartRule, ...], code: int, killed: bool
) -> None:
    init = make_container("init", restart_policy=own, restart_policy_rules=rules)
    pod = make_pod(make_container("app"), init=(init,), restart_policy="Always")
    result = compute_pod_actions(pod, runtime_status(pod, exited("init", code)))
    assert result.kill_pod is killed
    assert result.init_containers_to_start == (() if killed else (0,))


def test_an_init_container_in_unknown_state_follows_its_own_policy() -> None:
    init = make_container("init", restart_policy="OnFailure")
    pod = make_pod(make_container("app"), init=(init,), restart_policy="Never")
    unknown = attrs.evolve(exited("init"), state=ContainerRunState.UNKNOWN)
    result = compute_pod_actions(pod, runtime_status(pod, unknown))
    assert not result.kill_pod and result.init_containers_to_start == (0,)
    never = make_pod(make_container("app"), init=(attrs.evolve(init, restart_policy="Never"),))
    assert compute_pod_actions(never, runtime_status(never, unknown)).kill_pod


def test_a_new_sandbox_skips_what_succeeded_by_the_container_policy() -> None:
    """Sandbox re-creation: a container that exited 0 stays done when its own policy,
    else the pod's, is OnFailure."""
    once = make_container("once", restart_policy="OnFailure")
    again = make_container("again", restart_policy="Always")
    plain = make_container("plain")
    dead = attrs.evolve(ready_sandbox(), state=SandboxState.NOTREADY)
    pod = make_pod(once, again, plain, restart_policy="OnFailure")
    status = runtime_status(
        pod, exited("once"), exited("again"), exited("plain"), sandboxes=(dead,)
    )
    result = compute_pod_actions(pod, status)
    assert result.create_sandbox and result.containers_to_start == (1,)


# -- the phase --------------------------------------------------------------------------------


def terminated(name: str, code: int) -> ContainerStatus:
    return ContainerStatus(
        name=name, state=ContainerState(terminated=ContainerStateTerminated(exit_code=code))
    )


def waiting_after(name: str, code: int) -> ContainerStatus:
    return ContainerStatus(
        name=name,
        state=ContainerState(waiting=ContainerStateWaiting(reason="CrashLoopBackOff")),
        last_state=ContainerState(terminated=ContainerStateTerminated(exit_code=code)),
    )


def run_status(name: str) -> ContainerStatus:
    return ContainerStatus(
        name=name, state=ContainerState(running=ContainerStateRunning()), started=True
    )


@pytest.mark.parametrize(
    ("pod_policy", "own", "rules", "code", "phase"),
    [
        ("Never", "Never", (ON_42,), 42, RUNNING),  # about to be restarted
        ("Never", "Never", (ON_42,), 1, FAILED),
        ("Never", "Never", (ON_42,), 0, SUCCEEDED),
        ("Always", "Never", (), 0, SUCCEEDED),
        ("Always", "Never", (), 2, FAILED),
        ("Never", "Always", (), 0, RUNNING),
        ("OnFailure", "OnFailure", (), 1, RUNNING),
        ("Always", None, (), 0, RUNNING),
    ],
)
def test_phase_of_a_stopped_container(
    pod_policy: str,
    own: str | None,
    rules: tuple[ContainerRestartRule, ...],
    code: int,
    phase: str,
) -> None:
    app = make_container("app", restart_policy=own, restart_policy_rules=rules)
    pod = make_pod(app, restart_policy=pod_policy)
    assert get_phase(pod, [terminated("app", code)]) == phase
    if phase != SUCCEEDED:  # (upstream counts a success only in the terminated state)
        assert get_phase(pod, [waiting_after("app", code)]) == phase


def test_phase_with_one_container_done_for_good_and_one_to_restart() -> None:
    done = make_container("done", restart_policy="Never")
    again = make_container("again", restart_policy="Never", restart_policy_rules=(ON_42,))
    pod = make_pod(done, again, restart_policy="Always")
    assert get_phase(pod, [terminated("done", 1), terminated("again", 42)]) == RUNNING
    assert get_phase(pod, [terminated("done", 1), terminated("again", 0)]) == FAILED
    assert get_phase(pod, [terminated("done", 0), run_status("again")]) == RUNNING


@pytest.mark.parametrize(
    ("pod_policy", "own", "rules", "code", "phase"),
    [
        ("Always", "Never", (), 1, FAILED),
        ("Never", "OnFailure", (), 1, PENDING),
        ("Never", "Never", (ON_42,), 42, PENDING),
        ("Never", "Never", (ON_42,), 3, FAILED),
        ("Never", None, (), 1, FAILED),
        ("OnFailure", None, (), 1, PENDING),
    ],
)
def test_phase_of_a_failed_init_container(
    pod_policy: str,
    own: str | None,
    rules: tuple[ContainerRestartRule, ...],
    code: int,
    phase: str,
) -> None:
    init = make_container("init", restart_policy=own, restart_policy_rules=rules)
    pod = make_pod(make_container("app"), init=(init,), restart_policy=pod_policy)
    assert get_phase(pod, [terminated("init", code)]) == phase
    assert get_phase(pod, [waiting_after("init", code)]) == phase


# -- which instance the log endpoint calls "previous" -----------------------------------------


def test_exited_instance_restarts_by_kind() -> None:
    app = make_container("app", restart_policy="Never", restart_policy_rules=(ON_42,))
    side = make_container("side", restart_policy="Always")
    init = make_container("init", restart_policy="OnFailure")
    pod = make_pod(app, init=(side, init), restart_policy="Never")
    assert exited_instance_restarts(pod, "app", 42) is True
    assert exited_instance_restarts(pod, "app", 1) is False
    assert exited_instance_restarts(pod, "side", 0) is True
    assert exited_instance_restarts(pod, "init", 1) is True
    assert exited_instance_restarts(pod, "init", 0) is False  # done: the next one starts
    assert exited_instance_restarts(pod, "debug", 1) is False


# -- the gate off -----------------------------------------------------------------------------


def test_gate_off_the_kubelet_reads_only_the_pod_policy() -> None:
    app = make_container("app", restart_policy="Never", restart_policy_rules=(ON_42,))
    side = make_container("side", restart_policy="Always")
    init = make_container("init", restart_policy="Never")
    pod = make_pod(app, init=(side, init), restart_policy="Always")
    view = drop_container_restart_rules(pod)
    assert view.spec.containers[0].restart_policy is None
    assert view.spec.containers[0].restart_policy_rules == ()
    assert [c.restart_policy for c in view.spec.init_containers] == ["Always", None]
    status = runtime_status(view, exited("app", 0))
    assert should_container_be_restarted(view.spec.containers[0], view, status) is True
    plain = make_pod(make_container("app"), init=(side,))
    assert drop_container_restart_rules(plain) is plain
