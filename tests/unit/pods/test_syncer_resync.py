"""KubeletPodSyncer's periodic resync of a pod that did not change: the status it
reported before is kept, not built anew -- and any changed input is still noticed."""

from __future__ import annotations

from typing import Any, cast

import attrs
import pytest
import trio

from kubelet.api import Container, ExecAction, Pod, PodCondition, PodStatus, Probe
from kubelet.api.pod import PodReadinessGate
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    RuntimePodStatus,
    SandboxInfo,
    SandboxState,
)
from kubelet.events import EventRecorder
from kubelet.pleg import PodCache
from kubelet.pods import KubeletPodSyncer
from kubelet.pods import syncer as syncer_module
from kubelet.prober import ProberManager, ProbeStatus
from kubelet.runtime import PodRuntime
from kubelet.runtime.podruntime import SyncOutcome
from kubelet.status import Kill, generate_pod_status
from kubelet.testing.builders import make_pod

APP = ContainerInfo(id="c1", name="app", state=ContainerRunState.RUNNING, started_at=10**18)
RUNNING = RuntimePodStatus(
    uid="u",
    sandboxes=(SandboxInfo(id="s", state=SandboxState.READY, ip="10.0.0.2"),),
    containers=(APP,),
)
POD = make_pod(Container(name="app", image="busybox"), uid="u")
PROBE = Probe(exec=ExecAction(command=("true",)))
PROBED = make_pod(
    Container(name="app", image="busybox", startup_probe=PROBE, readiness_probe=PROBE), uid="u"
)


class StubRuntime:
    """``PodRuntime.sync`` as the syncer sees it: nothing to do, maybe a waiting reason."""

    def __init__(self, views: dict[str, RuntimePodStatus]) -> None:
        self.views = views
        self.recorder = EventRecorder("")
        self.waiting: dict[str, tuple[str, str]] = {}
        self.wall = 1_800_000_000.0

    def wall_clock(self) -> float:
        return self.wall

    async def sync(self, pod: Pod, status: RuntimePodStatus, **_: Any) -> SyncOutcome:
        return SyncOutcome(waiting=dict(self.waiting))

    async def kill(self, pod: Pod, status: RuntimePodStatus, grace: int | None) -> None:
        pass

    async def remove(self, status: RuntimePodStatus) -> None:
        self.views[status.uid] = RuntimePodStatus(uid=status.uid)

    async def remove_pod_files(self, pod: Pod) -> None:
        pass


class StubProber:
    """The prober's verdicts, set by the test."""

    def __init__(self) -> None:
        self.started: frozenset[str] = frozenset({"c1"})
        self.ready: frozenset[str] = frozenset({"c1"})

    def update_pod(self, pod: Pod) -> None:
        pass

    def add_pod(self, pod: Pod) -> None:
        pass

    def update_pod_status(self, uid: str, status: RuntimePodStatus) -> None:
        pass

    def liveness_failed(self, status: RuntimePodStatus) -> frozenset[str]:
        return frozenset()

    def startup_failed(self, status: RuntimePodStatus) -> frozenset[str]:
        return frozenset()

    def probe_status(self, pod: Pod, status: RuntimePodStatus) -> ProbeStatus:
        return ProbeStatus(self.started, self.ready)

    def remove_pod(self, uid: str) -> None:
        pass

    def stop_liveness_and_startup(self, uid: str) -> None:
        pass


@attrs.define
class Setup:
    syncer: KubeletPodSyncer
    runtime: StubRuntime
    prober: StubProber
    views: dict[str, RuntimePodStatus]
    generated: list[PodStatus]


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> Setup:
    views = {"u": RUNNING}

    async def fetch(uid: str) -> RuntimePodStatus:
        return views[uid]

    generated: list[PodStatus] = []

    def counting(*args: Any, **kwargs: Any) -> PodStatus:
        status = generate_pod_status(*args, **kwargs)
        generated.append(status)
        return status

    monkeypatch.setattr(syncer_module, "generate_pod_status", counting)
    runtime, prober = StubRuntime(views), StubProber()
    syncer = KubeletPodSyncer(
        PodCache(fetch),
        cast(PodRuntime, runtime),
        prober=cast(ProberManager, prober),
        wall_clock=runtime.wall_clock,
    )
    return Setup(syncer, runtime, prober, views, generated)


async def settle(s: Setup, pod: Pod = POD) -> PodStatus:
    """Syncs until a resync keeps the status; that status."""
    for _ in range(3):
        await s.syncer.sync_pod(pod)
    return s.syncer.statuses[pod.uid]


def fresh(s: Setup, pod: Pod, previous: PodStatus, **inputs: Any) -> PodStatus:
    """What generating the status afresh would report now."""
    return generate_pod_status(
        pod,
        inputs.get("runtime", RUNNING),
        previous=previous,
        started=s.prober.started,
        ready=s.prober.ready,
        waiting_reasons=s.runtime.waiting,
        now_ns=int(s.runtime.wall * 1e9),
        **{k: v for k, v in inputs.items() if k != "runtime"},
    )


