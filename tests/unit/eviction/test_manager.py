"""The eviction manager loop on a fake clock: scripted usage curves, the pod evicted, when,
with what message, the conditions over time, node-level reclaim first, the notifier path."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence, Set
from pathlib import Path

import attrs
import pytest
import trio

from kubelet.api import Pod
from kubelet.decisions import is_critical_pod, pod_qos
from kubelet.eviction import Eviction, EvictionConfig, EvictionManager, parse_thresholds
from kubelet.eviction.thresholds import Threshold
from kubelet.stats import NodeUsage, PodUsage, Summary

from .evictionkit import (
    Gi,
    Mi,
    b,
    disk_summary,
    disk_usage,
    empty_dir,
    memory_summary,
    memory_usage,
    pod,
)


@attrs.define
class Node:
    """A scripted node: usage is a function of (time, pods still running)."""

    pods: list[Pod]
    usage: Callable[[float, Sequence[Pod]], Summary]
    killed: list[tuple[float, Eviction]] = attrs.field(factory=list)
    reclaimed: list[tuple[float, str]] = attrs.field(factory=list)
    node_events: list[tuple[float, str, str]] = attrs.field(factory=list)
    pod_events: list[tuple[str, str, str, Mapping[str, str]]] = attrs.field(factory=list)
    gone: set[str] = attrs.field(factory=set)
    summaries: int = 0
    wanted: list[set[str] | None] = attrs.field(factory=list)
    """the UIDs each pass asked the pods' figures of (None: all)"""
    read: Summary = attrs.field(factory=Summary)
    """the summary of the last ``node_usage``"""
    after_images: Callable[[], None] | None = None
    evicted_for: list[str] = attrs.field(factory=list)
    """the ``kubelet_evictions`` label of each eviction counted"""
    stats_ages: list[tuple[float, str, float]] = attrs.field(factory=list)
    """(when, signal, measured at) of each ``kubelet_eviction_stats_age_seconds``"""

    def pod_evicted(self, signal: str) -> None:
        self.evicted_for.append(signal)

    def observe_eviction_stats_age(self, signal: str, measured_at: float) -> None:
        self.stats_ages.append((trio.current_time(), signal, measured_at))

    async def node_usage(self) -> NodeUsage:
        self.summaries += 1
        self.read = self.usage(trio.current_time(), self.pods)
        return self.read.node

    async def pods_usage(self, wanted: Set[str] | None) -> tuple[PodUsage, ...]:
        """The pods' figures of the summary the node's came from, of those asked for only
        (as the provider reads them)."""
        self.wanted.append(None if wanted is None else set(wanted))
        return tuple(p for p in self.read.pods if wanted is None or p.uid in wanted)

    async def evict(self, eviction: Eviction) -> None:
        self.killed.append((trio.current_time(), eviction))
        self.pods = [p for p in self.pods if p.uid != eviction.pod.uid]
        self.gone.add(eviction.pod.uid)

    async def delete_unused_containers(self) -> None:
        self.reclaimed.append((trio.current_time(), "containers"))

    async def delete_unused_images(self) -> None:
        self.reclaimed.append((trio.current_time(), "images"))
        if self.after_images is not None:
            self.after_images()

    def node_event(self, event_type: str, reason: str, message: str) -> None:
        self.node_events.append((trio.current_time(), reason, message))

    def pod_event(
        self, pod: Pod, event_type: str, reason: str, message: str, annotations: Mapping[str, str]
    ) -> None:
        self.pod_events.append((pod.metadata.name, reason, message, dict(annotations)))


def manager(node: Node, thresholds: tuple[Threshold, ...], **config: object) -> EvictionManager:
    async def layout() -> tuple[bool, bool]:
        return (False, False)

    return EvictionManager(
        EvictionConfig(thresholds, **config),  # type: ignore[arg-type]
        summaries=node,
        active_pods=lambda: node.pods,
        killer=node,
        reclaimer=node,
        events=node,
        is_critical=is_critical_pod,
        cleaned_up=lambda p: p.uid in node.gone,
        disk_layout=layout,
        metrics=node,
    )


