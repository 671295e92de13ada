"""Probe workers under the manager on a fake clock, with tiny fake probers."""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from prometheus_client import CollectorRegistry

from kubelet.api import (
    Container,
    ContainerRestartRule,
    ContainerStatus,
    ExecAction,
    Pod,
    PodCondition,
    PodStatus,
    Probe,
)
from kubelet.api.pod import ContainerRestartRuleOnExitCodes
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    RuntimePodStatus,
    SandboxInfo,
    SandboxState,
)
from kubelet.prober import (
    ProbeError,
    ProbeKey,
    ProbeKind,
    ProbeOutcome,
    ProbeResult,
    ProberManager,
    ProbeTarget,
    Result,
    ResultsManager,
    ResultUpdate,
)
from kubelet.prober.worker import on_grid
from kubelet.testing import builders

EPOCH = 1_800_000_000.0
L, R, S = ProbeKind.LIVENESS, ProbeKind.READINESS, ProbeKind.STARTUP
OK = ProbeOutcome(ProbeResult.SUCCESS)
FAIL = ProbeOutcome(ProbeResult.FAILURE, "boom")


class ZeroRandom(random.Random):
    """No start-up jitter unless a test asks for it."""

    def random(self) -> float:
        return 0.0


@attrs.define
class FakeProber:
    """Answers from a per-kind script (then ``default``); records (time, kind, id)."""

    scripts: dict[ProbeKind, list[ProbeOutcome | ProbeError]] = attrs.field(factory=dict)
    default: ProbeOutcome = OK
    takes: float = 0.0
    calls: list[tuple[float, ProbeKind, str]] = attrs.field(factory=list)

    async def __call__(self, kind: ProbeKind, probe: Probe, target: ProbeTarget) -> ProbeOutcome:
        self.calls.append((trio.current_time(), kind, target.container_id))
        await trio.sleep(self.takes)
        script = self.scripts.get(kind)
        item = script.pop(0) if script else self.default
        if isinstance(item, ProbeError):
            raise item
        return item

    def times(self, kind: ProbeKind) -> list[float]:
        return [t for t, k, _ in self.calls if k is kind]


def probe(**kw: Any) -> Probe:
    return attrs.evolve(Probe(exec=ExecAction(command=("check",))), **kw)


def make_pod(
    *,
    liveness: Probe | None = None,
    readiness: Probe | None = None,
    startup: Probe | None = None,
    restart_policy: str = "Always",
    uid: str = "u1",
    status: PodStatus | None = None,
) -> Pod:
    container = Container(
        name="app",
        image="busybox",
        liveness_probe=liveness,
        readiness_probe=readiness,
        startup_probe=startup,
    )
    return builders.make_pod(container, uid=uid, restart_policy=restart_policy, status=status)


def runtime_status(
    cid: str = "c1",
    *,
    state: ContainerRunState = ContainerRunState.RUNNING,
    started: float = 0.0,
    uid: str = "u1",
) -> RuntimePodStatus:
    """One sandbox (IP 10.88.0.5) and container ``app`` started at trio time ``started``."""
    info = ContainerInfo(id=cid, name="app", state=state, started_at=int((EPOCH + started) * 1e9))
    sandbox = SandboxInfo(id="s1", state=SandboxState.READY, ip="10.88.0.5")
    return RuntimePodStatus(uid=uid, sandboxes=(sandbox,), containers=(info,))


def drain(results: ResultsManager) -> list[tuple[str, Result]]:
    out: list[ResultUpdate] = []
    while True:
        try:
            out.append(results.updates.receive_nowait())
        except trio.WouldBlock:
            return [(u.container_id, u.result) for u in out]


