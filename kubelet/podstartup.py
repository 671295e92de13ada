"""The pod startup SLI: creation → every container running, as seen on the API watch.

Upstream's pod startup latency tracker, fed from three places: the API source calls
``observed_on_watch`` for every pod it delivers (not static ones), the image manager calls
``pull_started``/``pull_finished`` around each pull it makes for a pod, and the status
manager calls ``status_updated`` with the pod the API answered after a status write.

A pod is tracked only if it had no ``status.startTime`` when first seen (scheduled after
this kubelet started). The first time the watch shows it with every container running,
after the kubelet wrote such a status (or just before the write's answer came back: the
watch event and the PATCH's answer race; upstream then waits for the pod's next event),
``kubelet_pod_start_total_duration_seconds`` gets ``now − creationTimestamp`` and,
unless the pod is stateful (a volume other than secret, configMap, downwardAPI, emptyDir,
projected, gitRepo, image, ephemeral or an ephemeral CSI volume),
``kubelet_pod_start_sli_duration_seconds`` gets that time less the span of its image
pulls and (non-restartable) init containers; the first such pod that is not hostNetwork
also sets ``kubelet_first_network_pod_start_sli_duration_seconds``. One
"Observed pod startup duration" line is logged. The init containers' span is read from
the statuses the kubelet wrote (their start and finish, to the second), where upstream
notes the start when it starts one.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

import attrs

from kubelet.api import Pod, is_restartable_init_container
from kubelet.goformat import parse_time
from kubelet.logs import get_logger, kobj

log = get_logger(__name__)

Observe = Callable[[float, float | None, bool], None]
"""``(total_seconds, sli_seconds or None for a stateful pod, first_network_pod)``."""

STATELESS_SOURCES = (
    "secret",
    "config_map",
    "downward_api",
    "empty_dir",
    "projected",
    "git_repo",
    "image",
    "ephemeral",
)
EPHEMERAL_CSI = "csi.storage.k8s.io/ephemeral"


@attrs.define
class _Startup:
    first_pull_started: float | None = None
    last_pull_finished: float | None = None
    first_init_started: float | None = None
    last_init_finished: float | None = None
    running_written: float | None = None
    """when a status with every container running was first written to the API"""
    seen_running: tuple[Pod, float] | None = None
    """the watch's running pod and when, if it came before the write's answer"""
    recorded: bool = False


def has_started(pod: Pod) -> bool:
    """Every container has run at least once: running, with a start time (the SLI's
    definition; a pod with no container statuses yet counts as started, as upstream)."""
    for status in pod.status.container_statuses:
        running = status.state.running if status.state is not None else None
        if running is None or not running.started_at:
            return False
    return True


def is_stateful(pod: Pod) -> bool:
    """A volume whose data outlives the pod (the SLI leaves such pods out)."""
    for volume in pod.spec.volumes:
        if any(getattr(volume, source) is not None for source in STATELESS_SOURCES):
            continue
        csi = volume.csi
        if csi is not None and (csi.get("volumeAttributes") or {}).get(EPHEMERAL_CSI) == "true":
            continue
        return True
    return False


def excluded_sli(created: float, now: float, state: _Startup) -> float:
    """``now − created`` less the pulls and init containers: the time before the first of
    them, any gap between the last pull and the first init container, and the time after
    the last of them to ``now``."""
    starts = [t for t in (state.first_pull_started, state.first_init_started) if t is not None]
    if not starts:
        return now - created
    sli = max(min(starts) - created, 0.0)
    pulled, init = state.last_pull_finished, state.first_init_started
    if pulled is not None and init is not None and init > pulled:
        sli += init - pulled
    ends = [t for t in (state.last_pull_finished, state.last_init_finished) if t is not None]
    if ends:
        sli += max(now - max(ends), 0.0)
    return sli


class PodStartupTracker:
    """Per pod: its pulls and init containers, when its running status was written,
    whether it was recorded."""

    def __init__(self, observe: Observe, wall_clock: Callable[[], float]) -> None:
        self._observe = observe
        self._wall_clock = wall_clock
        self._pods: dict[str, _Startup] = {}
        self._network_pod_seen = False

    def observed_on_watch(self, pod: Pod) -> None:
        """The API watch delivered ``pod`` (not static) just now."""
        if pod.status.phase in ("Failed", "Succeeded"):
            self._pods.pop(pod.uid, None)
            return
        state = self._pods.get(pod.uid)
        if state is None:
            if not pod.status.start_time:  # scheduled after this kubelet started
                self._pods[pod.uid] = _Startup()
            return
        if state.recorded or not has_started(pod):
            return
        if state.running_written is None:  # the watch event overtook the PATCH's answer
            state.seen_running = (pod, self._wall_clock())
            return
        self._record(pod, state, self._wall_clock())

    def _record(self, pod: Pod, state: _Startup, now: float) -> None:
        created = parse_time(pod.metadata.creation_timestamp)
        if created is None:
            return
        total = now - created
        sli = excluded_sli(created, now, state)
        stateful = is_stateful(pod)
        log.info(
            "Observed pod startup duration",
            pod=kobj(pod),
            podStartSLOduration=round(sli, 9),
            podStartE2EDuration=f"{total:.9f}s",
            isStatefulPod=stateful,
            podCreationTimestamp=pod.metadata.creation_timestamp,
            firstStartedPulling=_stamp(state.first_pull_started),
            lastFinishedPulling=_stamp(state.last_pull_finished),
            firstInitContainerStart=_stamp(state.first_init_started),
            lastInitContainerFinish=_stamp(state.last_init_finished),
            observedRunningTime=_stamp(state.running_written),
            watchObservedRunningTime=_stamp(now),
        )
        first_network = False
        if not stateful and not pod.spec.host_network and not self._network_pod_seen:
            first_network = self._network_pod_seen = True
        self._observe(total, None if stateful else sli, first_network)
        state.recorded = True

    def pull_started(self, uid: str) -> None:
        """The image manager begins a pull for the pod."""
        state = self._pods.get(uid)
        if state is not None and state.first_pull_started is None:
            state.first_pull_started = self._wall_clock()

    def pull_finished(self, uid: str) -> None:
        """A pull for the pod succeeded."""
        state = self._pods.get(uid)
        if state is not None and state.first_pull_started is not None:
            state.last_pull_finished = self._wall_clock()

    def status_updated(self, pod: Pod) -> None:
        """The status manager wrote the pod's status; ``pod`` is what the API returned."""
        state = self._pods.get(pod.uid)
        if state is None or state.recorded or state.running_written is not None:
            return
        self._note_init_containers(pod, state)
        if has_started(pod):
            state.running_written = self._wall_clock()
            if state.seen_running is not None:
                seen, when = state.seen_running
                self._record(seen, state, when)

    def _note_init_containers(self, pod: Pod, state: _Startup) -> None:
        sidecars = {c.name for c in pod.spec.init_containers if is_restartable_init_container(c)}
        for status in pod.status.init_container_statuses:
            if status.name in sidecars or status.state is None:
                continue
            done = status.state.terminated
            running = status.state.running
            began = done.started_at if done else running.started_at if running else None
            started = parse_time(began)
            if started is not None and (
                state.first_init_started is None or started < state.first_init_started
            ):
                state.first_init_started = started
            finished = parse_time(done.finished_at) if done else None
            if finished is not None and (
                state.last_init_finished is None or finished > state.last_init_finished
            ):
                state.last_init_finished = finished

    def forget(self, uid: str) -> None:
        """The pod left the node."""
        self._pods.pop(uid, None)

    def __len__(self) -> int:
        return len(self._pods)


def _stamp(seconds: float | None) -> str:
    """As Go prints a time: its zero time when unset."""
    if seconds is None:
        return "0001-01-01 00:00:00 +0000 UTC"
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f +0000 UTC")
