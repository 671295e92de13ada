"""Back-off timing, test vectors BO-01..08, with a fake clock."""

from __future__ import annotations

import pytest

from kubelet.api import Container, Pod
from kubelet.cri import ContainerInfo, ContainerRunState, RuntimePodStatus
from kubelet.decisions import (
    IMAGE_PULL_INITIAL,
    IMAGE_PULL_MAX,
    Backoff,
    crash_loop_backoff,
    crash_loop_key,
    image_pull_key,
)
from kubelet.decisions.backoff import (
    CRASH_LOOP_INITIAL,
    CRASH_LOOP_MAX,
    REDUCED_CRASH_LOOP_INITIAL,
    REDUCED_CRASH_LOOP_MAX,
)
from kubelet.decisions.hash import hash_container
from kubelet.goformat import format_duration
from kubelet.testing import builders

START = 1_700_000_000.0  # wall-clock seconds: crash loops compare with container finish times


def vector(*ids: str) -> pytest.MarkDecorator:
    """Put the test-vector IDs into the test IDs."""
    return pytest.mark.parametrize("vid", ids)


class FakeClock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_pod() -> tuple[Pod, Container]:
    container = Container(name="app", image="busybox")
    pod = builders.make_pod(container, name="foo", namespace="ns")
    return pod, container


def exited_at(seconds: float) -> RuntimePodStatus:
    info = ContainerInfo(
        id="c1",
        name="app",
        state=ContainerRunState.EXITED,
        exit_code=1,
        finished_at=int(seconds * 1e9),
    )
    return RuntimePodStatus(uid="uid-1", containers=(info,))


def crash_loop(clock: FakeClock, backoff: Backoff, crashes: int) -> list[float]:
    """Crash immediately after every start; return how long each restart waited."""
    pod, container = make_pod()
    waits = []
    for _ in range(crashes):
        crashed = clock.now
        status = exited_at(crashed)
        while crash_loop_backoff(backoff, pod, container, status) is not None:
            clock.now += 1
        waits.append(clock.now - crashed)
    return waits


@vector("BO-01")
def test_bo01_first_exit_restarts_immediately(vid: str) -> None:
    clock = FakeClock()
    backoff = Backoff(CRASH_LOOP_INITIAL, CRASH_LOOP_MAX, clock)
    pod, container = make_pod()
    assert crash_loop_backoff(backoff, pod, container, exited_at(clock.now)) is None
    assert backoff.get(crash_loop_key(pod, container)) == 10


@vector("BO-02")
def test_bo02_successive_crashes_double_to_max(vid: str) -> None:
    clock = FakeClock()
    backoff = Backoff(CRASH_LOOP_INITIAL, CRASH_LOOP_MAX, clock)
    waits = crash_loop(clock, backoff, 9)
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300, 300]


@vector("BO-02")
def test_bo02_message_while_waiting(vid: str) -> None:
    clock = FakeClock()
    backoff = Backoff(CRASH_LOOP_INITIAL, CRASH_LOOP_MAX, clock)
    pod, container = make_pod()
    status = exited_at(clock.now)
    assert crash_loop_backoff(backoff, pod, container, status) is None
    clock.now += 3
    message = crash_loop_backoff(backoff, pod, container, status)
    assert message == "back-off 10s restarting failed container=app pod=foo_ns(uid-1)"


@vector("BO-02")
def test_bo02_message_at_max(vid: str) -> None:
    clock = FakeClock()
    backoff = Backoff(CRASH_LOOP_INITIAL, CRASH_LOOP_MAX, clock)
    crash_loop(clock, backoff, 7)
    pod, container = make_pod()
    message = crash_loop_backoff(backoff, pod, container, exited_at(clock.now))
    assert message is not None and message.startswith("back-off 5m0s restarting")


@vector("BO-03")
def test_bo03_long_run_resets_delay(vid: str) -> None:
    clock = FakeClock()
    backoff = Backoff(CRASH_LOOP_INITIAL, CRASH_LOOP_MAX, clock)
    crash_loop(clock, backoff, 5)  # waited 0, 10, 20, 40, 80: the next delay is 160 s
    pod, container = make_pod()
    key = crash_loop_key(pod, container)
    assert backoff.get(key) == 160
    clock.now += 2 * CRASH_LOOP_MAX + 1  # ran for more than 600 s, then crashed
    assert crash_loop_backoff(backoff, pod, container, exited_at(clock.now)) is None
    assert backoff.get(key) == 10