@contextlib.asynccontextmanager
async def manager(
    prober: FakeProber, *, rng: random.Random | None = None, **kw: object
) -> AsyncIterator[ProberManager]:
    m = ProberManager(
        prober=prober,
        wall_clock=lambda: EPOCH + trio.current_time(),
        rng=rng or ZeroRandom(),
        **kw,  # type: ignore[arg-type]
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        yield m
        nursery.cancel_scope.cancel()


async def settle(seconds: float = 0.0) -> None:
    await trio.sleep(seconds)
    await trio.testing.wait_all_tasks_blocked()


# -- results ---------------------------------------------------------------------------------


async def test_results_manager_publishes_only_changes() -> None:
    rm = ResultsManager(R, capacity=2)
    pod = make_pod()
    rm.set("c1", Result.FAILURE, pod, "app")
    rm.set("c1", Result.FAILURE, pod, "app")
    rm.set("c1", Result.SUCCESS, pod, "app")
    assert rm.get("c1") is Result.SUCCESS and rm.get("c2") is None
    assert rm.ids_with(Result.SUCCESS, ["c1", "c2"]) == {"c1"}
    assert rm.ids_with(Result.SUCCESS, ["c2"]) == set()
    update = rm.updates.receive_nowait()
    assert update == ResultUpdate(R, "c1", Result.FAILURE, "u1", "app")
    assert drain(rm) == [("c1", Result.SUCCESS)]
    rm.remove("c1")
    assert rm.get("c1") is None and len(rm) == 0
    # a full buffer drops the wake-up, never the stored state
    for i in range(4):
        rm.set(f"x{i}", Result.FAILURE, pod)
    assert rm.dropped == 2 and rm.get("x3") is Result.FAILURE
    rm.close()
    assert [u.container_id async for u in rm.updates] == ["x0", "x1"]


# -- the worker loop -----------------------------------------------------------------------------


async def test_readiness_initial_failure_then_probes_every_period(
    autojump_clock: trio.abc.Clock,
) -> None:
    fake = FakeProber(scripts={R: [FAIL, OK]})
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status())
        pod = make_pod(readiness=probe(success_threshold=1))
        m.add_pod(pod)
        await settle()
        assert drain(m.readiness_results) == [("c1", Result.FAILURE)]
        await settle(25)
        assert fake.times(R) == [0, 10, 20]
        assert drain(m.readiness_results) == [("c1", Result.SUCCESS)]
        assert m.readiness("c1") is True and m.readiness("zz") is None


async def test_start_up_jitter_only_right_after_the_kubelet_started(
    autojump_clock: trio.abc.Clock,
) -> None:
    fake = FakeProber()
    async with manager(fake, rng=random.Random(7)) as m:
        drawn = random.Random(7).random() * 10  # 3.238…, rounded up to the grid of 1 s
        expected = on_grid(drawn, 10)
        assert expected == 4
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(readiness=probe()))
        await settle(expected + 0.001)
        assert fake.times(R) == [expected]
        await settle(10)
        assert fake.times(R) == [expected, expected + 10]
        # a pod added more than one period after start probes at once
        await trio.sleep(30 - trio.current_time())
        m.update_pod_status("u2", runtime_status("c2", uid="u2"))
        m.add_pod(make_pod(readiness=probe(), uid="u2"))
        await settle()
        assert [t for t, _, cid in fake.calls if cid == "c2"] == [30]


async def test_initial_delay_and_startup_gating(autojump_clock: trio.abc.Clock) -> None:
    fake = FakeProber(scripts={S: [FAIL, OK]})
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status(started=0.0))
        pod = make_pod(
            startup=probe(period_seconds=5, initial_delay_seconds=7, failure_threshold=5),
            liveness=probe(period_seconds=5),
            readiness=probe(period_seconds=5),
        )
        m.add_pod(pod)
        await settle(11)
        # startup waits its initial delay (probes at 10 and later), the others wait for it
        assert fake.times(S) == [10]
        assert fake.times(L) == fake.times(R) == []
        assert m.started("c1") is None  # Unknown is not a verdict
        assert drain(m.startup_results) == [("c1", Result.UNKNOWN)]
        await settle(5)
        assert fake.times(S) == [10, 15]
        assert drain(m.startup_results) == [("c1", Result.SUCCESS)]
        assert m.started("c1") is True
        await settle(20)
        assert fake.times(S) == [10, 15]  # on hold / idle once started
        assert fake.times(L) == fake.times(R) == [20, 25, 30, 35]


async def test_liveness_failure_holds_until_a_new_container(
    autojump_clock: trio.abc.Clock,
) -> None:
    fake = FakeProber(default=FAIL)
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status("c1"))
        m.add_pod(make_pod(liveness=probe(failure_threshold=2)))
        await settle(35)
        assert fake.times(L) == [0, 10]
        assert drain(m.liveness_results) == [("c1", Result.SUCCESS), ("c1", Result.FAILURE)]
        assert m.liveness_failed(runtime_status("c1")) == {"c1"}
        assert m.liveness_failed(runtime_status("c9", uid="u9")) == set()
        # the kill and restart: a new instance resumes probing from its initial value
        m.update_pod_status("u1", runtime_status("c2", started=35))
        await settle(10)
        assert drain(m.liveness_results) == [("c2", Result.SUCCESS)]
        assert m.liveness_results.get("c1") is None  # the old instance is forgotten
        assert fake.times(L) == [0, 10, 40]


