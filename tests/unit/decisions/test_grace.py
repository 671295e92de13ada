"""Grace periods, test vectors TERM-01..08."""

from __future__ import annotations

import pytest

from kubelet.api import Container, ExecAction, LifecycleHandler, ObjectMeta, Pod, PodSpec, Probe
from kubelet.api.pod import Lifecycle
from kubelet.decisions import (
    KillReason,
    kill_grace_period,
    remaining_deletion_grace,
    stop_container_timeout,
)
from kubelet.decisions.grace import container_grace_period
from kubelet.goformat import parse_time

PRESTOP = Lifecycle(pre_stop=LifecycleHandler(exec=ExecAction(command=("sleep", "5"))))


def vector(*ids: str) -> pytest.MarkDecorator:
    """Put the test-vector IDs into the test IDs."""
    return pytest.mark.parametrize("vid", ids)


def make(
    tgps: int | None = 30,
    deletion: int | None = None,
    container: Container | None = None,
) -> tuple[Pod, Container]:
    c = container or Container(name="c", image="busybox")
    pod = Pod(
        metadata=ObjectMeta(
            name="p", namespace="ns", uid="u", deletion_grace_period_seconds=deletion
        ),
        spec=PodSpec(containers=(c,), termination_grace_period_seconds=tgps),
    )
    return pod, c


def timeout(
    pod: Pod,
    c: Container,
    *,
    reason: KillReason = KillReason.UNKNOWN,
    override: int | None = None,
    prestop: float = 0.0,
) -> int:
    """What killContainer passes to StopContainer."""
    grace = kill_grace_period(pod, c, reason, override=override)
    elapsed = prestop if c.lifecycle and c.lifecycle.pre_stop and grace > 0 else 0.0
    return stop_container_timeout(grace, min(elapsed, grace))


@vector("TERM-01")
def test_term01_spec_grace(vid: str) -> None:
    pod, c = make(30)
    assert timeout(pod, c) == 30


@vector("TERM-02")
def test_term02_deletion_grace(vid: str) -> None:
    pod, c = make(30, deletion=10)
    assert timeout(pod, c) == 10


@vector("TERM-03")
def test_term03_zero_grace_gets_minimum(vid: str) -> None:
    pod, c = make(0)
    assert timeout(pod, c) == 2
    pod, c = make(30, deletion=0)
    assert timeout(pod, c) == 2


@vector("TERM-04")
def test_term04_prestop_time_is_subtracted(vid: str) -> None:
    pod, c = make(30, container=Container(name="c", lifecycle=PRESTOP))
    assert timeout(pod, c, prestop=12) == 18
    assert timeout(pod, c, prestop=12.9) == 18  # whole seconds, truncated


@vector("TERM-05")
def test_term05_long_prestop_leaves_minimum(vid: str) -> None:
    pod, c = make(30, container=Container(name="c", lifecycle=PRESTOP))
    assert timeout(pod, c, prestop=29) == 2
    assert timeout(pod, c, prestop=45) == 2  # hook cut off at the grace period


@vector("TERM-06")
def test_term06_probe_grace_wins_for_probe_kill(vid: str) -> None:
    probe = Probe(exec=ExecAction(command=("true",)), termination_grace_period_seconds=5)
    c = Container(name="c", liveness_probe=probe, startup_probe=probe)
    pod, c = make(60, container=c)
    assert timeout(pod, c, reason=KillReason.LIVENESS_PROBE) == 5
    assert timeout(pod, c, reason=KillReason.STARTUP_PROBE) == 5
    assert timeout(pod, c) == 60  # not a probe kill
    # deletion grace still comes first
    pod, c = make(60, deletion=20, container=c)
    assert container_grace_period(pod, c, KillReason.LIVENESS_PROBE) == 20


@vector("TERM-07")
def test_term07_eviction_override_zero(vid: str) -> None:
    """Vector says 0 ("override bypasses the 2 s floor"); that was the old order of
    killContainer (override applied after the floor). Current upstream applies the
    override first, skips preStop when it is 0, then floors at 2 -- we follow that."""
    pod, c = make(30, container=Container(name="c", lifecycle=PRESTOP))
    assert kill_grace_period(pod, c, override=0) == 0  # preStop is skipped
    assert timeout(pod, c, override=0, prestop=10) == 2
    assert timeout(pod, c, override=7) == 7


def test_no_spec_grace_means_minimum() -> None:
    pod, c = make(None)
    assert container_grace_period(pod, c) == 2


def test_a_sidecars_wait_comes_off_its_timeout_truncated_separately() -> None:
    """killContainer: grace minus whole preStop seconds, minus whole waited seconds."""
    assert stop_container_timeout(30, 1.6, 1.6) == 28  # not 30 - floor(3.2) = 27
    assert stop_container_timeout(30, 0, 3.0) == 27
    assert stop_container_timeout(5, 2.5, 4.0) == 2  # the minimum, whatever was spent


def test_a_pod_first_seen_deleted_keeps_what_is_left_of_its_grace() -> None:
    """deletionTimestamp is when the grace period ends: what is left of it, rounded up,
    never more than deletionGracePeriodSeconds, never below the pod-level minimum."""
    pod, _ = make(30, deletion=5)
    assert remaining_deletion_grace(pod, 0.0) is None  # not being deleted
    deleted = Pod(
        metadata=ObjectMeta(
            name="p",
            uid="u",
            deletion_timestamp="2027-01-15T08:00:05Z",
            deletion_grace_period_seconds=5,
        ),
        spec=pod.spec,
    )
    deadline = parse_time("2027-01-15T08:00:05Z")
    assert deadline is not None
    assert remaining_deletion_grace(deleted, deadline - 2.5) == 3
    assert remaining_deletion_grace(deleted, deadline - 60) == 5  # a clock behind: no longer
    assert remaining_deletion_grace(deleted, deadline + 60) == 1  # past it: the minimum
    unreadable = Pod(
        metadata=ObjectMeta(name="p", deletion_timestamp="soon", deletion_grace_period_seconds=5),
        spec=pod.spec,
    )
    assert remaining_deletion_grace(unreadable, deadline) == 5
