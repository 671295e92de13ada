"""The root of the kubelet: builds the components, wires their channels, runs them.

    trio.run(main)
    └─ root nursery ─────── SIGTERM/SIGINT cancel it; pods keep running
       ├─ trio-asyncio loop  (grpclib's bridge, opened once here)
       └─ Kubelet.run
          ├─ pod workers nursery   one task per pod UID
          ├─ PodConfig             merge of the sources → ordered updates
          ├─ sources nursery       file source, URL source
          ├─ PLEG                  relist every second, refresh the pod cache
          └─ syncLoop              the one consumer of updates, PLEG events, timers

``Kubelet.run`` assumes a running trio-asyncio loop, so tests run the whole agent
in-process against FakeRuntime on a fake clock; ``main`` is the process entry point.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import httpx
import trio
import trio_asyncio
from prometheus_client import CollectorRegistry

from kubelet import process
from kubelet.api.client import NODES, ApiClient
from kubelet.api.errors import ApiError
from kubelet.api.kubeconfig import ClusterConnection, load_kubeconfig
from kubelet.api.node import Taint
from kubelet.api.pod import Pod
from kubelet.config import ConfigError, Options
from kubelet.cri import CriError, ImageClient, RuntimeClient, connect
from kubelet.debug.console import claim_socket_path, serve_console
from kubelet.decisions.backoff import IMAGE_PULL_INITIAL, IMAGE_PULL_MAX, Backoff, crash_loop_limits
from kubelet.decisions.security import apparmor_host_error
from kubelet.decisions.sysctls import SysctlAllowlist, kernel_version
from kubelet.env.lookup import ApiEnvLookup
from kubelet.env.services import ServiceStore, service_env
from kubelet.events.recorder import NORMAL, WARNING, EventRecorder, node_ref, pod_ref
from kubelet.events.sink import ApiEvents
from kubelet.metrics import KubeletMetrics
from kubelet.node.facts import FactGatherer
from kubelet.node.lease import ApiLeases, LeaseController
from kubelet.node.machine import MachineInfo, read_machine_info
from kubelet.node.registration import default_labels, initial_node, register
from kubelet.node.status import node_status
from kubelet.node.statusloop import NodeStatusReporter, now_rfc3339
from kubelet.pleg.cache import PodCache
from kubelet.pleg.generator import EVENT_CHANNEL_CAPACITY, Pleg, PodLifecycleEvent
from kubelet.pleg.view import RuntimeView, pod_from_runtime
from kubelet.pods.admission import AdmissionFacts, Rejection
from kubelet.pods.manager import PodManager
from kubelet.pods.mirror import MirrorClient
from kubelet.pods.syncer import ClusterLink, KubeletPodSyncer
from kubelet.pods.syncloop import Housekeeper, OrphanPod, SyncLoop
from kubelet.pods.workers import PodWorkers
from kubelet.prober.manager import ProberManager
from kubelet.runtime.credentials.apisecrets import ApiPullSecrets
from kubelet.runtime.credentials.node import NodeCredentials
from kubelet.runtime.credentials.pullrecords import FEATURE_GATE as ENSURE_SECRET_PULLED_IMAGES
from kubelet.runtime.credentials.pullrecords import pull_records
from kubelet.runtime.images import ImageManager
from kubelet.runtime.isolation import PodIsolation
from kubelet.runtime.logrotate import ContainerLogManager
from kubelet.runtime.podruntime import DnsSettings, PodRuntime
from kubelet.runtime.runtimeclass import RuntimeClasses
from kubelet.runtime.runtimeinfo import RuntimeInfo
from kubelet.runtime.userns import FEATURE_GATE as USERNS_GATE
from kubelet.runtime.userns import UserNamespaces
from kubelet.server.reviews import ApiReviews
from kubelet.server.serve import serve
from kubelet.sources.apiserver import ApiSource
from kubelet.sources.file import FileSource
from kubelet.sources.offloop import RunSync, in_thread
from kubelet.sources.podconfig import PodConfig, PodOperation
from kubelet.sources.url import URLSource
from kubelet.status.manager import StatusManager
from kubelet.volumes.dirs import DataDirError, setup_data_dirs
from kubelet.volumes.manager import VolumeManager
from kubelet.volumes.paths import pod_dir
from kubelet.volumes.tokens import ApiTokenSource

log = logging.getLogger("kubelet")

RUNTIME_WAIT_INITIAL = 0.1
RUNTIME_WAIT_MAX = 5.0


def memory_capacity(meminfo: str = "/proc/meminfo") -> int:
    """Node memory in bytes (MemTotal), for OOM score computation."""
    try:
        with open(meminfo) as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _RuntimeHousekeeper(Housekeeper):
    def __init__(
        self, view: RuntimeView, backoffs: Iterable[Backoff], mirrors: MirrorClient | None
    ) -> None:
        self._view = view
        self._backoffs = tuple(backoffs)
        self._mirrors = mirrors
        self._deleting: set[str] = set()
        self.nursery: trio.Nursery | None = None
        self.volumes: VolumeManager | None = None

    def orphan_pod_dirs(self, in_use: set[str]) -> None:
        if self.volumes is None:
            return
        for uid in self.volumes.pod_uids_on_disk() - in_use:
            if self.volumes.cleanup(uid):  # False: a mount stays, tried again next pass
                log.info("removed orphaned pod directory of %s", uid)

    def orphan_mirror(self, mirror: Pod) -> None:
        if self._mirrors is None or self.nursery is None or mirror.uid in self._deleting:
            return
        self._deleting.add(mirror.uid)
        log.info("deleting orphaned mirror pod %s", mirror.key)

        async def delete() -> None:
            assert self._mirrors is not None
            try:
                await self._mirrors.delete(mirror)
            finally:
                self._deleting.discard(mirror.uid)

        self.nursery.start_soon(delete)

    def tidy(self) -> None:
        for backoff in self._backoffs:
            backoff.gc()

    async def runtime_pods(self) -> Iterable[OrphanPod]:
        return [
            OrphanPod(uid, name, namespace)
            for uid, (namespace, name) in (await self._view.pod_identities()).items()
        ]

    def orphan_as_pod(self, orphan: OrphanPod) -> Pod:
        return pod_from_runtime(orphan.uid, orphan.namespace, orphan.name)


@attrs.define
class Components:
    """Everything the running agent is made of (the debug console and tests read it)."""

    runtime: RuntimeClient
    images: ImageClient
    view: RuntimeView
    cache: PodCache
    pleg: Pleg
    config: PodConfig
    pods: PodManager
    workers: PodWorkers
    syncer: KubeletPodSyncer
    syncloop: SyncLoop
    recorder: EventRecorder
    prober: ProberManager
    metrics: KubeletMetrics
    isolation: PodIsolation
    admission: Callable[[], AdmissionFacts]
    file_source: FileSource | None = None
    url_source: URLSource | None = None
    cluster: ClusterParts | None = None


@attrs.define
class ClusterParts:
    """What a kubelet joined to a cluster runs besides the pod machinery."""

    api: ApiClient
    heartbeat: ApiClient
    source: ApiSource
    status: StatusManager
    mirrors: MirrorClient
    lease: LeaseController
    reporter: NodeStatusReporter
    gatherer: FactGatherer
    services: ServiceStore
    node_uid: str | None = None


class Kubelet:
    """One kubelet. ``run`` serves until cancelled; it never tears pods down on exit."""

    def __init__(
        self,
        options: Options,
        *,
        wall_clock: Callable[[], float] = time.time,
        watch_files: bool = True,
        connection: ClusterConnection | None = None,
        api_transport: httpx.AsyncBaseTransport | None = None,
        machine: MachineInfo | None = None,
        node_ips: Sequence[str] | None = None,
        source_io: RunSync = in_thread,
    ) -> None:
        self.options = options
        self.wall_clock = wall_clock
        self.watch_files = watch_files
        self.source_io = source_io  # the static pod sources' blocking work (sources.offloop)
        self.connection = connection
        self.api_transport = api_transport
        self.machine = machine
        self.node_ips = node_ips
        self.runtime_name = ""
        self.components: Components | None = None
        self.ready = trio.Event()

    @contextlib.asynccontextmanager
    async def _runtime(self) -> AsyncIterator[tuple[RuntimeClient, ImageClient]]:
        """CRI clients for the configured endpoints, once the runtime answers."""
        cfg = self.options.config
        async with connect(
            cfg.container_runtime_endpoint,
            cfg.image_service_endpoint,
            request_timeout=cfg.runtime_request_timeout,
        ) as (runtime, images):
            await self._wait_for_runtime(runtime)
            yield runtime, images

    @contextlib.asynccontextmanager
    async def _api(self) -> AsyncIterator[ApiClient | None]:
        """The API client in cluster mode (a kubeconfig was given), else None."""
        if self.connection is None:
            yield None
            return
        cfg = self.options.config
        async with ApiClient.open(
            self.connection,
            qps=cfg.kube_api_qps,
            burst=cfg.kube_api_burst,
            transport=self.api_transport,
        ) as client:
            yield client

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with self._runtime() as (runtime, images), self._api() as api:
            parts = self._build(runtime, images, api)
            self.components = parts
            async with trio.open_nursery() as nursery:
                await nursery.start(parts.prober.run)
                await nursery.start(parts.workers.run)
                await nursery.start(parts.config.run)
                await nursery.start(parts.pleg.run)
                await nursery.start(parts.isolation.runtime_info.run, runtime)
                if parts.isolation.runtime_classes is not None:
                    nursery.start_soon(parts.isolation.runtime_classes.run)
                nursery.start_soon(parts.recorder.run)
                if parts.cluster is not None:
                    assert isinstance(parts.syncloop.housekeeper, _RuntimeHousekeeper)
                    parts.syncloop.housekeeper.nursery = nursery
                    await nursery.start(parts.cluster.status.run)
                    nursery.start_soon(parts.cluster.services.run)
                    nursery.start_soon(self._run_node, parts, parts.cluster)
                await nursery.start(self._run_sources, parts)
                await nursery.start(parts.syncloop.run)
                await nursery.start(self._run_servers, parts)
                rotation = ContainerLogManager(
                    runtime,
                    self.options.config.container_log_max_size,
                    self.options.config.container_log_max_files,
                    monitor_interval=self.options.config.container_log_monitor_interval,
                    max_workers=self.options.config.container_log_max_workers,
                )
                nursery.start_soon(rotation.run)
                parts.recorder.record(
                    node_ref(self.options.node_name), NORMAL, "Starting", "Starting kubelet."
                )
                log.info("kubelet %s started: node %s", self._version(), self.options.node_name)
                self.ready.set()
                task_status.started()

    async def _run_servers(
        self, parts: Components, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The server nursery: healthz, the main (TLS) and read-only servers, the console."""
        cfg = self.options.config
        async with trio.open_nursery() as nursery:
            if cfg.enable_server or cfg.healthz_port or cfg.read_only_port:
                reviews = ApiReviews(parts.cluster.api) if parts.cluster is not None else None
                await nursery.start(
                    functools.partial(
                        serve,
                        _Backend(parts),
                        self.options,
                        reviews=reviews,
                        metrics=parts.metrics,
                    )
                )
            if self.options.debug_console_socket:
                await nursery.start(
                    functools.partial(
                        serve_console,
                        self.options.debug_console_socket,
                        parts,
                        api=parts.cluster.api if parts.cluster is not None else None,
                    )
                )
            task_status.started()

    async def _run_node(self, parts: Components, cluster: ClusterParts) -> None:
        """The node nursery: the lease heartbeat, then registration and status reports."""
        async with trio.open_nursery() as nursery:
            await nursery.start(cluster.lease.run)
            if self.options.config.register_node:
                first = node_status(
                    None, await cluster.gatherer.gather(), now_rfc3339(self.wall_clock())
                )
                cfg = self.options.config
                labels = default_labels(
                    cluster.gatherer.hostname,
                    cluster.gatherer.machine.operating_system,
                    cluster.gatherer.machine.architecture,
                )
                node = await register(
                    cluster.api,
                    lambda: initial_node(
                        self.options.node_name,
                        labels={**labels, **self.options.node_labels},
                        taints=tuple(
                            Taint(key=t.key, value=t.value, effect=t.effect)
                            for t in cfg.register_with_taints
                        ),
                        provider_id=cfg.provider_id,
                        status=first,
                    ),
                    labels,
                )
            else:
                node = await self._wait_for_node(cluster)
            cluster.node_uid = str((node.get("metadata") or {}).get("uid") or "") or None
            cluster.reporter.seed(node)
            await nursery.start(cluster.reporter.run)

    async def _wait_for_node(self, cluster: ClusterParts) -> dict[str, Any]:
        """--register-node=false: someone else registers the node; wait until it exists."""
        delay = 0.1
        while True:
            try:
                return await cluster.api.get(NODES.path(name=self.options.node_name))
            except ApiError as exc:
                log.info("waiting for node %s to be registered: %s", self.options.node_name, exc)
            await trio.sleep(delay)
            delay = min(delay * 2, 7.0)

    async def run_once(self) -> int:
        """``--runonce``: sync the static pods until running or finished, print, return."""
        from kubelet.pods.runonce import run_once

        async with self._runtime() as (runtime, images):
            parts = self._build(runtime, images, None)
            await parts.isolation.runtime_info.refresh(runtime)
            pods = await self._static_pods_once(parts)
            if not pods:
                print("no static pods found", file=sys.stderr)
            async with trio.open_nursery() as nursery:
                await nursery.start(parts.prober.run)
                code = await run_once(parts.syncer, pods, admission=parts.admission)
                nursery.cancel_scope.cancel()
            return code

    async def _static_pods_once(self, parts: Components) -> list[Pod]:
        pods: list[Pod] = []
        if parts.file_source is not None:
            pods += await parts.file_source.scan() or []
        if parts.url_source is not None:
            sink = _CaptureSink()
            async with httpx.AsyncClient(timeout=parts.url_source.timeout) as client:
                await parts.url_source.poll(client, sink)
            pods += sink.pods
        return pods

    @staticmethod
    def _version() -> str:
        from kubelet.version import version_line

        return version_line()

    async def _wait_for_runtime(self, runtime: RuntimeClient) -> None:
        """Retry Version until the runtime answers; pods are never touched before."""
        delay = RUNTIME_WAIT_INITIAL
        while True:
            try:
                version = await runtime.version()
            except CriError as exc:
                log.warning("container runtime not ready (%s); retrying in %.1fs", exc, delay)
                await trio.sleep(delay)
                delay = min(delay * 2, RUNTIME_WAIT_MAX)
                continue
            self.runtime_name = version.runtime_name
            log.info(
                "container runtime %s %s (CRI %s)",
                version.runtime_name,
                version.runtime_version,
                version.runtime_api_version,
            )
            return

    def _build(
        self, runtime: RuntimeClient, images: ImageClient, api: ApiClient | None
    ) -> Components:
        cfg = self.options.config
        node = self.options.node_name
        view = RuntimeView(runtime)
        cache = PodCache(view.pod_status)
        events_send, events_recv = trio.open_memory_channel[PodLifecycleEvent](
            EVENT_CHANNEL_CAPACITY
        )
        pleg = Pleg(view, cache, events_send)
        # events have their own rate limit (eventRecordQPS / eventBurst), as upstream's
        # separate event client does, so they never slow status reports down
        events_api = (
            ApiEvents(api.with_limits(cfg.event_record_qps, cfg.event_burst))
            if api is not None
            else None
        )
        recorder = EventRecorder(node, events_api, wall_clock=self.wall_clock)
        crash_backoff = Backoff(
            *crash_loop_limits(
                self.options.features, cfg.crash_loop_back_off.max_container_restart_period
            ),
            self.wall_clock,
        )
        image_backoff = Backoff(IMAGE_PULL_INITIAL, IMAGE_PULL_MAX, trio.current_time)
        image_manager = ImageManager(
            images,
            image_backoff,
            serialize=cfg.serialize_image_pulls,
            max_parallel=cfg.max_parallel_image_pulls,
            recorder=recorder,
            secrets=ApiPullSecrets(api) if api is not None else None,
            records=pull_records(
                cfg,
                self.options.root_dir,
                self.wall_clock,
                enabled=self.options.features.enabled(ENSURE_SECRET_PULLED_IMAGES),
            ),
            node=NodeCredentials(self.options.root_dir, trio.current_time),
        )
        machine = self.machine or read_machine_info()
        setup_data_dirs(self.options.root_dir, cfg.pod_logs_dir)
        volume_manager = VolumeManager(
            self.options.root_dir,
            lookup=ApiEnvLookup(api) if api is not None else None,
            tokens=ApiTokenSource(api, self.wall_clock) if api is not None else None,
            node_allocatable={"cpu": str(machine.num_cores), "memory": str(machine.memory_bytes)},
        )
        gatherer_ips = self.node_ips if self.node_ips is not None else None
        runtime_info = RuntimeInfo()
        isolation = PodIsolation(
            runtime_info,
            RuntimeClasses(api) if api is not None else None,
            UserNamespaces(
                functools.partial(pod_dir, self.options.root_dir), volume_manager.pod_uids_on_disk
            ),
            user_namespaces_enabled=self.options.features.enabled(USERNS_GATE),
        )
        sysctl_allowlist = SysctlAllowlist.for_node(cfg.allowed_unsafe_sysctls, kernel_version())
        apparmor_error = apparmor_host_error()

        def admission() -> AdmissionFacts:
            return AdmissionFacts(
                max_pods=cfg.max_pods,
                sysctls=sysctl_allowlist,
                apparmor_error=apparmor_error,
                supplemental_groups_policy=runtime_info.features.supplemental_groups_policy,
                runtime_classes=api is not None,
            )

        def probe_event(pod: Pod, container: str, kind: str, reason: str, message: str) -> None:
            spec = next(
                (
                    c
                    for c in (*pod.spec.init_containers, *pod.spec.containers)
                    if c.name == container
                ),
                None,
            )
            recorder.record(pod_ref(pod, spec), kind, reason, message)

        prober = ProberManager(
            runtime,
            wall_clock=self.wall_clock,
            on_event=probe_event,
            host_ip=(gatherer_ips or ("127.0.0.1",))[0],
        )
        pod_runtime = PodRuntime(
            runtime,
            image_manager,
            crash_backoff,
            pod_logs_dir=cfg.pod_logs_dir,
            memory_capacity=machine.memory_bytes,
            cgroup_root=cfg.cgroup_root,
            recorder=recorder,
            root_dir=self.options.root_dir,
            http=prober.http,
            volumes=volume_manager,
            node_name=node,
            node_allocatable={
                "cpu": str(machine.num_cores),
                "memory": str(machine.memory_bytes),
            },
            env_lookup=ApiEnvLookup(api) if api is not None else None,
            dns=DnsSettings(
                cluster_dns=tuple(cfg.cluster_dns),
                cluster_domain=cfg.cluster_domain,
                resolv_conf=cfg.resolv_conf,
            ),
            isolation=isolation,
            seccomp_default=cfg.seccomp_default,
        )
        pods = PodManager()
        gatherer = FactGatherer(
            self.options, runtime, images, pleg.healthy, machine=machine, node_ips=self.node_ips
        )
        pod_runtime.dns.node_ips = tuple(gatherer.node_ips)
        cluster = None
        link = None
        services = ServiceStore(api) if api is not None else None
        if services is not None:
            pod_runtime.service_env = lambda pod: service_env(pod, services.services)
        if api is not None and services is not None:
            heartbeat = api.with_limits(
                -1, 0, timeout=httpx.Timeout(cfg.node_status_update_frequency)
            )
            status = StatusManager(api, mirror_for=pods.mirror_for)
            holder: list[ClusterParts] = []
            mirrors = MirrorClient(api, node, lambda: holder[0].node_uid if holder else None)
            cluster = ClusterParts(
                api=api,
                heartbeat=heartbeat,
                source=ApiSource(api, node),
                status=status,
                mirrors=mirrors,
                lease=LeaseController(
                    ApiLeases(heartbeat),
                    node,
                    duration=cfg.node_lease_duration_seconds,
                    node_uid=lambda: holder[0].node_uid if holder else None,
                    wall_clock=self.wall_clock,
                ),
                reporter=NodeStatusReporter(
                    heartbeat,
                    node,
                    gatherer.gather,
                    update_frequency=cfg.node_status_update_frequency,
                    report_frequency=cfg.node_status_report_frequency,
                    recorder=recorder,
                    wall_clock=self.wall_clock,
                ),
                gatherer=gatherer,
                services=services,
            )
            holder.append(cluster)
            link = ClusterLink(status=status, mirrors=mirrors)
        syncer = KubeletPodSyncer(
            cache,
            pod_runtime,
            pods=pods,
            host_ips=gatherer.node_ips,
            runtime_name=self.runtime_name or "containerd",
            wall_clock=self.wall_clock,
            cluster=link,
            prober=prober,
        )
        metrics = KubeletMetrics(
            node,
            runtime_pods=lambda: [s for u in cache.uids() if (s := cache.get(u)) is not None],
            desired_pods=pods.pods,
        )
        runtime.channel.observer = metrics.observe_runtime_operation
        if images.channel is not runtime.channel:
            images.channel.observer = metrics.observe_runtime_operation
        pleg.on_relist = metrics.observe_relist
        syncer.metrics = metrics
        pod_runtime.metrics = metrics
        pod_config = PodConfig()
        loop_ref: list[SyncLoop] = []
        workers = PodWorkers(syncer, on_result=lambda uid, r: loop_ref[0].on_result(uid, r))
        housekeeper = _RuntimeHousekeeper(
            view, (crash_backoff, image_backoff), cluster.mirrors if cluster else None
        )
        housekeeper.volumes = volume_manager
        syncloop = SyncLoop(
            updates=pod_config.updates,
            pleg_events=events_recv,
            pods=pods,
            workers=workers,
            housekeeper=housekeeper,
            sources_ready=pod_config.sources_ready,
            sync_frequency=cfg.sync_frequency,
            admission_facts=admission,
            on_reject=functools.partial(_reject, recorder, syncer),
            probe_updates=(
                prober.liveness_results.updates,
                prober.readiness_results.updates,
                prober.startup_results.updates,
            ),
        )
        loop_ref.append(syncloop)
        file_source = None
        if cfg.static_pod_path:
            file_source = FileSource(
                cfg.static_pod_path,
                node,
                check_frequency=cfg.file_check_frequency,
                watch=self.watch_files,
                run_sync=self.source_io,
            )
        url_source = None
        if cfg.static_pod_url:
            url_source = URLSource(
                cfg.static_pod_url,
                node,
                headers=cfg.static_pod_url_header,
                check_frequency=cfg.http_check_frequency,
                run_sync=self.source_io,
            )
        return Components(
            runtime=runtime,
            images=images,
            view=view,
            cache=cache,
            pleg=pleg,
            config=pod_config,
            pods=pods,
            workers=workers,
            syncer=syncer,
            syncloop=syncloop,
            recorder=recorder,
            prober=prober,
            metrics=metrics,
            isolation=isolation,
            admission=admission,
            file_source=file_source,
            url_source=url_source,
            cluster=cluster,
        )

    async def _run_sources(
        self, parts: Components, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The sources nursery. With no source at all, the kubelet is ready at once."""
        async with trio.open_nursery() as nursery:
            if parts.file_source is not None:
                await nursery.start(parts.file_source.run, parts.config)
            if parts.url_source is not None:
                await nursery.start(parts.url_source.run, parts.config)
            if parts.cluster is not None:
                await nursery.start(parts.cluster.source.run, parts.config)
            task_status.started()


def _reject(
    recorder: EventRecorder, syncer: KubeletPodSyncer, pod: Pod, rejection: Rejection
) -> None:
    """Upstream's ``rejectPod``: a Warning event with the reason, the pod reported Failed."""
    recorder.record(pod_ref(pod), WARNING, rejection.reason, rejection.message)
    syncer.reject(pod, rejection)


class _Backend:
    """The running kubelet as its HTTP server sees it (``KubeletBackend``)."""

    def __init__(self, parts: Components) -> None:
        self._parts = parts

    @property
    def runtime(self) -> RuntimeClient:
        return self._parts.runtime

    @property
    def images(self) -> ImageClient | None:
        return self._parts.images

    @property
    def registry(self) -> CollectorRegistry:
        return self._parts.metrics.registry

    @property
    def probe_registry(self) -> CollectorRegistry | None:
        return self._parts.prober.metrics.registry

    def desired_pods(self) -> Sequence[Pod]:
        parts = self._parts
        return [
            attrs.evolve(pod, status=parts.syncer.statuses.get(pod.uid, pod.status))
            for pod in parts.pods.pods()
        ]

    def pod_by_name(self, namespace: str, name: str) -> Pod | None:
        for pod in self._parts.pods.pods():
            if pod.metadata.namespace == namespace and pod.metadata.name == name:
                return pod
        return None

    def sync_loop_last_iteration(self) -> float | None:
        return self._parts.syncloop.last_iteration


class _CaptureSink:
    """An UpdateSink that keeps the last SET (run-once reads each source once)."""

    def __init__(self) -> None:
        self.pods: list[Pod] = []

    def register(self, source: str) -> None:
        pass

    async def update(
        self,
        source: str,
        op: PodOperation,
        pods: Sequence[Pod],
        *,
        origins: Mapping[str, str] | None = None,
    ) -> None:
        self.pods = list(pods)


async def main(options: Options, connection: ClusterConnection | None = None) -> int:
    """Process entry point: signals, the trio-asyncio loop, the kubelet."""
    if options.run_once:
        async with trio_asyncio.open_loop():
            return await Kubelet(options).run_once()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio_asyncio.open_loop(), trio.open_nursery() as root:
            kubelet = Kubelet(options, connection=connection)
            root.start_soon(kubelet.run)
            async for signum in signals:
                log.info(
                    "received %s: stopping the kubelet (pods keep running)",
                    signal.Signals(signum).name,
                )
                root.cancel_scope.cancel()
                break
    return 0


def run(options: Options) -> int:
    """``kubelet`` command: serve until SIGTERM/SIGINT (exit 0), pods left running.

    With ``--kubeconfig`` the kubelet joins that cluster; a bad kubeconfig stops it here,
    with a message naming the file and field.
    """
    process.prepare(options)
    connection = None
    try:
        if options.debug_console_socket:
            claim_socket_path(options.debug_console_socket)
    except ConfigError as exc:
        _print_problems(exc)
        return 1
    if options.kubeconfig and not options.run_once:
        try:
            connection = load_kubeconfig(options.kubeconfig)
        except ConfigError as exc:
            _print_problems(exc)
            return 1
    try:
        setup_data_dirs(options.root_dir, options.config.pod_logs_dir)
    except DataDirError as exc:
        print(f"kubelet: {exc}", file=sys.stderr)
        return 1
    code = 1
    try:
        code = trio.run(main, options, connection)
    except* ConfigError as group:  # a setting found unusable only at start-up (a socket path)
        for error in _leaves(group):
            _print_problems(error)
    return code


def _print_problems(error: ConfigError) -> None:
    for problem in error.problems:
        print(f"kubelet: {problem}", file=sys.stderr)


def _leaves(group: BaseExceptionGroup[ConfigError]) -> list[ConfigError]:
    """The ConfigErrors in a (nested) exception group, in order."""
    out: list[ConfigError] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out += _leaves(exc)
        else:
            out.append(exc)
    return out