async def test_a_worker_on_hold_sleeps_through_its_ticks_until_the_status_changes(
    autojump_clock: trio.abc.Clock,
) -> None:
    fake = FakeProber()
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status("c1"))
        m.add_pod(make_pod(startup=probe(), readiness=probe()))
        await settle(15)
        startup = m.workers[ProbeKey("u1", "app", S)]
        readiness = m.workers[ProbeKey("u1", "app", R)]
        assert fake.times(S) == [0] and startup.parked  # started: on hold from tick 10
        await settle(90)
        assert startup.ticks == 2  # no wake-ups while nothing can change
        assert readiness.ticks == 11 and not readiness.parked
        # a status update wakes it for its next tick (in phase), then it parks again
        m.update_pod_status("u1", runtime_status("c1"))
        await settle(4.9)
        assert startup.ticks == 2
        await settle(0.2)
        assert startup.ticks == 3 and startup.parked
        # a new instance: probed at the worker's next tick, as if it had ticked all along
        m.update_pod_status("u1", runtime_status("c2", started=110))
        await settle(10)
        assert fake.times(S) == [0, 120] and startup.ticks == 4
        # a terminal phase ends it at its next tick
        m.update_pod_status("u1", runtime_status("c2", started=110), phase="Succeeded")
        await settle(10)
        assert ProbeKey("u1", "app", S) not in m.workers and startup.done.is_set()


async def test_a_new_instance_reported_during_the_probe_that_holds_is_not_missed(
    autojump_clock: trio.abc.Clock,
) -> None:
    fake = FakeProber(default=FAIL, takes=1)
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status("c1"))
        m.add_pod(make_pod(liveness=probe(failure_threshold=1)))
        await trio.sleep(0.5)  # c1's probe is in flight; it will fail and hold
        m.update_pod_status("u1", runtime_status("c2", started=0.5))
        await settle(11)
        assert [(t, cid) for t, _, cid in fake.calls] == [(0, "c1"), (10, "c2")]


async def test_errors_are_retried_then_discarded(autojump_clock: trio.abc.Clock) -> None:
    errors: list[ProbeOutcome | ProbeError] = [ProbeError("no port")] * 3
    fake = FakeProber(scripts={L: [*errors, ProbeError("again"), FAIL]})
    events: list[tuple[str, str, str, str]] = []
    async with manager(fake, on_event=lambda p, c, t, r, msg: events.append((c, t, r, msg))) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(liveness=probe(failure_threshold=1)))
        await settle(5)
        assert fake.times(L) == [0, 0, 0]  # three attempts, then given up
        assert drain(m.liveness_results) == [("c1", Result.SUCCESS)]
        assert events == [
            (
                "app",
                "Warning",
                "Unhealthy",
                "Liveness probe errored and resulted in unknown state: no port",
            )
        ]
        assert m.worker_summaries()[0].last_error == "no port"
        await settle(10)
        # one error then a real failure within one probe: the failure counts
        assert fake.times(L) == [0, 0, 0, 10, 10]
        assert drain(m.liveness_results) == [("c1", Result.FAILURE)]
        assert events[-1][3] == "Liveness probe failed: boom"


async def test_a_crashing_prober_does_not_take_the_manager_down(
    autojump_clock: trio.abc.Clock,
) -> None:
    class Crashing(FakeProber):
        async def __call__(
            self, kind: ProbeKind, probe: Probe, target: ProbeTarget
        ) -> ProbeOutcome:
            raise ZeroDivisionError("bug")

    async with manager(Crashing()) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(readiness=probe()))
        await settle(25)
        (row,) = m.worker_summaries()
        assert row.probes == 3 and row.last_error == "ZeroDivisionError: bug"


async def test_not_running_is_failure_and_never_restarted_ends_the_worker(
    autojump_clock: trio.abc.Clock,
) -> None:
    fake = FakeProber()
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(readiness=probe(), restart_policy="Never"))
        await settle(1)
        assert drain(m.readiness_results) == [("c1", Result.FAILURE), ("c1", Result.SUCCESS)]
        m.update_pod_status("u1", runtime_status(state=ContainerRunState.EXITED))
        await settle(10)
        assert drain(m.readiness_results) == [("c1", Result.FAILURE)]
        assert m.workers == {}
        assert m.readiness_results.get("c1") is None  # removed with its worker


