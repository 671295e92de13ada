"""The probe worker's pure decisions: plan_probe before a probe, record_result after."""

from __future__ import annotations

import pytest

from kubelet.api import Container, ExecAction, Probe
from kubelet.prober import ProbeKind, Result
from kubelet.prober.worker import (
    Action,
    ContainerView,
    WorkerState,
    initial_result,
    plan_probe,
    probe_defaults,
    probe_of,
    record_result,
)

NOW = 1_800_000_100.0
KUBELET_START = 1_800_000_000.0
PROBE = probe_defaults(Probe(exec=ExecAction(command=("true",))))

L, R, S = ProbeKind.LIVENESS, ProbeKind.READINESS, ProbeKind.STARTUP


def view(
    cid: str = "c1",
    *,
    running: bool = True,
    started: bool = True,
    exited: bool = False,
    started_at: float = NOW - 50,
) -> ContainerView:
    return ContainerView(
        id=cid, running=running, started=started, started_at=started_at, exited=exited
    )


def plan(
    state: WorkerState,
    v: ContainerView | None,
    kind: ProbeKind = R,
    probe: Probe = PROBE,
    *,
    restart_never: bool = False,
    sidecar: bool = False,
    deleting: bool = False,
    pod_terminal: bool = False,
) -> tuple[WorkerState, Action, tuple[Result, ...], str]:
    p = plan_probe(
        state,
        v,
        kind=kind,
        probe=probe,
        restart_never=restart_never,
        sidecar=sidecar,
        deleting=deleting,
        pod_terminal=pod_terminal,
        now=NOW,
        kubelet_started=KUBELET_START,
    )
    return p.state, p.action, p.publish, p.forget


def test_api_defaults_apply_to_zero_values() -> None:
    p = probe_defaults(Probe(timeout_seconds=0, period_seconds=0, success_threshold=0))
    assert (p.timeout_seconds, p.period_seconds, p.success_threshold, p.failure_threshold) == (
        1,
        10,
        1,
        3,
    )
    assert p.initial_delay_seconds == 0
    kept = probe_defaults(Probe(timeout_seconds=5, period_seconds=3, failure_threshold=7))
    assert (kept.timeout_seconds, kept.period_seconds, kept.failure_threshold) == (5, 3, 7)


def test_probe_of_picks_the_kind() -> None:
    lp, rp, sp = Probe(period_seconds=1), Probe(period_seconds=2), Probe(period_seconds=3)
    c = Container(name="a", liveness_probe=lp, readiness_probe=rp, startup_probe=sp)
    assert (probe_of(c, L), probe_of(c, R), probe_of(c, S)) == (lp, rp, sp)


@pytest.mark.parametrize(
    ("kind", "expected"), [(R, Result.FAILURE), (L, Result.SUCCESS), (S, Result.UNKNOWN)]
)
def test_new_container_id_publishes_the_initial_result(kind: ProbeKind, expected: Result) -> None:
    assert initial_result(kind) is expected
    started = kind is not S
    state, action, publish, forget = plan(WorkerState(), view(started=started), kind)
    assert state.container_id == "c1"
    assert publish == (expected,)
    assert forget == ""
    assert action is Action.PROBE


def test_a_replaced_container_forgets_the_old_id_and_leaves_hold() -> None:
    old = WorkerState(container_id="c1", on_hold=True, last_result=Result.FAILURE, result_run=2)
    state, action, publish, forget = plan(old, view("c2"), L)
    assert (state.container_id, state.on_hold, forget) == ("c2", False, "c1")
    assert publish == (Result.SUCCESS,)
    assert action is Action.PROBE
    # the same container on hold is not probed
    held = WorkerState(container_id="c1", on_hold=True)
    assert plan(held, view("c1"), L)[1:3] == (Action.SKIP, ())


def test_no_container_skips_and_terminal_pod_stops() -> None:
    assert plan(WorkerState(), None)[1] is Action.SKIP
    assert plan(WorkerState(), view(cid=""))[1] is Action.SKIP
    assert plan(WorkerState(), view(), pod_terminal=True)[1] is Action.STOP


