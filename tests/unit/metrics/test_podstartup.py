"""The pod startup SLI tracker on a scripted clock: what it records, when, and what not."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kubelet.api import Pod, from_wire
from kubelet.podstartup import PodStartupTracker, has_started, is_stateful

T0 = 1_800_000_000.0  # the pod's creationTimestamp


def stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def api_pod(
    *,
    running: bool = False,
    start_time: float | None = None,
    phase: str = "Pending",
    volumes: list[dict[str, Any]] | None = None,
    host_network: bool = False,
    init: list[tuple[float, float]] | None = None,
    uid: str = "u1",
) -> Pod:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "busybox"}],
        "volumes": volumes or [],
        "hostNetwork": host_network,
    }
    status: dict[str, Any] = {"phase": phase}
    if start_time is not None:
        status["startTime"] = stamp(start_time)
    state = {"running": {"startedAt": stamp(T0 + 1)}} if running else {"waiting": {}}
    status["containerStatuses"] = [{"name": "app", "state": state}]
    if init:
        spec["initContainers"] = [{"name": f"i{n}", "image": "busybox"} for n in range(len(init))]
        status["initContainerStatuses"] = [
            {
                "name": f"i{n}",
                "state": {"terminated": {"startedAt": stamp(a), "finishedAt": stamp(b)}},
            }
            for n, (a, b) in enumerate(init)
        ]
    return from_wire(
        Pod,
        {
            "metadata": {"name": "web", "namespace": "ns", "uid": uid,
                         "creationTimestamp": stamp(T0)},
            "spec": spec,
            "status": status,
        },
    )  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def seen() -> list[tuple[float, float | None, bool]]:
    return []


@pytest.fixture
def tracker(clock: Clock, seen: list[tuple[float, float | None, bool]]) -> PodStartupTracker:
    return PodStartupTracker(lambda *args: seen.append(args), clock)


def test_creation_to_running_on_watch_less_the_pulls(
    tracker: PodStartupTracker, clock: Clock, seen: list[tuple[float, float | None, bool]]
) -> None:
    tracker.observed_on_watch(api_pod())  # scheduled: no startTime yet
    clock.now = T0 + 1
    tracker.pull_started("u1")
    clock.now = T0 + 4
    tracker.pull_finished("u1")
    clock.now = T0 + 5
    tracker.observed_on_watch(api_pod(start_time=T0))  # written: not running yet
    tracker.status_updated(api_pod(running=True, start_time=T0))
    assert seen == []  # written running: the watch has not shown it yet
    clock.now = T0 + 6
    tracker.observed_on_watch(api_pod(running=True, start_time=T0))
    # total 6 s; the pulls 1-4 s left out: 1 s before, 2 s after
    assert seen == [(6.0, 3.0, True)]
    clock.now = T0 + 9
    tracker.observed_on_watch(api_pod(running=True, start_time=T0))
    assert len(seen) == 1  # once per pod


def test_a_pod_started_before_the_kubelet_is_never_tracked(
    tracker: PodStartupTracker, clock: Clock, seen: list[tuple[float, float | None, bool]]
) -> None:
    tracker.observed_on_watch(api_pod(start_time=T0))
    tracker.status_updated(api_pod(running=True, start_time=T0))
    tracker.observed_on_watch(api_pod(running=True, start_time=T0))
    assert seen == [] and len(tracker) == 0


def test_the_watch_before_the_status_write_does_not_count(
    tracker: PodStartupTracker, clock: Clock, seen: list[tuple[float, float | None, bool]]
) -> None:
    tracker.observed_on_watch(api_pod())
    clock.now = T0 + 2
    tracker.status_updated(api_pod(start_time=T0))  # written, not yet running
    tracker.observed_on_watch(api_pod(running=True, start_time=T0))
    assert seen == []


def test_stateful_pods_only_count_in_the_total(
    tracker: PodStartupTracker, clock: Clock, seen: list[tuple[float, float | None, bool]]
) -> None:
    pvc = [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]
    tracker.observed_on_watch(api_pod(volumes=pvc))
    clock.now = T0 + 3
    tracker.status_updated(api_pod(running=True, start_time=T0, volumes=pvc))
    tracker.observed_on_watch(api_pod(running=True, start_time=T0, volumes=pvc))
    assert seen == [(3.0, None, False)]


def test_only_the_first_network_pod_is_first(
    tracker: PodStartupTracker, clock: Clock, seen: list[tuple[float, float | None, bool]]
) -> None:
    for uid, host_network in (("h", True), ("a", False), ("b", False)):
        tracker.observed_on_watch(api_pod(uid=uid, host_network=host_network))
        tracker.status_updated(api_pod(uid=uid, running=True, start_time=T0))
        tracker.observed_on_watch(
            api_pod(uid=uid, running=True, start_time=T0, host_network=host_network)
        )
    assert [first for _, _, first in seen] == [False, True, False]


def test_init_containers_are_left_out_with_the_gap_after_the_pulls(
    tracker: PodStartupTracker, clock: Clock, seen: list[tuple[float, float | None, bool]]
) -> None:
    tracker.observed_on_watch(api_pod())
    clock.now = T0 + 1
    tracker.pull_started("u1")
    clock.now = T0 + 2
    tracker.pull_finished("u1")
    clock.now = T0 + 10
    running = api_pod(running=True, start_time=T0, init=[(T0 + 3, T0 + 5), (T0 + 5, T0 + 7)])
    tracker.status_updated(running)
    tracker.observed_on_watch(running)
    # 1 s before the pull, 1 s between the pull and the first init container, 3 s after
    assert seen == [(10.0, 5.0, True)]


def test_terminal_and_removed_pods_are_forgotten(tracker: PodStartupTracker) -> None:
    tracker.observed_on_watch(api_pod(uid="a"))
    tracker.observed_on_watch(api_pod(uid="b"))
    tracker.observed_on_watch(api_pod(uid="a", phase="Failed"))
    tracker.forget("b")
    assert len(tracker) == 0


def test_what_started_and_stateful_mean() -> None:
    assert not has_started(api_pod())
    assert has_started(api_pod(running=True))
    assert not is_stateful(api_pod(volumes=[{"name": "s", "emptyDir": {}}]))
    ephemeral_csi = {
        "name": "e",
        "csi": {"driver": "d", "volumeAttributes": {"csi.storage.k8s.io/ephemeral": "true"}},
    }
    assert not is_stateful(api_pod(volumes=[ephemeral_csi]))
    assert is_stateful(api_pod(volumes=[{"name": "h", "hostPath": {"path": "/x"}}]))
    assert is_stateful(api_pod(volumes=[{"name": "c", "csi": {"driver": "d"}}]))


def test_a_watch_event_ahead_of_the_write_answer_still_counts(
    tracker: PodStartupTracker, clock: Clock, seen: list[tuple[float, float | None, bool]]
) -> None:
    """The watch shows the running pod before the PATCH's answer is handled: recorded when
    the answer comes, with the watch's time."""
    tracker.observed_on_watch(api_pod())
    clock.now = T0 + 4
    tracker.observed_on_watch(api_pod(running=True, start_time=T0))
    assert seen == []
    clock.now = T0 + 5
    tracker.status_updated(api_pod(running=True, start_time=T0))
    assert seen == [(4.0, 4.0, True)]
    tracker.observed_on_watch(api_pod(running=True, start_time=T0))
    assert len(seen) == 1
