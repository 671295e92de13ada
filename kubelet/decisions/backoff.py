"""Per-key exponential back-off, as client-go's ``flowcontrol.Backoff`` (without jitter).

The kubelet keeps two: crash loops (key per container spec, measured from the moment
the container finished) and image pulls (key per pod and image, measured from the last
failure). A key that has seen no failure for twice the maximum starts over at the
initial delay, so a container that ran fine for ten minutes is restarted quickly again.

The clock is injected. For crash loops it must be on the same timeline as container
``finished_at`` (wall-clock seconds since the epoch); for image pulls any clock works.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from kubelet.api import Container, Pod
from kubelet.config import (
    KUBELET_CRASH_LOOP_BACK_OFF_MAX,
    REDUCE_DEFAULT_CRASH_LOOP_BACK_OFF_DECAY,
    FeatureGates,
)
from kubelet.cri import ContainerRunState, RuntimePodStatus
from kubelet.goformat import format_duration

from .hash import hash_container

__all__ = [
    "CRASH_LOOP_INITIAL",
    "CRASH_LOOP_MAX",
    "IMAGE_PULL_INITIAL",
    "IMAGE_PULL_MAX",
    "REDUCED_CRASH_LOOP_INITIAL",
    "REDUCED_CRASH_LOOP_MAX",
    "Backoff",
    "Clock",
    "crash_loop_backoff",
    "crash_loop_key",
    "crash_loop_limits",
    "format_duration",
    "image_pull_key",
]

Clock = Callable[[], float]

CRASH_LOOP_INITIAL = 10.0
CRASH_LOOP_MAX = 300.0  # MaxContainerBackOff
REDUCED_CRASH_LOOP_INITIAL = 1.0  # ReduceDefaultCrashLoopBackOffDecay
REDUCED_CRASH_LOOP_MAX = 60.0
IMAGE_PULL_INITIAL = 10.0
IMAGE_PULL_MAX = 300.0  # MaxImageBackOff


def crash_loop_limits(
    features: FeatureGates, max_restart_period: float | None
) -> tuple[float, float]:
    """(initial, maximum) crash-loop back-off for the node's gates and configuration.

    ReduceDefaultCrashLoopBackOffDecay lowers the defaults to 1 s / 60 s; with
    KubeletCrashLoopBackOffMax a configured ``crashLoopBackOff.maxContainerRestartPeriod``
    is the maximum, and the initial delay never exceeds it (kubelet.go, newCrashLoopBackOff).
    """
    initial, maximum = CRASH_LOOP_INITIAL, CRASH_LOOP_MAX
    if features.enabled(REDUCE_DEFAULT_CRASH_LOOP_BACK_OFF_DECAY):
        initial, maximum = REDUCED_CRASH_LOOP_INITIAL, REDUCED_CRASH_LOOP_MAX
    if features.enabled(KUBELET_CRASH_LOOP_BACK_OFF_MAX) and max_restart_period is not None:
        maximum = max_restart_period
        initial = min(initial, maximum)
    return initial, maximum


@attrs.define
class _Entry:
    backoff: float
    last_update: float


class Backoff:
    """Delays per key: ``initial``, doubling on each ``next`` up to ``maximum``."""

    def __init__(self, initial: float, maximum: float, clock: Clock) -> None:
        self.initial = initial
        self.maximum = maximum
        self.clock = clock
        self._entries: dict[str, _Entry] = {}

    def _expired(self, event_time: float, entry: _Entry) -> bool:
        # Stable for twice the maximum: start again from the initial delay.
        return event_time - entry.last_update > 2 * self.maximum

    def get(self, key: str) -> float:
        """The current delay for ``key`` (0 when it has none)."""
        entry = self._entries.get(key)
        return entry.backoff if entry else 0.0

    def next(self, key: str, event_time: float) -> None:
        """Record a failure at ``event_time``: start at ``initial`` or double."""
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            entry = self._entries[key] = _Entry(self.initial, 0.0)
        else:
            entry.backoff = min(entry.backoff * 2, self.maximum)
        entry.last_update = self.clock()

    def is_in_backoff_since(self, key: str, event_time: float) -> bool:
        """True while less than the current delay has passed since ``event_time``."""
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            return False
        return self.clock() - event_time < entry.backoff

    def is_in_backoff_since_update(self, key: str, event_time: float) -> bool:
        """True while ``event_time`` is less than the current delay after the last failure."""
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            return False
        return event_time - entry.last_update < entry.backoff

    def remaining_since_update(self, key: str, now: float) -> float:
        """Seconds until ``is_in_backoff_since_update(key, now)`` turns false (0 if it is)."""
        entry = self._entries.get(key)
        if entry is None or self._expired(now, entry):
            return 0.0
        return max(entry.last_update + entry.backoff - now, 0.0)

    def reset(self, key: str) -> None:
        """Forget ``key`` (the next failure starts at the initial delay)."""
        self._entries.pop(key, None)

    def gc(self) -> None:
        """Drop keys not updated for twice the maximum; call it periodically."""
        now = self.clock()
        stale = [k for k, e in self._entries.items() if now - e.last_update > 2 * self.maximum]
        for key in stale:
            del self._entries[key]

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


def crash_loop_key(pod: Pod, container: Container) -> str:
    """``<pod>_<ns>_<uid>_<container>_<hash>``: a spec change starts a fresh back-off."""
    meta = pod.metadata
    return f"{meta.name}_{meta.namespace}_{meta.uid}_{container.name}_{hash_container(container)}"


def image_pull_key(pod_uid: str, image: str) -> str:
    """``<podUID>_<image>`` (upstream uses the image with its default tag applied)."""
    return f"{pod_uid}_{image}"


def crash_loop_backoff(
    backoff: Backoff, pod: Pod, container: Container, status: RuntimePodStatus
) -> str | None:
    """Upstream ``doBackOff``: the CrashLoopBackOff message while waiting, else None.

    Measures from the newest exited instance's finish time. When the container may be
    started now, the failure is recorded (the delay doubles for the next crash).
    """
    exited = next(
        (
            c
            for c in status.containers
            if c.name == container.name and c.state is ContainerRunState.EXITED
        ),
        None,
    )
    if exited is None:
        return None
    finished = exited.finished_at / 1e9
    key = crash_loop_key(pod, container)
    if backoff.is_in_backoff_since(key, finished):
        meta = pod.metadata
        return (
            f"back-off {format_duration(backoff.get(key))} restarting failed "
            f"container={container.name} pod={meta.name}_{meta.namespace}({meta.uid})"
        )
    backoff.next(key, finished)
    return None