def test_not_running_is_a_failure_and_never_restarted_ends_the_worker() -> None:
    s = WorkerState(container_id="c1")
    exited = view(running=False, exited=True)
    assert plan(s, exited)[1:3] == (Action.SKIP, (Result.FAILURE,))
    assert plan(s, exited, restart_never=True)[1:3] == (Action.STOP, (Result.FAILURE,))
    # a sidecar always restarts; a created (not yet running) container is not terminated
    assert plan(s, exited, restart_never=True, sidecar=True)[1] is Action.SKIP
    created = view(running=False, exited=False)
    assert plan(s, created, restart_never=True)[1:3] == (Action.SKIP, (Result.FAILURE,))
    # a new exited instance: initial value first, then the failure
    assert plan(WorkerState(), exited, L)[2] == (Result.SUCCESS, Result.FAILURE)


@pytest.mark.parametrize("kind", [L, S])
def test_deletion_sets_success_and_stops_liveness_and_startup(kind: ProbeKind) -> None:
    s = WorkerState(container_id="c1")
    assert plan(s, view(started=kind is not S), kind, deleting=True)[1:3] == (
        Action.STOP,
        (Result.SUCCESS,),
    )


def test_deletion_does_not_stop_readiness() -> None:
    s = WorkerState(container_id="c1")
    assert plan(s, view(), R, deleting=True)[1:3] == (Action.PROBE, ())


def test_initial_delay_counts_whole_seconds_since_started_at() -> None:
    s = WorkerState(container_id="c1")
    probe = probe_defaults(Probe(initial_delay_seconds=5))
    assert plan(s, view(started_at=NOW - 4.999), R, probe)[1] is Action.SKIP
    assert plan(s, view(started_at=NOW - 5.0), R, probe)[1] is Action.PROBE
    # clock skew (startedAt in the future) truncates toward zero, as Go's int32()
    assert plan(s, view(started_at=NOW + 0.5), R, probe_defaults(Probe()))[1] is Action.PROBE


def test_startup_gating() -> None:
    s = WorkerState(container_id="c1")
    not_started, started = view(started=False), view(started=True)
    assert plan(s, not_started, S)[1] is Action.PROBE
    assert plan(s, not_started, L)[1] is Action.SKIP
    assert plan(s, not_started, R)[1] is Action.SKIP
    assert plan(s, started, S)[1] is Action.SKIP  # idles once started
    assert plan(s, started, L)[1] is Action.PROBE
    assert plan(s, started, R)[1] is Action.PROBE


def test_a_container_running_before_the_kubelet_started_publishes_nothing() -> None:
    adopted = view(started_at=KUBELET_START - 10.5)
    for kind in (R, L):
        state, action, publish, _ = plan(WorkerState(), adopted, kind)
        assert (state.container_id, publish, action) == ("c1", (), Action.PROBE)
    # within 10 s of the kubelet's start it counts as new
    recent = view(started_at=KUBELET_START - 9.5)
    assert plan(WorkerState(), recent, R)[2] == (Result.FAILURE,)


def test_thresholds() -> None:
    probe = probe_defaults(Probe(failure_threshold=3, success_threshold=2))
    s = WorkerState(container_id="c1")
    published = []
    for result in [Result.FAILURE, Result.FAILURE, Result.SUCCESS, Result.FAILURE] + [
        Result.FAILURE
    ] * 3:
        s, out = record_result(s, R, probe, result)
        published.append(out)
    assert published == [None, None, None, None, None, Result.FAILURE, Result.FAILURE]
    s, out1 = record_result(s, R, probe, Result.SUCCESS)
    s, out2 = record_result(s, R, probe, Result.SUCCESS)
    assert (out1, out2, s.on_hold) == (None, Result.SUCCESS, False)


def test_published_liveness_failure_and_any_startup_result_hold() -> None:
    s = WorkerState(container_id="c1")
    probe = probe_defaults(Probe(failure_threshold=1))
    held, out = record_result(s, L, probe, Result.FAILURE)
    assert (out, held.on_hold, held.result_run) == (Result.FAILURE, True, 0)
    ok, out = record_result(s, L, probe, Result.SUCCESS)
    assert (out, ok.on_hold) == (Result.SUCCESS, False)
    started, out = record_result(s, S, probe, Result.SUCCESS)
    assert (out, started.on_hold) == (Result.SUCCESS, True)
    unready, out = record_result(s, R, probe, Result.FAILURE)
    assert (out, unready.on_hold) == (Result.FAILURE, False)
