"""Graceful node shutdown: the plan (upstream's cases, restated) and the manager's loop
against an in-process logind, in fake time."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from kubelet.node.shutdown import (
    LogindError,
    LogindUnavailable,
    PriorityPeriod,
    ShutdownManager,
    ShutdownPod,
    Termination,
    periods,
)
from kubelet.node.shutdown.plan import (
    SYSTEM_CRITICAL_PRIORITY,
    disruption_condition,
    group_pods,
    pod_grace,
    requested_delay,
    validate,
)

# -- the plan -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period", "critical", "expected"),
    [
        (0, 0, ()),
        (30, 10, (PriorityPeriod(0, 20), PriorityPeriod(SYSTEM_CRITICAL_PRIORITY, 10))),
        (30, 0, (PriorityPeriod(0, 30), PriorityPeriod(SYSTEM_CRITICAL_PRIORITY, 0))),
        (30, 30, (PriorityPeriod(0, 0), PriorityPeriod(SYSTEM_CRITICAL_PRIORITY, 30))),
        (10, 20, ()),
    ],
)
def test_periods_from_shutdown_grace_period(
    period: float, critical: float, expected: tuple[PriorityPeriod, ...]
) -> None:
    assert periods((), period, critical) == expected


def test_by_pod_priority_wins_and_is_sorted() -> None:
    by = (PriorityPeriod(100000, 10), PriorityPeriod(0, 20), PriorityPeriod(10000, 5))
    assert periods(by, 0, 0) == (
        PriorityPeriod(0, 20),
        PriorityPeriod(10000, 5),
        PriorityPeriod(100000, 10),
    )
    assert periods(by, 30, 10, by_priority_gate=False)[0] == PriorityPeriod(0, 20)
    assert requested_delay(periods(by, 0, 0)) == 35


# upstream's Test_groupByPriority, restated: groups 1 / 2 / 3 (priorities 1, 2, 3)
GROUPS = (PriorityPeriod(1, 10), PriorityPeriod(2, 20), PriorityPeriod(3, 30))


@pytest.mark.parametrize(
    ("priority", "group"),
    [(0, 1), (1, 1), (2, 2), (3, 3), (4, 3), (-5, 1), (2_000_000_000, 3)],
)
def test_pods_land_in_the_highest_group_not_above_their_priority(priority: int, group: int) -> None:
    grouped = group_pods(GROUPS, [("pod", priority)])
    assert [g.priority for g in grouped if g.pods] == [group]


def test_between_groups_a_pod_goes_to_the_lower_one() -> None:
    spaced = (PriorityPeriod(0, 10), PriorityPeriod(1000, 20), PriorityPeriod(1_000_000, 30))
    grouped = group_pods(
        spaced, [("a", 999), ("b", 1000), ("c", 1001), ("d", -1), ("e", 2_000_000)]
    )
    assert [(g.priority, g.pods) for g in grouped] == [
        (0, ("a", "d")),
        (1000, ("b", "c")),
        (1_000_000, ("e",)),
    ]
    assert group_pods((), [("a", 1)]) == []


@pytest.mark.parametrize(
    ("group", "own", "expected"),
    [(20, None, 20), (20, 5, 5), (20, 20, 20), (20, 60, 20), (0, 30, 0)],
)
def test_pod_grace_is_the_shorter_of_group_and_pod(
    group: int, own: int | None, expected: int
) -> None:
    assert pod_grace(group, own) == expected


def test_validation_messages() -> None:
    assert validate((), 30, 10, graceful_gate=True, by_priority_gate=True) == []
    assert validate((), 30, 10, graceful_gate=False, by_priority_gate=True) == [
        "invalid configuration: specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods "
        "requires feature gate GracefulNodeShutdown"
    ]
    assert validate((), 10, 30, graceful_gate=True, by_priority_gate=True) == [
        "invalid configuration: shutdownGracePeriod 10s must be >= 0, "
        "shutdownGracePeriodCriticalPods 30s must be >= 0, and shutdownGracePeriodCriticalPods "
        "30s must be <= shutdownGracePeriod 10s"
    ]
    both = validate((PriorityPeriod(0, 10),), 30, 0, graceful_gate=True, by_priority_gate=True)
    assert both == [
        "invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and "
        "shutdownGracePeriod at the same time"
    ]
    gated = validate((PriorityPeriod(0, 10),), 0, 0, graceful_gate=True, by_priority_gate=False)
    assert "requires feature gate GracefulNodeShutdownBasedOnPodPriority" in gated[0]


def test_the_status_a_shutdown_leaves() -> None:
    assert disruption_condition("2026-01-01T00:00:00Z") == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "TerminationByKubelet",
        "message": "Pod was terminated in response to imminent node shutdown.",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


# -- the manager, against an in-process logind ---------------------------------------------


class MemoryLogind:
    """logind as the manager sees it, in memory."""

    def __init__(self, delay: float = 5.0) -> None:
        self.delay = delay
        self.next_fd = 100
        self.held: set[int] = set()
        self.taken: list[int] = []
        self.reloads = 0
        self.dropin: Path | None = None
        self.signals_send, self.signals_receive = trio.open_memory_channel[bool](10)
        self.watching = trio.Event()
        self.released = trio.Event()

    async def inhibit_delay_max(self) -> float:
        return self.delay

    async def inhibit(self) -> int:
        self.next_fd += 1
        self.held.add(self.next_fd)
        self.taken.append(self.next_fd)
        return self.next_fd

    def release(self, lock: int) -> None:
        self.held.discard(lock)
        self.released.set()

    async def reload_logind(self) -> None:
        self.reloads += 1
        if self.dropin is not None and self.dropin.exists():
            for line in self.dropin.read_text().splitlines():
                if line.startswith("InhibitDelayMaxSec="):
                    self.delay = float(line.split("=", 1)[1])

    @asynccontextmanager
    async def shutdown_signals(self) -> AsyncIterator[trio.MemoryReceiveChannel[bool]]:
        if self.watching.is_set():  # a new connection: a new subscription
            self.signals_send, self.signals_receive = trio.open_memory_channel[bool](10)
        self.watching.set()
        yield self.signals_receive


class RecordingTerminator:
    """Pods stop after ``takes`` seconds (default: at once); records what was asked."""

    def __init__(self, takes: dict[str, float] | None = None) -> None:
        self.takes = takes or {}
        self.started: list[tuple[str, float, Termination]] = []
        self.finished: list[tuple[str, float]] = []

    async def terminate(self, pod: ShutdownPod, how: Termination) -> None:
        self.started.append((pod.key, trio.current_time(), how))
        await trio.sleep(min(self.takes.get(pod.key, 0.0), how.grace))
        self.finished.append((pod.key, trio.current_time()))


def make_manager(
    logind: MemoryLogind,
    terminator: RecordingTerminator,
    pods: list[ShutdownPod],
    groups: tuple[PriorityPeriod, ...],
    tmp_path: Path,
    **kw: object,
) -> ShutdownManager:
    @asynccontextmanager
    async def connect() -> AsyncIterator[MemoryLogind]:
        yield logind

    logind.dropin = tmp_path / "logind.conf.d" / "99-kubelet.conf"
    return ShutdownManager(
        groups,
        active_pods=lambda: pods,
        terminator=terminator,
        connect=connect,
        dropin_dir=str(tmp_path / "logind.conf.d"),
        now_rfc3339=lambda: "2026-01-01T00:00:00Z",
        **kw,  # type: ignore[arg-type]
    )


async def test_three_priority_classes_terminated_in_order_within_their_periods(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    groups = (
        PriorityPeriod(0, 10),
        PriorityPeriod(100000, 20),
        PriorityPeriod(SYSTEM_CRITICAL_PRIORITY, 30),
    )
    pods = [
        ShutdownPod("kube-system/dns", "u1", SYSTEM_CRITICAL_PRIORITY, 30),
        ShutdownPod("default/web", "u2", 0, 5),
        ShutdownPod("default/batch", "u3", 0, 600),
        ShutdownPod("prod/db", "u4", 100000, 60),
    ]
    logind = MemoryLogind(delay=120)
    # batch ignores its SIGTERM: the low group's 10 s run out before it stops
    terminator = RecordingTerminator(
        {"default/web": 1, "default/batch": 1000, "prod/db": 3, "kube-system/dns": 2}
    )
    status_changes: list[bool] = []
    events: list[tuple[str, str]] = []
    manager = make_manager(
        logind, terminator, pods, groups, tmp_path,
        node_status_changed=lambda: status_changes.append(manager.shutting_down),
        record_event=lambda reason, message: events.append((reason, message)),
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        assert logind.held == {101} and manager.shutdown_status() is None
        assert manager.admit() == (True, "", "")
        start = trio.current_time()
        await logind.signals_send.send(True)
        await logind.released.wait()
        assert status_changes == [True]
        assert manager.shutdown_status() == "node is shutting down"
        assert manager.admit() == (
            False,
            "NodeShutdown",
            "Pod was rejected as the node is shutting down.",
        )
        assert events == [("NodeShutdown", "Shutdown manager detected shutdown event")]
        order = sorted((at - start, key, how.grace) for key, at, how in terminator.started)
        order = [(key, at, grace) for at, key, grace in order]  # within a group: any order
        assert order == [
            ("default/batch", 0, 10),
            ("default/web", 0, 5),
            ("prod/db", 10, 20),  # the low group's period ran out at 10 s
            ("kube-system/dns", 13, 30),  # db stopped after 3 s: no waiting for the rest
        ]
        assert terminator.started[0][2].reason == "Terminated"
        assert (
            terminator.started[0][2].message
            == "Pod was terminated in response to imminent node shutdown."
        )
        assert terminator.started[0][2].conditions[0]["type"] == "DisruptionTarget"
        assert trio.current_time() - start == 15
        assert logind.held == set() and manager.shutdowns_processed == 1
        nursery.cancel_scope.cancel()


async def test_a_cancelled_shutdown_takes_the_lock_again(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    logind = MemoryLogind(delay=60)
    manager = make_manager(logind, RecordingTerminator(), [], (PriorityPeriod(0, 30),), tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        await logind.signals_send.send(True)
        await logind.released.wait()
        assert logind.held == set()
        await logind.signals_send.send(False)
        while len(logind.taken) < 2:
            await trio.sleep(0.1)
        assert logind.held == {102} and not manager.shutting_down
        nursery.cancel_scope.cancel()
    assert logind.held == set()  # released on the way out


async def test_a_short_logind_delay_is_raised_with_a_dropin(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    logind = MemoryLogind(delay=5)
    groups = (PriorityPeriod(0, 20), PriorityPeriod(SYSTEM_CRITICAL_PRIORITY, 10))
    manager = make_manager(logind, RecordingTerminator(), [], groups, tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        assert logind.dropin is not None
        assert (
            logind.dropin.read_text()
            == "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=30\n"
        )
        assert logind.reloads == 1 and logind.delay == 30
        nursery.cancel_scope.cancel()


async def test_a_delay_that_stays_short_is_an_error_and_retried(
    tmp_path: Path, autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    logind = MemoryLogind(delay=5)
    logind.reload_logind = _no_reload  # type: ignore[method-assign]
    manager = make_manager(logind, RecordingTerminator(), [], (PriorityPeriod(0, 30),), tmp_path)
    with caplog.at_level(logging.ERROR):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(manager.run)
            await trio.sleep(3.5)
            nursery.cancel_scope.cancel()
    messages = [r.getMessage() for r in caplog.records if "InhibitDelayMaxSec" in r.getMessage()]
    assert len(messages) == 4  # at start, then once a second
    assert (
        "unable to update logind InhibitDelayMaxSec to 30s (ShutdownGracePeriod), current "
        "value of InhibitDelayMaxSec (5s)" in messages[0]
    )
    assert logind.taken == []


async def _no_reload() -> None:
    return None


async def test_without_logind_it_says_so_once_and_runs_on(
    tmp_path: Path, autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    attempts = 0

    @asynccontextmanager
    async def absent() -> AsyncIterator[MemoryLogind]:
        nonlocal attempts
        attempts += 1
        raise LogindUnavailable(
            "cannot connect to the system bus: [Errno 2] No such file or directory"
        )
        yield MemoryLogind()  # pragma: no cover

    manager = ShutdownManager(
        (PriorityPeriod(0, 30),), active_pods=list, terminator=RecordingTerminator(), connect=absent
    )
    with caplog.at_level(logging.INFO):
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            await trio.sleep(60)
    assert attempts == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert (
        "Graceful node shutdown is not available: cannot connect to the system bus"
        in warnings[0].getMessage()
    )
    assert manager.admit()[0]


async def test_no_grace_period_means_no_logind_at_all(autojump_clock: trio.abc.Clock) -> None:
    def connect() -> MemoryLogind:
        raise AssertionError("must not connect")

    manager = ShutdownManager(
        (), active_pods=list, terminator=RecordingTerminator(), connect=connect
    )  # type: ignore[arg-type]
    with trio.fail_after(1):
        await manager.run()


async def test_a_lost_bus_is_reconnected(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    logind = MemoryLogind(delay=60)
    manager = make_manager(logind, RecordingTerminator(), [], (PriorityPeriod(0, 30),), tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        await logind.signals_send.aclose()  # the connection ends
        while len(logind.taken) < 2:
            await trio.sleep(0.5)
        assert logind.held == {102}  # the old lock released, a new one held
        logind.released = trio.Event()
        await logind.signals_send.send(True)  # and the new subscription works
        await logind.released.wait()
        assert manager.shutdowns_processed == 1
        nursery.cancel_scope.cancel()


def test_logind_errors_are_one_family() -> None:
    assert issubclass(LogindUnavailable, LogindError)
