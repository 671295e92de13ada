"""Admission's running sum of the active pods' requests (``fit.RequestSum``, kept by the
syncLoop as pod workers change): it must always equal the sum over all active pods that
admission used to walk, through admissions, rejections, finished pods, terminations,
removals and pods replaced by updates."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest
import trio

from kubelet.api import (
    Container,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    Quantity,
    ResourceRequirements,
)
from kubelet.pleg import PodLifecycleEvent
from kubelet.pods import NodeInfo, PodManager, PodWorkers, fit
from kubelet.pods.admission import AdmissionFacts, Rejection
from kubelet.pods.fit import RequestSum, Resources
from kubelet.pods.syncloop import SyncLoop, SyncLoopParts
from kubelet.pods.workers import SyncResult
from kubelet.sources import PodOperation, PodUpdate

GPU = "example.com/gpu"
NODE = NodeInfo(name="n", allocatable={"cpu": "4", "memory": "8Gi", "pods": "110", GPU: "2"})


def make_pod(
    name: str,
    requests: dict[str, str] | None = None,
    *,
    uid: str | None = None,
    phase: str = "",
    deleted: bool = False,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="ns",
            uid=uid or f"uid-{name}",
            deletion_timestamp="2026-01-01T00:00:00Z" if deleted else None,
        ),
        spec=PodSpec(
            containers=(
                Container(
                    name="c",
                    resources=ResourceRequirements(
                        requests={k: Quantity(v) for k, v in (requests or {}).items()}
                    ),
                ),
            )
        ),
        status=PodStatus(phase=phase),
    )


def summed(pods: list[Pod], flag: bool) -> Resources:
    return fit._total(fit._REQUESTS[flag](p) for p in pods)


# -- RequestSum alone ---------------------------------------------------------------------


def test_request_sum_equals_the_walked_sum_through_random_changes() -> None:
    rng = random.Random(7)
    choices = [
        {"cpu": "100m"},
        {"cpu": "1", "memory": "1Gi"},
        {GPU: "1"},
        {GPU: "0"},  # names the resource with nothing: the key still shows in the sum
        {"hugepages-2Mi": "2Mi", "ephemeral-storage": "1Gi"},
        {},
    ]
    members: dict[str, Pod] = {}
    sums = RequestSum()
    assert sums.total(True) == Resources()
    for step in range(400):
        uid = f"u{rng.randrange(12)}"
        if rng.random() < 0.3:
            members.pop(uid, None)
            sums.discard(uid)
        else:
            pod = make_pod(f"p{step}", rng.choice(choices), uid=uid)
            members[uid] = pod
            sums.put(uid, pod)
        assert len(sums) == len(members)
        for flag in (True, False):
            assert sums.total(flag) == summed(list(members.values()), flag)


def test_request_sum_is_unknown_while_a_member_does_not_parse() -> None:
    sums = RequestSum()
    sums.put("a", make_pod("a", {"cpu": "1"}))
    assert sums.total(True) == Resources(milli_cpu=1000)
    sums.put("b", make_pod("b", {"cpu": "lots"}))
    assert sums.total(True) is None
    assert sums.total(False) is None  # a sum started later sees it too
    sums.put("b", make_pod("b", {"cpu": "2"}))  # replaced by a pod that parses
    assert sums.total(True) == Resources(milli_cpu=3000)
    sums.put("b", make_pod("b", {"cpu": "lots"}))
    sums.discard("b")
    assert sums.total(True) == Resources(milli_cpu=1000)
    assert sums.total(False) == Resources(milli_cpu=1000)


# -- kept by the syncLoop -------------------------------------------------------------------


class _Syncer:
    """Syncs succeed (``finished`` for the names listed); a termination of a name in
    ``hold`` waits until it is released."""

    def __init__(self) -> None:
        self.finished: set[str] = set()
        self.hold: dict[str, trio.Event] = {}

    async def sync_pod(self, pod: Pod) -> SyncResult:
        return SyncResult(finished=pod.metadata.name in self.finished)

    async def terminate_pod(self, pod: Pod, grace: int | None) -> None:
        held = self.hold.get(pod.metadata.name)
        if held is not None:
            await held.wait()


class _Housekeeper:
    pass


@pytest.fixture
async def rig() -> AsyncIterator[tuple[SyncLoop, _Syncer]]:
    syncer = _Syncer()
    workers = PodWorkers(syncer)
    _, updates = trio.open_memory_channel[PodUpdate](0)
    _, events = trio.open_memory_channel[PodLifecycleEvent](0)
    loop = SyncLoop(
        SyncLoopParts(
            updates=updates,
            pleg_events=events,
            pods=PodManager(),
            workers=workers,
            housekeeper=_Housekeeper(),  # type: ignore[arg-type]
            sources_ready=lambda seen: True,
            admission_facts=lambda: AdmissionFacts(node=NODE),
        )
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(workers.run)
        yield loop, syncer
        nursery.cancel_scope.cancel()


async def step(loop: SyncLoop, op: PodOperation, *pods: Pod) -> None:
    await loop._handle_update(PodUpdate(op, "api", pods))
    await trio.sleep(1)  # the workers run their steps


def probe(loop: SyncLoop) -> Rejection | None:
    """Admission of a pod too big for any node: its message names the cpu in use."""
    return loop._admission_failure(make_pod("probe", {"cpu": "100"}))


def used_cpu(loop: SyncLoop) -> int:
    """The cpu in use as admission reports it, checked against the walked sum."""
    listed = loop._listed_others(make_pod("probe"))
    others = loop._others(make_pod("probe"))
    assert isinstance(others, fit.ActivePods)
    assert len(others) == len(listed)
    assert list(others) == listed
    for flag in (True, False):
        assert others.requests.total(flag) == summed(listed, flag)
    rejection = probe(loop)
    assert rejection is not None and rejection.reason == "OutOfcpu"
    used = rejection.message.split("used: ")[1].split(",")[0]
    return int(used)


async def test_the_sum_follows_admit_reject_finish_terminate_remove(
    rig: tuple[SyncLoop, _Syncer], autojump_clock: trio.abc.Clock
) -> None:
    loop, syncer = rig
    a = make_pod("a", {"cpu": "1"})
    b = make_pod("b", {"cpu": "1", GPU: "1"})
    c = make_pod("c", {"cpu": "1"})
    await step(loop, PodOperation.ADD, a, b, c)
    assert used_cpu(loop) == 3000

    big = make_pod("big", {"cpu": "2"})
    await step(loop, PodOperation.ADD, big)
    assert loop.rejected["uid-big"] == (
        "OutOfcpu: Node didn't have enough resource: cpu, requested: 2000, used: 3000, "
        "capacity: 4000"
    )
    assert used_cpu(loop) == 3000  # a rejected pod holds nothing
    await step(loop, PodOperation.DELETE, make_pod("big", {"cpu": "2"}, deleted=True))
    assert used_cpu(loop) == 3000  # ... not even while its (empty) worker terminates

    syncer.finished.add("b")  # b's next sync finds it Succeeded
    await step(loop, PodOperation.UPDATE, b)
    assert used_cpu(loop) == 2000

    syncer.hold["a"] = release = trio.Event()
    await step(loop, PodOperation.DELETE, make_pod("a", {"cpu": "1"}, deleted=True))
    assert used_cpu(loop) == 2000  # terminating: still holds its cpu
    release.set()
    await trio.sleep(1)
    assert used_cpu(loop) == 1000  # terminated

    resized = make_pod("c", {"cpu": "1500m"})
    await step(loop, PodOperation.UPDATE, resized)
    assert used_cpu(loop) == 1500  # the resize fits: it is the allocation now

    d = make_pod("d", {"cpu": "2"})
    await step(loop, PodOperation.ADD, d)
    assert "uid-d" not in loop.rejected
    assert used_cpu(loop) == 3500

    await step(loop, PodOperation.REMOVE, resized)
    assert used_cpu(loop) == 2000
    await step(loop, PodOperation.REMOVE, big)
    await step(loop, PodOperation.REMOVE, a)
    await step(loop, PodOperation.REMOVE, b)
    assert used_cpu(loop) == 2000
    await step(loop, PodOperation.REMOVE, d)
    assert used_cpu(loop) == 0
    assert not loop.workers.workers


async def test_a_rejected_pod_terminating_after_its_removal_never_counts(
    rig: tuple[SyncLoop, _Syncer], autojump_clock: trio.abc.Clock
) -> None:
    # Upstream counts only the pods its pod manager still holds: once its source drops
    # it, a rejected pod's worker, still terminating, counts no more than before.
    loop, syncer = rig
    await step(loop, PodOperation.ADD, make_pod("a", {"cpu": "3"}))
    big = make_pod("big", {"cpu": "2"})
    await step(loop, PodOperation.ADD, big)
    assert "uid-big" in loop.rejected
    syncer.hold["big"] = release = trio.Event()
    await step(loop, PodOperation.DELETE, make_pod("big", {"cpu": "2"}, deleted=True))
    assert used_cpu(loop) == 3000
    await step(loop, PodOperation.REMOVE, big)
    assert loop.workers.is_active("uid-big")  # still terminating
    assert used_cpu(loop) == 3000
    release.set()
    await trio.sleep(1)
    assert used_cpu(loop) == 3000


async def test_a_member_that_does_not_parse_fails_admission_as_before(
    rig: tuple[SyncLoop, _Syncer], autojump_clock: trio.abc.Clock
) -> None:
    # A finished pod is admitted unchecked; once deleted it terminates, active again, and
    # its requests are summed with everyone's (upstream would have refused it at the API).
    loop, syncer = rig
    broken = make_pod("broken", {"cpu": "lots"}, phase="Failed")
    await step(loop, PodOperation.ADD, broken)
    assert probe(loop) is not None
    syncer.hold["broken"] = release = trio.Event()
    await step(
        loop, PodOperation.DELETE, make_pod("broken", {"cpu": "lots"}, phase="Failed", deleted=True)
    )
    ok = make_pod("ok", {"cpu": "1"})
    got = loop._admission_failure(ok)
    assert got is not None and got.reason == "UnexpectedAdmissionError"
    assert "lots" in got.message
    assert got == fit.filter_rejection(
        ok, loop._listed_others(ok), NODE
    )  # the walked sum meets the same error
    release.set()
    await trio.sleep(1)
    assert loop._admission_failure(ok) is None