async def test_a_resync_of_an_unchanged_pod_keeps_its_status(
    setup: Setup, autojump_clock: trio.abc.Clock
) -> None:
    """Generated twice (the second equal to the first), then no more: the status kept is
    what a fresh generation a minute later would give."""
    s = setup
    await s.syncer.sync_pod(POD)
    await s.syncer.sync_pod(POD)
    assert len(s.generated) == 2
    before = s.syncer.statuses["u"]
    assert before.phase == "Running" and before.container_statuses[0].ready
    for _ in range(3):
        s.runtime.wall += 60
        await s.syncer.sync_pod(POD)
    assert len(s.generated) == 2
    assert s.syncer.statuses["u"] is before
    assert fresh(s, POD, before) == before


async def test_a_changed_runtime_view_after_a_kept_status_is_reported(
    setup: Setup, autojump_clock: trio.abc.Clock
) -> None:
    s = setup
    before = await settle(s)
    exited = attrs.evolve(APP, state=ContainerRunState.EXITED, exit_code=1, finished_at=10**18)
    s.views["u"] = changed = attrs.evolve(RUNNING, containers=(exited,))
    s.syncer.cache.delete("u")  # the PLEG saw the exit
    s.runtime.wall += 60
    await s.syncer.sync_pod(POD)
    after = s.syncer.statuses["u"]
    terminated = after.container_statuses[0].state
    assert terminated is not None and terminated.terminated is not None
    assert after == fresh(s, POD, before, runtime=changed)


@pytest.mark.parametrize("verdict", ["started", "ready"])
async def test_a_changed_probe_verdict_after_a_kept_status_is_reported(
    setup: Setup, autojump_clock: trio.abc.Clock, verdict: str
) -> None:
    s = setup
    before = await settle(s, PROBED)
    assert before.container_statuses[0].ready
    setattr(s.prober, verdict, frozenset())
    s.runtime.wall += 60
    await s.syncer.sync_pod(PROBED)
    after = s.syncer.statuses["u"]
    assert not after.container_statuses[0].ready
    assert next(c for c in after.conditions if c.type == "Ready").status == "False"
    assert after == fresh(s, PROBED, before)


async def test_a_changed_waiting_reason_after_a_kept_status_is_reported(
    setup: Setup, autojump_clock: trio.abc.Clock
) -> None:
    s = setup
    s.views["u"] = no_app = attrs.evolve(RUNNING, containers=())
    s.prober.started = s.prober.ready = frozenset()
    before = await settle(s)
    state = before.container_statuses[0].state
    assert state is not None and state.waiting is not None
    assert state.waiting.reason == "ContainerCreating"
    s.runtime.waiting = {"app": ("ErrImagePull", "no such image")}
    await s.syncer.sync_pod(POD)
    waiting = s.syncer.statuses["u"].container_statuses[0].state
    assert waiting is not None and waiting.waiting is not None
    assert waiting.waiting.reason == "ErrImagePull"
    assert s.syncer.statuses["u"] == fresh(s, POD, before, runtime=no_app)


async def test_a_changed_pod_after_a_kept_status_is_reported(
    setup: Setup, autojump_clock: trio.abc.Clock
) -> None:
    """A new pod object (here: a readiness gate's condition set by someone else)."""
    s = setup
    gated = attrs.evolve(
        POD,
        spec=attrs.evolve(POD.spec, readiness_gates=(PodReadinessGate(condition_type="g"),)),
    )
    before = await settle(s, gated)
    assert next(c for c in before.conditions if c.type == "Ready").status == "False"
    opened = attrs.evolve(
        gated,
        status=attrs.evolve(gated.status, conditions=(PodCondition(type="g", status="True"),)),
    )
    await s.syncer.sync_pod(opened)
    after = s.syncer.statuses["u"]
    assert next(c for c in after.conditions if c.type == "Ready").status == "True"
    assert after == fresh(s, opened, before)


async def test_a_kill_after_a_kept_status_is_reported(
    setup: Setup, autojump_clock: trio.abc.Clock
) -> None:
    s = setup
    await settle(s)
    s.syncer.kill(POD, Kill("Evicted", "The node was low on memory."))
    await s.syncer.sync_pod(POD)
    after = s.syncer.statuses["u"]
    assert after.phase == "Failed" and after.reason == "Evicted"


async def test_an_eviction_after_a_kept_status_is_reported(
    setup: Setup, autojump_clock: trio.abc.Clock
) -> None:
    """The evicted pod's last status (read between stop and removal: the same view as
    the kept status's) says why it stopped."""
    s = setup
    s.syncer.pods.upsert(POD)  # still desired: its last status stays
    await settle(s)
    s.syncer.kill(POD, Kill("Evicted", "The node was low on memory.", reclaim=True))
    await s.syncer.terminate_pod(POD, None)
    after = s.syncer.statuses["u"]
    assert after.phase == "Failed" and after.reason == "Evicted"