@pytest.mark.parametrize(("code", "keeps_probing"), [(42, True), (1, False)])
async def test_worker_follows_the_container_restart_rules(
    autojump_clock: trio.abc.Clock, code: int, keeps_probing: bool
) -> None:
    """Pod Never, container Never with a Restart rule on 42: an exit with 42 is to be
    restarted, so the worker waits for the new instance; any other code ends it."""
    on_42 = ContainerRestartRule(
        action="Restart", exit_codes=ContainerRestartRuleOnExitCodes(operator="In", values=(42,))
    )
    pod = make_pod(readiness=probe(), restart_policy="Never")
    app = attrs.evolve(
        pod.spec.containers[0], restart_policy="Never", restart_policy_rules=(on_42,)
    )
    pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, containers=(app,)))
    async with manager(FakeProber()) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(pod)
        await settle(1)
        status = runtime_status(state=ContainerRunState.EXITED)
        ended = attrs.evolve(status.containers[0], exit_code=code)
        m.update_pod_status("u1", attrs.evolve(status, containers=(ended,)))
        await settle(10)
        assert drain(m.readiness_results)[-1] == ("c1", Result.FAILURE)
        assert bool(m.workers) is keeps_probing


async def test_deletion_sets_liveness_success_and_stops(autojump_clock: trio.abc.Clock) -> None:
    fake = FakeProber(default=FAIL)
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status())
        pod = make_pod(liveness=probe(failure_threshold=3), readiness=probe())
        m.add_pod(pod)
        await settle(15)
        deleting = attrs.evolve(
            pod, metadata=attrs.evolve(pod.metadata, deletion_timestamp="2027-01-01T00:00:00Z")
        )
        m.add_pod(deleting)
        await settle(10)
        assert drain(m.liveness_results)[-1] == ("c1", Result.SUCCESS)
        assert [k.kind for k in m.workers] == [R]  # readiness keeps probing
        assert fake.times(L) == [0, 10]


async def test_terminal_phase_ends_every_worker(autojump_clock: trio.abc.Clock) -> None:
    async with manager(FakeProber()) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(liveness=probe(), readiness=probe()))
        await settle(1)
        assert len(m.workers) == 2
        m.update_pod_status("u1", runtime_status(), phase="Succeeded")
        await settle(10)
        assert m.workers == {}


async def test_manual_trigger_probes_now_and_restarts_the_period(
    autojump_clock: trio.abc.Clock,
) -> None:
    fake = FakeProber(default=FAIL)
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(readiness=probe()))
        await settle(4)
        assert m.trigger_readiness("u1", "app") is True
        assert m.trigger_readiness("u1", "nope") is False
        await settle(20)
        assert fake.times(R) == [0, 4, 14, 24]


async def test_tickers_start_on_the_grid_so_workers_due_together_wake_together(
    autojump_clock: trio.abc.Clock,
) -> None:
    fake = FakeProber(default=FAIL)
    async with manager(fake) as m:
        await trio.sleep(30.02)
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(readiness=probe()))
        await settle(0.05)  # 30.07: a second pod, within the same tenth of the period
        m.update_pod_status("u2", runtime_status("c2", uid="u2"))
        m.add_pod(make_pod(readiness=probe(), uid="u2"))
        await settle(25)
        one = [t for t, _, cid in fake.calls if cid == "c1"]
        two = [t for t, _, cid in fake.calls if cid == "c2"]
        # the first probe at once; from the second on, both fire on the grid, together
        assert one == pytest.approx([30.02, 41, 51])
        assert two == pytest.approx([30.07, 41, 51])
        assert one[1:] == two[1:]
        # a trigger probes at once and restarts the ticker on the grid
        assert m.trigger_readiness("u1", "app") is True
        await settle(11)
        assert [t for t, _, cid in fake.calls if cid == "c1"][3:] == pytest.approx([55.07, 66])
        # the grid is a tenth of the period: 0.5 s for a 5 s probe
        m.update_pod_status("u3", runtime_status("c3", uid="u3"))
        m.add_pod(make_pod(readiness=probe(period_seconds=5), uid="u3"))
        await settle(11)
        assert [t for t, _, cid in fake.calls if cid == "c3"] == pytest.approx([66.07, 71.5, 76.5])


async def test_a_slow_probe_runs_one_missed_tick_at_once(autojump_clock: trio.abc.Clock) -> None:
    fake = FakeProber(takes=25)
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(readiness=probe()))
        await settle(60)
        # 0-25; ticks at 10 and 20 missed, one runs at 25; 30 and 40 missed, one at 50
        assert fake.times(R) == [0, 25, 50]