async def run_for(
    m: EvictionManager, seconds: float, probe: Callable[[], None] | None = None
) -> None:
    """Run the manager for ``seconds``; ``probe`` at every half second past a whole one."""
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        if probe is None:
            await trio.sleep(seconds)
        else:
            await trio.sleep(0.5)
            for _ in range(int(seconds)):
                probe()
                await trio.sleep(1)
        nursery.cancel_scope.cancel()


def memory_curve(drop_at: float, per_pod: Mapping[str, str], low: str = "500Mi", high: str = "3Gi"):  # type: ignore[no-untyped-def]
    """Plenty until ``drop_at``; then ``low`` available while the first pod of ``per_pod`` runs."""
    culprit = next(iter(per_pod))

    def usage(now: float, pods: Sequence[Pod]) -> Summary:
        hog_running = any(p.metadata.name == culprit for p in pods)
        available = low if now >= drop_at and hog_running else high
        return memory_summary(
            available,
            [
                memory_usage(
                    p, per_pod.get(p.metadata.name, "10Mi"), per_pod.get(p.metadata.name, "10Mi")
                )
                for p in pods
            ],
            time=now,
        )

    return usage


async def test_memory_curve_evicts_the_right_pod_at_the_next_pass(
    autojump_clock: trio.abc.Clock,
) -> None:
    hog = pod("hog", 0, {"memory": "100Mi"})
    quiet = pod("quiet", 0, {"memory": "1Gi"})
    critical = pod("static", 0, annotations={"kubernetes.io/config.source": "file"})
    node = Node([critical, quiet, hog], memory_curve(25.0, {"hog": "800Mi", "static": "2Gi"}))
    m = manager(node, parse_thresholds({"memory.available": "1Gi"}))
    timeline: list[tuple[float, tuple[str, ...]]] = []
    await run_for(m, 400, lambda: timeline.append((trio.current_time(), m.conditions)))
    ((when, eviction),) = node.killed
    assert when == 30.0  # passes at 0, 10, 20, 30: the first after the drop at 25
    assert eviction.pod is hog and eviction.grace_period_override == 1
    text = (
        "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. "
        "Container hog was using 800Mi, request is 100Mi, has larger consumption of memory. "
    )
    assert eviction.message.text == text
    assert node.pod_events == [
        (
            "hog",
            "Evicted",
            text,
            {
                "offending_containers": "hog",
                "offending_containers_usage": "800Mi",
                "starved_resource": "memory",
            },
        )
    ]
    assert node.node_events == [(30.0, "EvictionThresholdMet", "Attempting to reclaim memory")]
    assert node.reclaimed == []  # memory has no node-level reclaim
    assert node.evicted_for == ["memory.available"]
    assert node.stats_ages == [(30.0, "memory.available", 30.0)]  # the figure of that pass
    # no pod has local storage limits: no pod's figures until the threshold is met, then
    # all of them (the ranking and the message above read them); none once relieved
    assert node.wanted[:5] == [set(), set(), set(), None, set()]
    seen = dict(timeline)
    # on from the pass at 30; relieved at 31 (the hog is gone) but held for the transition
    # period: 300 s after it was last met (30), i.e. off from the pass at 331
    assert seen[29.5] == () and seen[30.5] == ("MemoryPressure",)
    assert seen[325.5] == ("MemoryPressure",) and seen[331.5] == ()


async def test_soft_threshold_waits_its_grace_period(autojump_clock: trio.abc.Clock) -> None:
    hog = pod("hog", 0, {"memory": "100Mi"}, grace=10)
    node = Node([hog], memory_curve(5.0, {"hog": "800Mi"}))
    thresholds = parse_thresholds({}, {"memory.available": "1Gi"}, {"memory.available": "1m"})
    m = manager(node, thresholds, max_pod_grace_period=30)
    await run_for(m, 100)
    ((when, eviction),) = node.killed
    assert when == 70.0  # first met at 10, grace 60 s
    assert eviction.grace_period_override == 10  # min(evictionMaxPodGracePeriod, pod's own)


