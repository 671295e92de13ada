"""The prober manager: the probers nursery, the workers, the three result stores.

The lead wiring, in short::

    probers = ProberManager(runtime, registry=registry, wall_clock=clock, on_event=sink)
    await nursery.start(probers.run)
    probers.add_pod(pod)                      # every sync is fine: idempotent
    probers.update_pod_status(uid, status)    # after every PLEG / cache refresh
    probers.liveness_results.updates (and readiness_, startup_)   # for the syncLoop
    probers.probe_status(pod, status)         # started / ready container IDs for status
    probers.remove_pod(uid)                   # the pod is gone

Workers never call the runtime for status: they read the newest ``RuntimePodStatus``
the manager was given. Whether a container is started or ready follows upstream's
``UpdatePodStatus``; see ``is_started`` and ``is_ready``.

Clocks: timers use ``trio.current_time`` (the start-up jitter compares against the
Trio time the manager was built at); container ``startedAt`` comparisons use the
injectable ``wall_clock`` (epoch seconds), so FakeRuntime tests pass
``wall_clock=lambda: EPOCH + trio.current_time()``. Build the manager inside ``trio.run``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator

import attrs
import trio
from prometheus_client.registry import CollectorRegistry

from kubelet.api import Container, Pod, is_restartable_init_container
from kubelet.cri import ContainerInfo, ContainerRunState, RuntimePodStatus
from kubelet.events import EventRecorder, pod_ref
from kubelet.handlers import ExecRunner, HttpGetter

from .metrics import ProberMetrics
from .prober import ActionProber
from .probes import ContainerEventSink, Prober
from .results import UPDATES_CAPACITY, ProbeKind, Result, ResultsManager
from .worker import RESTART_GRACE, ProbeKey, ProbeWorker, probe_of

__all__ = ["ProbeStatus", "ProberManager", "WorkerSummary", "run_prober"]

log = logging.getLogger(__name__)

TERMINAL_PHASES = frozenset({"Failed", "Succeeded"})


@attrs.frozen
class ProbeStatus:
    """Container IDs the probes count as started / ready (for ``apply_probe_results``)."""

    started: frozenset[str] = frozenset()
    ready: frozenset[str] = frozenset()


@attrs.frozen
class WorkerSummary:
    """One worker as the debug console shows it."""

    pod: str
    uid: str
    container: str
    kind: str
    container_id: str
    last_result: str | None
    result_run: int
    on_hold: bool
    parked: bool
    ticks: int
    probes: int
    last_probe_at: float | None
    last_error: str | None


def probed_containers(pod: Pod) -> Iterator[tuple[Container, bool]]:
    """Regular containers and sidecars (restartable init containers): ``(spec, sidecar)``.
    Plain init containers are never probed."""
    for container in pod.spec.containers:
        yield container, False
    for container in pod.spec.init_containers:
        if is_restartable_init_container(container):
            yield container, True


def _spec_named(pod: Pod, name: str) -> Container | None:
    for container in (*pod.spec.containers, *pod.spec.init_containers):
        if container.name == name:
            return container
    return None


def _raw_id(container_id: str) -> str:
    return container_id.split("://", 1)[-1]


def _previously_started(pod: Pod, info: ContainerInfo) -> bool:
    """The API status (from before a kubelet restart) says this instance had started."""
    for status in (*pod.status.container_statuses, *pod.status.init_container_statuses):
        if status.name == info.name and status.started and _raw_id(status.container_id) == info.id:
            return True
    return False


def _ids(status: RuntimePodStatus) -> list[str]:
    return [c.id for c in status.containers]


def _verdict(result: Result | None) -> bool | None:
    if result is None or result is Result.UNKNOWN:
        return None
    return result is Result.SUCCESS


def _pod_is_ready(pod: Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


class ProberManager:
    """Owns every probe worker (one nursery) and the liveness/readiness/startup results.

    ``runtime`` runs exec probes (a ``RuntimeClient``); ``prober`` replaces the real
    probers altogether (tests). ``registry`` receives ``prober_probe_total`` (a private
    registry by default). ``on_event(pod, container, type, reason, message)`` receives
    "Liveness probe failed: ..." and the like. ``host_ip`` is probed for host-network
    pods, whose sandbox has no IP of its own.
    """

    def __init__(
        self,
        runtime: ExecRunner | None = None,
        *,
        registry: CollectorRegistry | None = None,
        wall_clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        prober: Prober | None = None,
        http: HttpGetter | None = None,
        on_event: ContainerEventSink | None = None,
        host_ip: str = "127.0.0.1",
        updates_capacity: int = UPDATES_CAPACITY,
    ) -> None:
        self.liveness_results = ResultsManager(ProbeKind.LIVENESS, capacity=updates_capacity)
        self.readiness_results = ResultsManager(ProbeKind.READINESS, capacity=updates_capacity)
        self.startup_results = ResultsManager(ProbeKind.STARTUP, capacity=updates_capacity)
        self.metrics = ProberMetrics(registry)
        self.wall_clock = wall_clock
        self.rng = rng if rng is not None else random.Random()
        self.http = http if http is not None else HttpGetter()
        """The GET client of HTTP probes; pass it to the lifecycle hooks too."""
        self.prober: Prober = prober if prober is not None else ActionProber(runtime, self.http)
        self.on_event = on_event
        self.host_ip = host_ip
        self.started_time = trio.current_time()
        self.started_wall = wall_clock()
        self.workers: dict[ProbeKey, ProbeWorker] = {}
        """Read-only outside this module (the debug console lists it)."""
        self._pod_workers: dict[str, dict[ProbeKey, ProbeWorker]] = {}
        """The same workers by pod UID: each pod sync looks at its own pod's only (not
        at every worker of the node, which made a minute's resyncs O(pods²))."""
        self._statuses: dict[str, RuntimePodStatus] = {}
        self._phases: dict[str, str] = {}
        self._terminating: set[str] = set()
        self._nursery: trio.Nursery | None = None

    # -- lifetime ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The probers nursery; returns only when cancelled (every worker ends with it)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self.workers.clear()
            self._pod_workers.clear()

    # -- pods ----------------------------------------------------------------------------------

    def add_pod(self, pod: Pod) -> None:
        """Start a worker for every probe of the pod's containers and sidecars that has
        none; existing workers get the newer pod object. Idempotent: upstream calls it on
        every sync. After ``stop_liveness_and_startup`` only readiness is (re)started."""
        if self._nursery is None:
            raise RuntimeError("ProberManager.run has not started")
        for container, sidecar in probed_containers(pod):
            for kind in (ProbeKind.STARTUP, ProbeKind.READINESS, ProbeKind.LIVENESS):
                if probe_of(container, kind) is None:
                    continue
                key = ProbeKey(pod.uid, container.name, kind)
                worker = self.workers.get(key)
                if worker is not None:
                    worker.update(pod, container)
                    continue
                if pod.uid in self._terminating and kind is not ProbeKind.READINESS:
                    continue
                worker = ProbeWorker(self, pod, container, kind, sidecar=sidecar)
                self.workers[key] = worker
                self._pod_workers.setdefault(pod.uid, {})[key] = worker
                self._nursery.start_soon(
                    worker.run, name=f"probe {kind.value} {pod.key}/{container.name}"
                )

    def update_pod(self, pod: Pod) -> None:
        """A changed spec: start new probes, stop removed ones, apply changed settings."""
        wanted = {
            ProbeKey(pod.uid, container.name, kind)
            for container, _ in probed_containers(pod)
            for kind in ProbeKind
            if probe_of(container, kind) is not None
        }
        for key, worker in list(self._of(pod.uid)):
            if key not in wanted:
                self._stop(key, worker)
        self.add_pod(pod)

    def stop_liveness_and_startup(self, uid: str) -> None:
        """The pod is terminating: readiness keeps probing (it can still mark the pod
        unready), liveness and startup must not kill anything any more."""
        self._terminating.add(uid)
        for key, worker in list(self._of(uid)):
            if key.kind is not ProbeKind.READINESS:
                self._stop(key, worker)

    def remove_pod(self, uid: str) -> None:
        """Stop every worker of the pod (at once, even mid-probe) and forget its status."""
        for key, worker in list(self._of(uid)):
            self._stop(key, worker)
        self._statuses.pop(uid, None)
        self._phases.pop(uid, None)
        self._terminating.discard(uid)

    def _of(self, uid: str) -> Iterable[tuple[ProbeKey, ProbeWorker]]:
        """The workers of pod ``uid``."""
        return self._pod_workers.get(uid, {}).items()

    def _forget(self, key: ProbeKey) -> None:
        del self.workers[key]
        of_pod = self._pod_workers[key.uid]
        del of_pod[key]
        if not of_pod:
            del self._pod_workers[key.uid]

    def _stop(self, key: ProbeKey, worker: ProbeWorker) -> None:
        self._forget(key)
        worker.stop()

    def update_pod_status(
        self, uid: str, status: RuntimePodStatus, phase: str | None = None
    ) -> None:
        """The newest runtime view of a pod (after every PLEG / cache refresh).

        ``phase``: the pod's phase as the kubelet computed it, when known; a terminal
        phase ends the pod's workers. Parked workers (on hold) rejoin their tickers. A
        readiness worker whose container got a new running instance, or started
        running, probes at once.
        """
        previous = self._statuses.get(uid)
        self._statuses[uid] = status
        if phase is not None:
            self._phases[uid] = phase
        for key, worker in self._of(uid):
            worker.poke()
            if key.kind is not ProbeKind.READINESS:
                continue
            now = status.current(key.container)
            if now is None or now.state is not ContainerRunState.RUNNING:
                continue
            before = previous.current(key.container) if previous is not None else None
            if before is None or before.id != now.id or before.state is not now.state:
                worker.trigger()

    def trigger_readiness(self, uid: str, container: str) -> bool:
        """Run the container's readiness probe now; False if it has no readiness worker."""
        worker = self.workers.get(ProbeKey(uid, container, ProbeKind.READINESS))
        if worker is None:
            return False
        worker.trigger()
        return True

    # -- what workers read (WorkerHost) ---------------------------------------------------------

    def results_for(self, kind: ProbeKind) -> ResultsManager:
        if kind is ProbeKind.LIVENESS:
            return self.liveness_results
        if kind is ProbeKind.READINESS:
            return self.readiness_results
        return self.startup_results

    def status_of(self, uid: str) -> RuntimePodStatus | None:
        return self._statuses.get(uid)

    def pod_terminal(self, uid: str) -> bool:
        return self._phases.get(uid) in TERMINAL_PHASES

    def pod_ip(self, pod: Pod, status: RuntimePodStatus) -> str:
        """The sandbox's IP; the node's for host-network pods (their sandbox has none)."""
        if status.ip:
            return status.ip
        return self.host_ip if pod.spec.host_network else ""

    def worker_done(self, worker: ProbeWorker) -> None:
        if self.workers.get(worker.key) is worker:
            self._forget(worker.key)

    # -- results for pod sync and status -----------------------------------------------------

    def readiness(self, container_id: str) -> bool | None:
        """The readiness probe's verdict on this instance; None before any verdict."""
        return _verdict(self.readiness_results.get(container_id))

    def started(self, container_id: str) -> bool | None:
        """The startup probe's verdict on this instance; None before any verdict."""
        return _verdict(self.startup_results.get(container_id))

    def liveness_failed(self, status: RuntimePodStatus) -> frozenset[str]:
        """The pod's instances whose liveness probe failed
        (``compute_pod_actions(liveness_failed=)``)."""
        return self.liveness_results.ids_with(Result.FAILURE, _ids(status))

    def startup_failed(self, status: RuntimePodStatus) -> frozenset[str]:
        return self.startup_results.ids_with(Result.FAILURE, _ids(status))

    def startup_succeeded(self, status: RuntimePodStatus) -> frozenset[str]:
        return self.startup_results.ids_with(Result.SUCCESS, _ids(status))

    def is_started(self, pod: Pod, info: ContainerInfo) -> bool:
        """Running, and its startup probe passed — or it has none, or the API status
        from before a kubelet restart says this very instance had started."""
        if info.state is not ContainerRunState.RUNNING:
            return False
        result = self.startup_results.get(info.id)
        if result is not None:
            return result is Result.SUCCESS
        if _previously_started(pod, info):
            return True
        return ProbeKey(pod.uid, info.name, ProbeKind.STARTUP) not in self.workers

    def is_ready(self, pod: Pod, info: ContainerInfo, *, trigger: bool = True) -> bool:
        """Started, running, and its readiness probe passed (or it has none).

        Not ready while a readiness worker has no Success yet — which also asks that
        worker to probe now (``trigger``). After a kubelet restart, a container that was
        running 10 s before the kubelet started and has no result yet stays ready, but
        only if the pod's Ready condition is True when it has a readiness probe.
        """
        if not self.is_started(pod, info):
            return False
        result = self.readiness_results.get(info.id)
        if result is Result.SUCCESS:
            return True
        worker = self.workers.get(ProbeKey(pod.uid, info.name, ProbeKind.READINESS))
        ready = worker is None
        if worker is not None and trigger:
            worker.trigger()
        if 0 < info.started_at / 1e9 < self.started_wall - RESTART_GRACE:
            if not ready and result is None:
                ready = True
            spec = _spec_named(pod, info.name)
            if spec is not None and spec.readiness_probe is not None and not _pod_is_ready(pod):
                ready = False
        return ready

    def probe_status(
        self, pod: Pod, status: RuntimePodStatus, *, trigger: bool = True
    ) -> ProbeStatus:
        """Started and ready instance IDs of the pod's containers and sidecars."""
        started: set[str] = set()
        ready: set[str] = set()
        for container, _ in probed_containers(pod):
            info = status.current(container.name)
            if info is None or not info.id:
                continue
            if self.is_started(pod, info):
                started.add(info.id)
                if self.is_ready(pod, info, trigger=trigger):
                    ready.add(info.id)
        return ProbeStatus(frozenset(started), frozenset(ready))

    # -- the console -------------------------------------------------------------------------

    def worker_summaries(self) -> list[WorkerSummary]:
        rows = []
        for key, worker in sorted(
            self.workers.items(), key=lambda kv: (kv[1].pod.key, kv[0].container, kv[0].kind.value)
        ):
            state = worker.state
            rows.append(
                WorkerSummary(
                    pod=worker.pod.key,
                    uid=key.uid,
                    container=key.container,
                    kind=key.kind.value,
                    container_id=state.container_id,
                    last_result=None if state.last_result is None else state.last_result.value,
                    result_run=state.result_run,
                    on_hold=state.on_hold,
                    parked=worker.parked,
                    ticks=worker.ticks,
                    probes=worker.probes,
                    last_probe_at=worker.last_probe_at,
                    last_error=worker.last_error,
                )
            )
        return rows


async def run_prober(
    runtime: ExecRunner,
    recorder: EventRecorder,
    host_ip: str,
    wall_clock: Callable[[], float],
    *,
    task_status: trio.TaskStatus[ProberManager] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The probers nursery: a ``ProberManager`` whose events go to ``recorder``."""

    def probe_event(pod: Pod, container: str, kind: str, reason: str, message: str) -> None:
        spec = _spec_named(pod, container)
        recorder.record(pod_ref(pod, spec), kind, reason, message)

    prober = ProberManager(runtime, wall_clock=wall_clock, on_event=probe_event, host_ip=host_ip)
    async with trio.open_nursery() as nursery:
        await nursery.start(prober.run)
        task_status.started(prober)