async def test_new_running_instance_triggers_readiness(autojump_clock: trio.abc.Clock) -> None:
    fake = FakeProber()
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status("c1"))
        m.add_pod(make_pod(readiness=probe()))
        await settle(3)
        m.update_pod_status("u1", runtime_status("c2", started=3))
        await settle(1)
        assert fake.calls == [(0, R, "c1"), (3, R, "c2")]


async def test_remove_pod_cancels_a_probe_in_flight(autojump_clock: trio.abc.Clock) -> None:
    fake = FakeProber(takes=100)
    registry = CollectorRegistry()
    async with manager(fake, registry=registry) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(readiness=probe(), liveness=probe()))
        await settle(1)
        assert m.readiness_results.get("c1") is Result.FAILURE
        m.remove_pod("u1")
        await settle()
        assert m.workers == {} and m.status_of("u1") is None
        assert m.readiness_results.get("c1") is None
        assert trio.current_time() == 1


async def test_metrics_count_results_and_go_with_the_worker(
    autojump_clock: trio.abc.Clock,
) -> None:
    fake = FakeProber(scripts={R: [OK, FAIL, ProbeError("x")]})
    registry = CollectorRegistry()
    async with manager(fake, registry=registry) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(readiness=probe()))
        await settle(15)
        labels = {"container": "app", "pod": "web", "namespace": "default"}
        assert m.metrics.value(R, Result.SUCCESS, **labels) == 1
        assert m.metrics.value(R, Result.FAILURE, **labels) == 1
        sample = registry.get_sample_value(
            "prober_probe_total", {"probe_type": "Readiness", "result": "failed", **labels}
        )
        assert sample == 1
        m.remove_pod("u1")
        await settle()
        assert m.metrics.value(R, Result.SUCCESS, **labels) == 0


async def test_spec_changes(autojump_clock: trio.abc.Clock) -> None:
    fake = FakeProber()
    async with manager(fake) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(readiness=probe(), liveness=probe()))
        await settle(5)
        m.update_pod(make_pod(readiness=probe(period_seconds=3)))
        await settle(7)
        assert [k.kind for k in m.workers] == [R]
        # the new period counts from the next instant of its grid (0.3 s): 5.1
        assert fake.times(R) == pytest.approx([0, 8.1, 11.1])
        assert fake.times(L) == [0]


async def test_stop_liveness_and_startup_keeps_readiness(autojump_clock: trio.abc.Clock) -> None:
    async with manager(FakeProber()) as m:
        m.update_pod_status("u1", runtime_status())
        pod = make_pod(readiness=probe(), liveness=probe(), startup=probe())
        m.add_pod(pod)
        await settle(1)
        m.stop_liveness_and_startup("u1")
        m.add_pod(pod)  # a sync afterwards does not bring them back
        await settle()
        assert [k.kind for k in m.workers] == [R]
        m.remove_pod("u1")
        m.add_pod(pod)
        assert len(m.workers) == 3


# -- started / ready -----------------------------------------------------------------------------


def info(cid: str = "c1", started: float = 0.0) -> ContainerInfo:
    return runtime_status(cid, started=started).containers[0]


async def test_started_and_ready_as_update_pod_status(autojump_clock: trio.abc.Clock) -> None:
    fake = FakeProber(scripts={S: [OK], R: [OK]})
    async with manager(fake) as m:
        status = runtime_status()
        m.update_pod_status("u1", status)
        pod = make_pod(startup=probe(), readiness=probe())
        m.add_pod(pod)
        assert m.probe_status(pod, status) == m.probe_status(pod, status)  # before any probe
        assert not m.is_started(pod, info()) and not m.is_ready(pod, info())
        await settle(1)
        assert m.is_started(pod, info())
        assert not m.is_ready(pod, info(), trigger=False)  # the initial Failure
        m.is_ready(pod, info())  # asks the readiness worker for a probe now
        await settle()
        assert m.is_ready(pod, info())
        ps = m.probe_status(pod, status)
        assert (ps.started, ps.ready) == (frozenset({"c1"}), frozenset({"c1"}))
        exited = attrs.evolve(info(), state=ContainerRunState.EXITED)
        assert not m.is_started(pod, exited) and not m.is_ready(pod, exited)
        # no probes at all: started and ready once running
        bare = make_pod(uid="u9")
        assert m.is_started(bare, info("c9")) and m.is_ready(bare, info("c9"))