async def test_disk_pressure_reclaims_on_the_node_first(autojump_clock: trio.abc.Clock) -> None:
    web = pod("web", 0, volumes=(empty_dir(),))
    freed = {"done": False}

    def usage(now: float, pods: Sequence[Pod]) -> Summary:
        available = "5Gi" if freed["done"] or now < 15 else "1Gi"
        return disk_summary(
            available, "100Gi", pods=[disk_usage(p, "1Gi", "0", "1Gi") for p in pods], time=now
        )

    node = Node([web], usage, after_images=lambda: freed.update(done=True))
    m = manager(node, parse_thresholds({"nodefs.available": "2Gi"}))
    await run_for(m, 60)
    assert node.reclaimed == [(20.0, "containers"), (20.0, "images")]
    assert node.killed == []  # images freed enough: no pod evicted
    assert m.conditions == ("DiskPressure",)  # within the transition period


async def test_disk_pressure_evicts_when_reclaim_is_not_enough(
    autojump_clock: trio.abc.Clock,
) -> None:
    small = pod("small", 0, volumes=(empty_dir(),))
    big = pod("big", 0, volumes=(empty_dir(),))

    def usage(now: float, pods: Sequence[Pod]) -> Summary:
        sizes = {"small": "10Mi", "big": "3Gi"}
        available = "1Gi" if any(p.metadata.name == "big" for p in pods) else "10Gi"
        return disk_summary(
            available,
            "100Gi",
            pods=[disk_usage(p, "0", "0", sizes[p.metadata.name]) for p in pods],
            time=now,
        )

    node = Node([small, big], usage)
    m = manager(
        node,
        parse_thresholds({"nodefs.available": "2Gi"}, minimum_reclaim={"nodefs.available": "1Gi"}),
    )
    await run_for(m, 15)
    ((when, eviction),) = node.killed
    assert when == 0.0 and eviction.pod is big
    assert [r for _, r in node.reclaimed] == ["containers", "images"]
    assert eviction.message.text.startswith(
        "The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, available: 1Gi. "
    )


async def test_local_storage_limit_evicts_without_threshold(autojump_clock: trio.abc.Clock) -> None:
    filler = pod("filler", 0, volumes=(empty_dir("scratch", "100Mi"),))
    calm = pod("calm", 0, volumes=(empty_dir("scratch", "100Mi"),))

    def usage(now: float, pods: Sequence[Pod]) -> Summary:
        used = {"filler": "200Mi" if now >= 12 else "1Mi", "calm": "1Mi"}
        return disk_summary(
            "50Gi",
            "50Gi",
            pods=[disk_usage(p, "0", "0", used[p.metadata.name]) for p in pods],
            time=now,
        )

    node = Node([filler, calm], usage)
    m = manager(node, parse_thresholds({"nodefs.available": "10%"}))
    await run_for(m, 40)
    ((when, eviction),) = node.killed
    assert when == 20.0 and eviction.pod is filler
    assert eviction.message.text == 'Usage of EmptyDir volume "scratch" exceeds the limit "100Mi". '
    assert eviction.grace_period_override == 1 and not eviction.disruption_condition
    assert node.node_events == []
    assert node.evicted_for == ["emptydirfs.limit"]
    assert node.stats_ages == []  # no threshold acted on