@vector("BO-04")
def test_bo04_gc_after_twice_max(vid: str) -> None:
    clock = FakeClock()
    backoff = Backoff(CRASH_LOOP_INITIAL, CRASH_LOOP_MAX, clock)
    backoff.next("a", clock.now)
    clock.now += 2 * CRASH_LOOP_MAX
    backoff.gc()
    assert "a" in backoff  # exactly 2×max: kept
    clock.now += 1
    backoff.gc()
    assert "a" not in backoff and len(backoff) == 0


@vector("BO-05")
def test_bo05_first_pull_failure(vid: str) -> None:
    clock = FakeClock(0.0)
    backoff = Backoff(IMAGE_PULL_INITIAL, IMAGE_PULL_MAX, clock)
    key = image_pull_key("uid-1", "busybox:latest")
    assert key == "uid-1_busybox:latest"
    assert not backoff.is_in_backoff_since_update(key, clock.now)  # ErrImagePull: try now
    backoff.next(key, clock.now)
    assert backoff.get(key) == 10


@vector("BO-06")
def test_bo06_sync_within_window(vid: str) -> None:
    clock = FakeClock(0.0)
    backoff = Backoff(IMAGE_PULL_INITIAL, IMAGE_PULL_MAX, clock)
    key = image_pull_key("uid-1", "busybox:latest")
    backoff.next(key, clock.now)
    clock.now = 9.9
    assert backoff.is_in_backoff_since_update(key, clock.now)  # ImagePullBackOff
    clock.now = 10.0
    assert not backoff.is_in_backoff_since_update(key, clock.now)


@vector("BO-07")
def test_bo07_pull_window_doubles_to_max(vid: str) -> None:
    clock = FakeClock(0.0)
    backoff = Backoff(IMAGE_PULL_INITIAL, IMAGE_PULL_MAX, clock)
    key = "uid_img"
    windows = []
    for _ in range(8):
        backoff.next(key, clock.now)
        windows.append(backoff.get(key))
        while backoff.is_in_backoff_since_update(key, clock.now):
            clock.now += 1
    assert windows == [10, 20, 40, 80, 160, 300, 300, 300]


@vector("BO-08")
def test_bo08_reduced_decay(vid: str) -> None:
    clock = FakeClock()
    backoff = Backoff(REDUCED_CRASH_LOOP_INITIAL, REDUCED_CRASH_LOOP_MAX, clock)
    waits = crash_loop(clock, backoff, 9)
    assert waits == [0, 1, 2, 4, 8, 16, 32, 60, 60]


def test_spec_change_gets_fresh_key() -> None:
    pod, container = make_pod()
    key = crash_loop_key(pod, container)
    assert key == f"foo_ns_uid-1_app_{hash_container(container)}"
    changed = Container(name="app", image="busybox:1.36")
    assert crash_loop_key(pod, changed) != key


def test_no_exited_instance_no_backoff() -> None:
    clock = FakeClock()
    backoff = Backoff(CRASH_LOOP_INITIAL, CRASH_LOOP_MAX, clock)
    pod, container = make_pod()
    assert crash_loop_backoff(backoff, pod, container, RuntimePodStatus(uid="uid-1")) is None
    assert len(backoff) == 0


def test_reset_and_unknown_keys() -> None:
    clock = FakeClock()
    backoff = Backoff(1, 10, clock)
    assert not backoff.is_in_backoff_since("x", clock.now)
    assert backoff.get("x") == 0
    backoff.next("x", clock.now)
    assert backoff.is_in_backoff_since("x", clock.now)
    backoff.reset("x")
    assert not backoff.is_in_backoff_since("x", clock.now)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (10, "10s"),
        (80, "1m20s"),
        (300, "5m0s"),
        (3600, "1h0m0s"),
        (1.5, "1.5s"),
        (0.5, "500ms"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