async def test_kubelet_restart_keeps_a_ready_container_ready(
    autojump_clock: trio.abc.Clock,
) -> None:
    await trio.sleep(100)  # the kubelet (manager) starts at trio time 100
    fake = FakeProber(default=FAIL)  # below the failure threshold during the test
    ready = PodStatus(
        conditions=(PodCondition(type="Ready", status="True"),),
        container_statuses=(
            ContainerStatus(name="app", container_id="containerd://c1", started=True),
        ),
    )
    async with manager(fake) as m:
        status = runtime_status(started=50)  # running since 50 s before this kubelet
        m.update_pod_status("u1", status)
        pod = make_pod(readiness=probe(), startup=probe(), status=ready)
        m.add_pod(pod)
        await settle(1)
        assert drain(m.readiness_results) == drain(m.startup_results) == []
        assert m.is_started(pod, info(started=50))  # the API status said so
        assert m.is_ready(pod, info(started=50))
        # without a Ready pod condition the container is not kept ready
        not_ready = attrs.evolve(pod, status=attrs.evolve(ready, conditions=()))
        assert not m.is_ready(not_ready, info(started=50))
        # a container started 5 s before the kubelet counts as new
        recent = runtime_status("c2", started=95)
        m.update_pod_status("u1", recent)
        await settle(1)
        assert drain(m.readiness_results) == [("c2", Result.FAILURE)]
        assert not m.is_ready(pod, info("c2", started=95))


async def test_host_network_pods_are_probed_on_the_host_ip(
    autojump_clock: trio.abc.Clock,
) -> None:
    seen: list[str] = []

    class Recording(FakeProber):
        async def __call__(
            self, kind: ProbeKind, probe: Probe, target: ProbeTarget
        ) -> ProbeOutcome:
            seen.append(target.pod_ip)
            return OK

    async with manager(Recording(), host_ip="192.0.2.1") as m:
        pod = make_pod(readiness=probe())
        pod = attrs.evolve(pod, spec=attrs.evolve(pod.spec, host_network=True))
        status = attrs.evolve(
            runtime_status(), sandboxes=(SandboxInfo(id="s", state=SandboxState.READY),)
        )
        m.update_pod_status("u1", status)
        m.add_pod(pod)
        await settle(1)
        assert seen == ["192.0.2.1"]


def _names(rows: Sequence[object]) -> list[str]:
    return [f"{r.kind}/{r.container}" for r in rows]  # type: ignore[attr-defined]


async def test_worker_summaries_for_the_console(autojump_clock: trio.abc.Clock) -> None:
    async with manager(FakeProber()) as m:
        m.update_pod_status("u1", runtime_status())
        m.add_pod(make_pod(readiness=probe(), liveness=probe()))
        await settle(1)
        rows = m.worker_summaries()
        assert _names(rows) == ["Liveness/app", "Readiness/app"]
        assert rows[1].pod == "default/web" and rows[1].last_result == "Success"


async def test_each_pod_s_workers_answer_for_that_pod_alone(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A pod's sync, teardown or status touches its own workers only (they are looked up
    by pod, not among every worker of the node)."""
    NEVER: dict[str, Any] = {"restart_policy": "Never"}
    async with manager(FakeProber()) as m:
        for uid in ("u1", "u2"):
            m.update_pod_status(uid, runtime_status(f"c-{uid}", uid=uid))
            m.update_pod(make_pod(readiness=probe(), liveness=probe(), uid=uid, **NEVER))
        await settle(1)
        m.update_pod(make_pod(readiness=probe(), uid="u1", **NEVER))
        assert sorted((k.uid, k.kind.value) for k in m.workers) == [
            ("u1", "Readiness"),
            ("u2", "Liveness"),
            ("u2", "Readiness"),
        ]
        m.stop_liveness_and_startup("u2")
        m.remove_pod("u1")
        assert [(k.uid, k.kind) for k in m.workers] == [("u2", R)]
        m.update_pod_status("u2", runtime_status("c-u2", uid="u2", state=ContainerRunState.EXITED))
        await settle(10)
        assert m.workers == {}  # its container exited for good: the worker ended itself
        m.update_pod(make_pod(uid="u2", **NEVER))  # a sync finds nothing of it to stop
        m.update_pod(make_pod(readiness=probe(), uid="u2", **NEVER))
        assert [(k.uid, k.kind) for k in m.workers] == [("u2", R)]