async def test_without_pressure_only_pods_with_local_storage_limits_are_read(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The figures of a pod with an emptyDir sizeLimit or an ephemeral-storage limit are
    read at every pass (the one over its limit is evicted), no other pod's."""
    filler = pod("filler", 0, volumes=(empty_dir("scratch", "100Mi"),))
    limited = pod("limited", 0, limits={"ephemeral-storage": "1Gi"})
    plain = pod("plain", 0, {"memory": "10Mi"}, volumes=(empty_dir("scratch"),))
    critical = pod("critical", 2_000_000_001, volumes=(empty_dir("scratch", "1Mi"),))

    def usage(now: float, pods: Sequence[Pod]) -> Summary:
        used = "200Mi" if now >= 12 else "1Mi"
        return disk_summary(
            "50Gi", "50Gi", pods=[disk_usage(p, "0", "0", used) for p in pods], time=now
        )

    node = Node([filler, limited, plain, critical], usage)
    m = manager(node, parse_thresholds({"nodefs.available": "10%"}))
    await run_for(m, 25)
    ((when, eviction),) = node.killed
    assert when == 20.0 and eviction.pod is filler
    assert node.wanted[:3] == [{filler.uid, limited.uid}] * 3
    node.wanted.clear()
    m.config = attrs.evolve(m.config, local_storage_capacity_isolation=False)
    await run_for(m, 5)
    assert node.wanted == [set()]  # no local storage limits enforced: no pod's figures


async def test_only_critical_pods_left(autojump_clock: trio.abc.Clock) -> None:
    mirror = pod("mirror", 0, annotations={"kubernetes.io/config.mirror": "x"})
    node = Node([mirror], memory_curve(0.0, {"mirror": "2Gi"}))
    m = manager(node, parse_thresholds({"memory.available": "1Gi"}))
    await run_for(m, 25)
    assert node.killed == [] and m.conditions == ("MemoryPressure",)
    assert node.evicted_for == []  # a critical pod is never counted as evicted
    assert m.admit(pod("be", 0), pod_qos) is not None
    assert m.admit(pod("burstable", 0, {"memory": "1Mi"}), pod_qos) is None


async def test_notifier_runs_a_pass_at_once(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    (tmp_path / "memory.usage_in_bytes").write_text("0\n")
    (tmp_path / "cgroup.event_control").write_text("")
    hog = pod("hog", 0, {"memory": "100Mi"})
    curve = memory_curve(12.5, {"hog": "800Mi"})

    def usage(now: float, pods: Sequence[Pod]) -> Summary:
        s = curve(now, pods)
        memory = attrs.evolve(s.node.memory, usage=s.node.memory.working_set + 100 * Mi)  # type: ignore[union-attr]
        return attrs.evolve(s, node=attrs.evolve(s.node, memory=memory))

    node = Node([hog], usage)
    m = manager(node, parse_thresholds({"memory.available": "1Gi"}), memory_cgroup_root=tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        await trio.sleep(12.6)
        # armed in a worker thread, which the clock does not wait for: yield (the clock
        # stands still while a task is runnable) until the thread has registered
        deadline = time.monotonic() + 5
        while not (tmp_path / "cgroup.event_control").read_text():
            assert time.monotonic() < deadline
            await trio.lowlevel.checkpoint()
        event_fd, _, armed = (
            int(x) for x in (tmp_path / "cgroup.event_control").read_text().split()
        )
        # capacity 6Gi (3Gi available + 3Gi working set) - 1Gi + 100Mi inactive file
        assert armed == 5 * Gi + 100 * Mi
        os.eventfd_write(event_fd, 1)  # the kernel: usage crossed the armed value
        # the thread hands the registration back to the notifier's task only now and
        # then: again, hold the clock still (a sleep could jump past it) until the pass ran
        deadline = time.monotonic() + 5
        while not node.killed:
            assert time.monotonic() < deadline
            await trio.lowlevel.checkpoint()
        nursery.cancel_scope.cancel()
    ((when, eviction),) = node.killed
    assert 12.6 <= when < 12.7  # not at the 20 s pass
    assert eviction.pod is hog
    assert b("1Gi") == Gi


async def test_periodic_passes_wait_for_the_relist_a_kicked_one_does_not(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The monitoring interval's passes begin once ``before_periodic_pass`` returns (the
    PLEG's between_relists: 0.3 s here); a pass a memory notifier asks for begins at once."""
    passes: list[float] = []

    def usage(now: float, pods: Sequence[Pod]) -> Summary:
        passes.append(now)
        return memory_summary("3Gi", [], time=now)

    async def between_relists() -> None:
        await trio.sleep(0.3)

    node = Node([], usage)
    m = manager(node, parse_thresholds({"memory.available": "1Gi"}))
    m.before_periodic_pass = between_relists
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        await trio.sleep(15)
        m.kick()
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert passes == pytest.approx([0.0, 10.3, 15.0])  # the next: 25.3, after the end
