"""The root of the kubelet: one nursery, and one entry per component started in it.

    trio.run(main)
    └─ root nursery ─────────── SIGTERM/SIGINT cancel it; pods keep running
       ├─ trio-asyncio loop     grpclib's bridge, opened once (in ``main``)
       └─ agent.run             the kubelet: its components, in the order started
          ├─ run_event_recorder    events: folding, spam limit, their own QPS
          ├─ run_pleg              relist every second, the pod cache, lifecycle events
          ├─ run_prober            one task per (container, probe kind)
          ├─ run_services          (cluster) Services, for containers' variables
          ├─ run_container_manager  the node's resources: pod cgroups, resource managers
          ├─ run_runtime           the pod driver: runtime features, RuntimeClasses, logs
          ├─ run_status_manager    (cluster) pod status → API
          ├─ run_node              (cluster) lease, registration, node status
          ├─ run_plugin_manager    plugins_registry: CSI drivers (and other plugin types)
          ├─ open_sources          PodConfig merge; file, URL and API sources
          ├─ run_pod_lifecycle     pod workers, housekeeping, the syncLoop
          ├─ run_gc                dead containers every minute, unused images every 5
          ├─ run_eviction          pressure: reclaim, evict; conditions; OOM events
          ├─ serve                 healthz, main (TLS) and read-only servers
          └─ serve_console         (--debug-console-socket) the debug console

The whole live tree, task by task, is in docs/architecture.md ("The task tree"), and a test
compares it with a running kubelet. ``run`` assumes a running trio-asyncio loop, so
tests run the whole agent in-process against FakeRuntime on a fake clock.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio
import trio_asyncio

from kubelet import lockfile, process
from kubelet.boundedio import RunSync, in_thread
from kubelet.cgroups import (
    CgroupFs,
    CgroupHost,
    PodCgroups,
    SystemdAccess,
    capacity_of,
    host_cgroup_fs,
    node_allocatable_root,
)
from kubelet.cm import CmParts, ContainerManager, NodeResources, run_container_manager
from kubelet.config import POD_READY_TO_START_CONTAINERS_CONDITION, ConfigError, Options, features
from kubelet.cri import ImageClient, RuntimeClient, connect, wait_until_answering
from kubelet.csi import CsiDrivers, CsiHandler, NodeInfoManager
from kubelet.env import ServiceStore, run_services
from kubelet.errors import FATAL_EXIT_CODE, FatalError
from kubelet.events import NORMAL, ApiEvents, EventRecorder, node_ref, run_event_recorder
from kubelet.eviction import (
    EvictionManager,
    EvictionParts,
    NodePressure,
    eviction_settings,
    run_eviction,
)
from kubelet.gc import (
    LEGACY_CONTAINER_LOGS_DIR,
    GarbageCollectors,
    GcParts,
    image_gc_policy,
    run_gc,
)
from kubelet.metrics import KubeletMetrics, PodGauges
from kubelet.node import (
    MachineInfo,
    NodeHandle,
    NodeIdentity,
    NodeParts,
    read_machine_info,
    run_node,
)
from kubelet.node.shutdown import KillRequest, PodTerminator, active_pods, kill_channel
from kubelet.pleg import PlegHandle, run_pleg
from kubelet.pluginmanager import PluginParts, run_plugin_manager
from kubelet.pods import (
    KubeletPodSyncer,
    LifecycleParts,
    NodeInfo,
    PodLifecycle,
    PodManager,
    PodWorkers,
    local_node,
    node_info_source,
    run_pod_lifecycle,
    working_pods,
)
from kubelet.prober import ProberManager, run_prober
from kubelet.runtime import PodRuntime, RuntimeParts, run_runtime
from kubelet.server import SystemdUnit
from kubelet.sources import PodConfig, open_sources
from kubelet.stats import (
    Cgroups,
    HostStats,
    SummaryProvider,
    SystemContainerNames,
    UsageReader,
    boot_time,
)
from kubelet.status import StatusManager, owned_conditions, run_status_manager
from kubelet.tracing import NO_TRACER, Tracer, TracingUnavailable, flushed_at_exit
from kubelet.tracing import start as start_tracing
from kubelet.version import version_line
from kubelet.volumes import DataDirError, csi_volume_stats, setup_data_dirs

if TYPE_CHECKING:  # cluster mode's and the servers' modules load when they are used
    import httpx

    from kubelet.api import ApiClient, ClusterConnection
    from kubelet.node.certificates import RotatingTransport
    from kubelet.server import Addresses

log = logging.getLogger("kubelet")


@attrs.frozen
class Host:
    """What the kubelet takes from the machine it runs on; tests replace each part."""

    wall_clock: Callable[[], float] = time.time
    watch_files: bool = True
    """inotify on the manifest directory (tests poll instead)"""
    source_io: RunSync = in_thread
    """where the sources' blocking reads run, and the pod driver's (``kubelet.boundedio``)"""
    volume_walks_in_threads: bool = True
    """volume usage walks in worker threads (tests on a fake clock: on the loop)"""
    connection: ClusterConnection | None = None
    """the API server (``--kubeconfig``, loaded); None: standalone"""
    api_transport: httpx.AsyncBaseTransport | None = None
    machine: MachineInfo | None = None
    """None: read from /proc and /sys"""
    node_ips: tuple[str, ...] | None = None
    """None: ``--node-ip``, else found from the hostname"""
    ephemeral_ports: bool = False
    """the servers listen on ports the kernel picks (tests)"""
    cgroup_fs: Callable[[], CgroupFs] = host_cgroup_fs
    """the cgroup hierarchies (tests: a tree in a temporary directory)"""
    cgroup_io: RunSync = in_thread
    """where cgroup writes run (tests on a fake clock: inline)"""
    systemd: SystemdAccess = attrs.field(factory=SystemdAccess)
    """the systemd cgroup driver's bus and systemd check (tests: a private bus)"""
    stats: HostStats = attrs.field(factory=HostStats)
    """where node usage is read (/proc, cgroups, statvfs; tests script them)"""
    notifier_cgroups: Path = Path("/")
    """the root under which the memory threshold notifiers arm (sys/fs/cgroup)"""
    kmsg: str | None = "/dev/kmsg"
    """the kernel log the OOM watcher reads (None: no watcher)"""
    proc: Path = Path("/proc")
    """where processes are read (``systemCgroups``, ``kubeletCgroups``; /proc/swaps)"""
    sys: Path = Path("/sys")
    """where the CPU manager reads the CPU and NUMA topology (tests: a fake tree)"""
    proc_sys: Path = Path("/proc/sys")
    """where the kernel tunables are checked and set (tests: a temporary tree)"""
    unit: SystemdUnit = attrs.field(factory=SystemdUnit)
    """systemd's NOTIFY_SOCKET and watchdog (tests: none, or a socket of their own)"""
    containers_log_dir: str = LEGACY_CONTAINER_LOGS_DIR
    """the legacy log symlinks: made at container start, swept by container GC (tests: a
    temporary directory)"""


@attrs.frozen
class Core:
    """What most components are built from: the settings, the host, the node and the
    clients, the desired pods, the node's pressure, metrics and events."""

    options: Options
    host: Host
    node: NodeIdentity
    machine: MachineInfo
    metrics: KubeletMetrics
    desired: PodManager
    pressure: NodePressure
    runtime: RuntimeClient
    images: ImageClient
    api: ApiClient | None
    recorder: EventRecorder
    csi: CsiDrivers = attrs.field(factory=CsiDrivers)
    """the registered CSI drivers: the plugin watcher adds them, volumes and stats use them"""
    tracer: Tracer = NO_TRACER
    """spans of pod syncs, CRI and API calls and served requests (``tracing``)"""

    @property
    def clock(self) -> Callable[[], float]:
        return self.host.wall_clock


@attrs.frozen
class PodInputs:
    """The components the pod lifecycle drives and reads."""

    config: PodConfig
    pleg: PlegHandle
    prober: ProberManager
    pod_runtime: PodRuntime
    status: StatusManager | None
    runtime_name: str


@attrs.frozen
class Components:
    """What the running kubelet is made of, as each entry handed it back (the debug
    console's ``components()`` and the tests read it)."""

    core: Core
    inputs: PodInputs
    lifecycle: PodLifecycle
    cm: ContainerManager
    """the container manager: the node's resources, pod cgroups, resource managers"""
    services: ServiceStore | None = None
    addresses: Addresses | None = None
    """where the servers listen (None: no server)"""
    collectors: GarbageCollectors | None = None
    eviction: EvictionManager | None = None

    @property
    def node(self) -> NodeIdentity:
        return self.core.node

    @property
    def runtime(self) -> RuntimeClient:
        return self.core.runtime

    @property
    def images(self) -> ImageClient:
        return self.core.images

    @property
    def metrics(self) -> KubeletMetrics:
        return self.core.metrics

    @property
    def recorder(self) -> EventRecorder:
        return self.core.recorder

    @property
    def pressure(self) -> NodePressure:
        return self.core.pressure

    @property
    def pleg(self) -> PlegHandle:
        return self.inputs.pleg

    @property
    def prober(self) -> ProberManager:
        return self.inputs.prober

    @property
    def pod_runtime(self) -> PodRuntime:
        return self.inputs.pod_runtime

    @property
    def config(self) -> PodConfig:
        return self.inputs.config

    @property
    def pods(self) -> PodManager:
        return self.lifecycle.pods

    @property
    def cgroups(self) -> PodCgroups | None:
        return self.cm.cgroups

    @property
    def workers(self) -> PodWorkers:
        return self.lifecycle.workers

    @property
    def syncer(self) -> KubeletPodSyncer:
        return self.lifecycle.syncer


async def run(
    options: Options,
    host: Host = Host(),
    *,
    task_status: trio.TaskStatus[Components] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; the kubelet's own shutdown never tears pods down."""
    machine = host.machine or read_machine_info()
    node = NodeIdentity.detect(
        options.node_name, options.hostname_override, options.node_ip, machine, host.node_ips
    )
    eviction_settings(options)  # a bad threshold stops start-up before any pod is touched
    image_gc_policy(options)
    metrics = KubeletMetrics(node.name, wall_clock=host.wall_clock)
    clock, desired, pressure = host.wall_clock, PodManager(), NodePressure()
    terminator, kill_requests = kill_channel()
    async with (
        _open_tracing(options, node.name) as tracer,
        open_cri(options, metrics, tracer) as (runtime, images, runtime_name),
        open_api(options, host) as (api, rotating),
        trio.open_nursery() as root,
    ):
        _observe_components(metrics, options, api, tracer)
        recorder = await root.start(run_event_recorder, node.name, _events(options, api), clock)
        core = Core(
            *(options, host, node, machine, metrics, desired, pressure, runtime, images, api),
            recorder,
            tracer=tracer,
        )
        pleg = await root.start(run_pleg, runtime, metrics.observe_relist)
        prober = await root.start(run_prober, runtime, recorder, node.host_ip, clock)
        services = await root.start(run_services, api) if api else None
        local = local_node(options, node, machine)  # the Node it would register
        cm = await root.start(run_container_manager, _cm_parts(core, local))
        pod_runtime = await root.start(
            run_runtime, _runtime_parts(core, prober, services, cm, local)
        )
        status = await _start_status(root, api, desired, metrics, options) if api else None
        node_handle = await root.start(run_node, _node_parts(core, pleg, rotating, terminator, cm))
        await root.start(run_plugin_manager, _plugin_parts(core, cm))
        config = await root.start(
            functools.partial(open_sources, watch=metrics.pod_startup),
            *(options, api, host.watch_files, host.source_io),
        )
        inputs = PodInputs(config, pleg, prober, pod_runtime, status, runtime_name)
        lifecycle = await root.start(
            run_pod_lifecycle, _lifecycle_parts(core, inputs, node_handle, kill_requests, local)
        )
        _register_state_metrics(metrics, pleg, desired, lifecycle, cm)
        stats, collectors, eviction = await _start_node_protection(
            root, core, lifecycle, cm, pleg.between_relists
        )
        addresses = await _serve(root, core, node_handle, lifecycle, stats, prober, cm)
        parts = Components(core, inputs, lifecycle, cm, services, addresses, collectors, eviction)
        if options.debug_console_socket:
            await _start_console(root, options.debug_console_socket, parts, api)
        recorder.record(node_ref(node.name), NORMAL, "Starting", "Starting kubelet.")
        log.info("kubelet %s started: node %s", version_line(), node.name)
        task_status.started(parts)


def _events(options: Options, api: ApiClient | None) -> ApiEvents | None:
    """Where events go: the API server, at their own QPS (None: standalone)."""
    cfg = options.config
    return ApiEvents(api.with_limits(cfg.event_record_qps, cfg.event_burst)) if api else None


def _cm_parts(core: Core, local: NodeInfo) -> CmParts:
    """The container manager over the machine's capacity and the node's allocatable."""
    host, machine = core.host, core.machine

    def record(event: tuple[str, str, str]) -> None:
        core.recorder.record(node_ref(core.node.name), *event)

    capacity = capacity_of(machine.num_cores, machine.memory_bytes, machine.hugepages)
    return CmParts(
        options=core.options,
        resources=NodeResources(capacity=capacity, allocatable=dict(local.allocatable)),
        runtime=core.runtime,
        active=core.desired.active,
        record=record,
        host=CgroupHost(fs=host.cgroup_fs, io=host.cgroup_io, proc=host.proc, systemd=host.systemd),
        observe=core.metrics.observe_cgroup_manager,
        sys_root=str(host.sys),
        proc_sys=str(host.proc_sys),
        count_cpu_pinning=core.metrics.cpu_pinning,
        api=core.api,
        node_name=core.node.name,
        node_labels=local.labels,
        metrics=core.metrics,
        file_io=host.source_io,
    )


def _plugin_parts(core: Core, cm: ContainerManager) -> PluginParts:
    """The plugin watcher's handlers by plugin type (a type without one is refused): CSI
    drivers', and the container manager's (DRA drivers')."""
    node_info = NodeInfoManager(core.api, core.node.name) if core.api is not None else None
    return PluginParts(
        root_dir=core.options.root_dir,
        handlers={"CSIPlugin": CsiHandler(core.csi, node_info), **cm.plugin_handlers()},
        watch_files=core.host.watch_files,
        io=core.host.source_io,
    )


def _runtime_parts(
    core: Core,
    prober: ProberManager,
    services: ServiceStore | None,
    cm: ContainerManager,
    local: NodeInfo,
) -> RuntimeParts:
    return RuntimeParts(
        options=core.options,
        runtime=core.runtime,
        images=core.images,
        api=core.api,
        recorder=core.recorder,
        metrics=core.metrics,
        http=prober.http,
        node_name=core.node.name,
        node_ips=core.node.ips,
        node_labels=local.labels,
        cm=cm,
        service_env=services.env_for if services is not None else None,
        wall_clock=core.clock,
        containers_log_dir=core.host.containers_log_dir,
        log_io=core.host.source_io,
        csi=core.csi,
    )


def _node_parts(
    core: Core,
    pleg: PlegHandle,
    rotating: RotatingTransport | None,
    terminator: PodTerminator,
    cm: ContainerManager,
) -> NodeParts:
    desired, clock = core.desired, core.clock
    return NodeParts(
        options=core.options,
        node=core.node,
        api=core.api,
        runtime=core.runtime,
        images=core.images,
        machine=core.machine,
        pleg_health=pleg.healthy,
        recorder=core.recorder,
        wall_clock=clock,
        registry=core.metrics.registry,
        transport=rotating,
        active_pods=lambda: active_pods(desired.pods()),
        terminator=terminator,
        pressure=core.pressure,
        started=clock(),
        boot=boot_time(clock),
        cm=cm,
        volumes_in_use=core.csi.volumes_in_use,
    )


def _lifecycle_parts(
    core: Core,
    inputs: PodInputs,
    handle: NodeHandle,
    kill_requests: trio.MemoryReceiveChannel[KillRequest],
    local: NodeInfo,
) -> LifecycleParts:
    """The pod lifecycle, with admission reading the API's Node once registered
    (``local``, the Node this kubelet would register, before and standalone) and graceful
    shutdown's requests when it runs."""
    shutdown = handle.shutdown
    return LifecycleParts(
        options=core.options,
        node=core.node,
        desired=core.desired,
        config=inputs.config,
        pleg=inputs.pleg,
        prober=inputs.prober,
        pod_runtime=inputs.pod_runtime,
        api=core.api,
        status=inputs.status,
        recorder=core.recorder,
        metrics=core.metrics,
        runtime_name=inputs.runtime_name,
        wall_clock=core.clock,
        node_info=node_info_source(local, handle.api_node if handle.reporter is not None else None),
        pressure=core.pressure,
        tracer=core.tracer,
        kill_requests=kill_requests if shutdown is not None else None,
        shutdown_admission=shutdown.admit if shutdown is not None else None,
    )


async def _start_status(
    root: trio.Nursery,
    api: ApiClient,
    desired: PodManager,
    metrics: KubeletMetrics,
    options: Options,
) -> StatusManager:
    """The status manager, which tells the startup SLI and the sync duration of its writes."""
    ready_to_start = options.features.enabled(POD_READY_TO_START_CONTAINERS_CONDITION)
    manager: StatusManager = await root.start(
        functools.partial(
            run_status_manager,
            on_written=metrics.pod_startup.status_updated,
            on_synced=metrics.pod_status_sync_duration.observe,
            owned=owned_conditions(ready_to_start),
        ),
        api,
        desired.mirror_for,
        desired.get,
    )
    return manager


def _register_state_metrics(
    metrics: KubeletMetrics,
    pleg: PlegHandle,
    desired: PodManager,
    lifecycle: PodLifecycle,
    cm: ContainerManager,
) -> None:
    """What is read of the components when scraped: the pod counts (runtime, desired,
    active, mirror, working), the PLEG's discarded events; and the cgroup version."""
    metrics.watch_pleg_discards(pleg.discarded)
    if cm.cgroups is not None:
        metrics.cgroup_version.set(cm.cgroups.manager.fs.layout.version)
    metrics.registry.register(
        PodGauges(
            pleg.cache.statuses,
            desired.pods,
            lifecycle.evictor.active_pods,
            lambda: len(desired.mirrors()),
            lambda: working_pods(lifecycle.workers.workers.values(), desired.__contains__),
        )
    )


async def _start_console(
    nursery: trio.Nursery, path: str, parts: Components, api: object | None
) -> None:
    """The debug console, imported only when its socket is asked for."""
    from kubelet.debug import serve_console

    await nursery.start(serve_console, path, parts, api)


async def _serve(
    root: trio.Nursery,
    core: Core,
    node_handle: NodeHandle,
    lifecycle: PodLifecycle,
    stats: SummaryProvider,
    prober: ProberManager,
    cm: ContainerManager,
) -> Addresses | None:
    """The servers (healthz, main, read-only; the pod-resources socket, served with the
    ports off too); where they listen, or None when no port is served."""
    from kubelet.server import ApiReviews, RunningKubelet, ServerParts, serve

    options, host, api = core.options, core.host, core.api
    registries = core.metrics.registry, prober.metrics.registry
    addresses: Addresses = await root.start(
        serve,
        ServerParts(
            backend=RunningKubelet(core.runtime, core.images, *registries, lifecycle),
            options=options,
            reviews=ApiReviews(api) if api is not None else None,
            metrics=core.metrics,
            ephemeral_ports=host.ephemeral_ports,
            host=host.stats,
            stats=stats,
            serving=node_handle.serving,
            file_io=host.source_io,
            assigned=cm,
            tracer=core.tracer,
            unit=host.unit,
        ),
    )
    cfg = options.config
    if not (cfg.enable_server or cfg.healthz_port or cfg.read_only_port):
        return None
    return addresses


async def _start_node_protection(
    root: trio.Nursery,
    core: Core,
    lifecycle: PodLifecycle,
    cm: ContainerManager,
    between_relists: Callable[[], Awaitable[None]],
) -> tuple[SummaryProvider, GarbageCollectors, EvictionManager]:
    """Stats (the summary), garbage collection and eviction, which reads both."""
    options, host, node_name = core.options, core.host, core.node.name
    stats = _summary_provider(core)
    usage = UsageReader(stats)
    collectors = await root.start(
        run_gc,
        GcParts(
            options=options,
            node_name=node_name,
            runtime=core.runtime,
            images=core.images,
            pods=lifecycle.gc_view,
            sources_ready=lifecycle.syncloop.sources_seen,
            image_fs=usage.image_fs,
            recorder=core.recorder,
            wall_clock=host.wall_clock,
            containers_log_dir=host.containers_log_dir,
            on_image_removed=core.metrics.image_collected,
            before_remove=cm.post_stop,
        ),
    )
    eviction = await root.start(
        run_eviction,
        EvictionParts(
            options=options,
            node_name=node_name,
            summaries=usage,
            pods=lifecycle.evictor,
            reclaimer=collectors,
            recorder=core.recorder,
            pressure=core.pressure,
            disk_layout=usage.disk_layout,
            pod_name=_pod_names(core.desired),
            cgroups=Cgroups(host.notifier_cgroups),
            kmsg=host.kmsg,
            metrics=core.metrics,
            before_periodic_pass=between_relists,  # its stats read right after a relist
        ),
    )
    return stats, collectors, eviction


def _summary_provider(core: Core) -> SummaryProvider:
    """The stats summary: the CRI's figures, the host's, the system containers'."""
    options, host = core.options, core.host
    cfg = options.config
    return SummaryProvider(
        core.runtime,
        core.images,
        node_name=core.node.name,
        root_dir=options.root_dir,
        pod_logs_dir=cfg.pod_logs_dir,
        host=host.stats,
        wall_clock=host.wall_clock,
        volume_stats_period=cfg.volume_stats_agg_period,
        volume_walks_in_threads=host.volume_walks_in_threads,
        psi=options.features.enabled(features.KUBELET_PSI),
        sandbox_stats=options.features.enabled(features.POD_AND_CONTAINER_STATS_FROM_CRI),
        system_cgroups=SystemContainerNames(
            kubelet=cfg.kubelet_cgroups or None,
            runtime=options.runtime_cgroups or None,
            misc=cfg.system_cgroups or None,
        ),
        pods_root=node_allocatable_root(cfg.cgroup_root or "/", cfg.cgroups_per_qos),
        reported_volumes=functools.partial(
            csi_volume_stats,
            options.root_dir,
            core.csi,
            health=options.features.enabled(features.CSI_VOLUME_HEALTH),
        ),
    )


def _pod_names(desired: PodManager) -> Callable[[str], str | None]:
    """namespace/name of a desired pod by UID (the OOM watcher names the pod it hit)."""

    def name(uid: str) -> str | None:
        pod = desired.get(uid)
        return pod.key if pod is not None else None

    return name


@contextlib.asynccontextmanager
async def open_cri(
    options: Options, metrics: KubeletMetrics, tracer: Tracer = NO_TRACER
) -> AsyncIterator[tuple[RuntimeClient, ImageClient, str]]:
    """CRI clients for the configured endpoints, once the runtime answers (and its name)."""
    cfg = options.config
    async with connect(
        cfg.container_runtime_endpoint,
        cfg.image_service_endpoint,
        request_timeout=cfg.runtime_request_timeout,
        observer=metrics.observe_runtime_operation,
        tracer=tracer,
    ) as (runtime, images):
        version = await wait_until_answering(runtime)
        yield runtime, images, version.runtime_name or "containerd"


def _observe_components(
    metrics: KubeletMetrics, options: Options, api: ApiClient | None, tracer: Tracer
) -> None:
    """The component-base families: feature gates, and the API client's requests (and
    their spans)."""
    metrics.record_features(options.features.known())
    if api is not None:
        api.observer = metrics.observe_rest_request
        api.tracer = tracer


@contextlib.asynccontextmanager
async def _open_tracing(options: Options, node_name: str) -> AsyncIterator[Tracer]:
    """The tracer ``tracing`` asks for (none: spans cost nothing and the SDK is never
    imported); start-up stops when it is set and the SDK is not installed."""
    cfg = options.config.tracing
    if cfg is None:
        yield NO_TRACER
        return
    try:
        tracer = start_tracing(cfg.endpoint, cfg.sampling_rate_per_million, node_name)
    except TracingUnavailable as exc:
        raise ConfigError.single(options.config_file, "tracing", str(exc)) from None
    async with flushed_at_exit(tracer):
        yield tracer


@contextlib.asynccontextmanager
async def open_api(
    options: Options, host: Host
) -> AsyncIterator[tuple[ApiClient | None, RotatingTransport | None]]:
    """The API client in cluster mode (a kubeconfig was given, or obtained now through
    TLS bootstrap), else None; and, with ``rotateCertificates``, its rotating transport."""
    connection = host.connection
    if connection is None and options.bootstrap_kubeconfig:
        connection = await bootstrap(options, host.wall_clock)
    if connection is None:
        yield None, None
        return
    from kubelet.node.certificates import RotatingTransport, transport_for

    transport, rotating = host.api_transport, None
    rotates = options.config.rotate_certificates or connection.exec_auth is not None
    if transport is None and rotates and connection.ssl_context:
        pools = RotatingTransport(transport_for(connection))
        transport = rotating = pools
        if connection.exec_auth is not None:  # a new certificate from the plugin
            connection.exec_auth.certificate_listeners.append(lambda *_: pools.rotate())
    async with open_client(options, connection=connection, transport=transport) as client:
        yield client, rotating


async def bootstrap(options: Options, wall_clock: Callable[[], float]) -> ClusterConnection:
    """TLS bootstrap (upstream's LoadClientCert) when ``--kubeconfig`` has no valid client
    certificate, then ``--kubeconfig``; retried until it succeeds or the kubelet stops."""
    from kubelet.api import load_kubeconfig
    from kubelet.node.certificates import BootstrapError, load_client_cert

    try:
        await load_client_cert(
            options.kubeconfig,
            options.bootstrap_kubeconfig,
            options.cert_dir,
            options.node_name,
            now=wall_clock,
        )
    except BootstrapError as exc:
        raise ConfigError.single("--bootstrap-kubeconfig", "", str(exc)) from None
    return load_kubeconfig(options.kubeconfig)


@contextlib.asynccontextmanager
async def open_client(
    options: Options,
    *,
    connection: ClusterConnection | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[ApiClient]:
    """The kubelet's API client from its Options: ``--kubeconfig`` (loaded here unless
    ``connection`` is given; KubeconfigError names the bad field) and the configuration's
    kubeAPIQPS / kubeAPIBurst."""
    from kubelet.api import ApiClient, load_kubeconfig

    conn = connection or load_kubeconfig(options.kubeconfig)
    async with ApiClient.open(
        conn,
        qps=options.config.kube_api_qps,
        burst=options.config.kube_api_burst,
        transport=transport,
    ) as client:
        yield client


CONTAINERS_LOG_DIR_ENV = "KUBELET_CONTAINERS_LOG_DIR"
"""Where the legacy log links go instead of /var/log/containers: for kubelets on
FakeRuntime (benchmarks, tests) that share a host with a kubelet on the real runtime,
whose container GC would otherwise query the runtime about their links. Upstream has no
such setting; a production node leaves it unset."""


def process_host(environ: Mapping[str, str], connection: ClusterConnection | None = None) -> Host:
    """The real host, but for :data:`CONTAINERS_LOG_DIR_ENV`; systemd's notification
    socket and watchdog (a malformed ``WATCHDOG_USEC`` raises ConfigError)."""
    links = environ.get(CONTAINERS_LOG_DIR_ENV) or LEGACY_CONTAINER_LOGS_DIR
    unit = SystemdUnit.from_environ(environ)
    return Host(connection=connection, containers_log_dir=links, unit=unit)


def _take_lock(options: Options) -> int | None:
    """``--lock-file``: wait for the lock (held until exit); the inotify descriptor that
    reports a successor when ``--exit-on-lock-contention`` is set."""
    if not options.lock_file:
        return None
    log.info("acquiring file lock %s", options.lock_file)
    lockfile.acquire(options.lock_file)  # released by the process's exit
    if not options.exit_on_lock_contention:
        return None
    log.info("watching %s for lock contention (inotify)", options.lock_file)
    return lockfile.watch(options.lock_file)


async def _exit_on_contention(inotify_fd: int, scope: trio.CancelScope) -> None:
    mask = await lockfile.wait_for_contention(inotify_fd)
    log.info("lock file contention (inotify mask %#x): exiting to hand the lock over", mask)
    scope.cancel()


async def main(
    options: Options,
    connection: ClusterConnection | None = None,
    contention: int | None = None,
) -> int:
    """Process entry point: signals, the trio-asyncio loop, the kubelet; ``contention`` is
    the inotify descriptor of ``--exit-on-lock-contention`` (its event stops the kubelet)."""
    host = process_host(os.environ, connection)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio_asyncio.open_loop(), trio.open_nursery() as root:
            if contention is not None:
                root.start_soon(_exit_on_contention, contention, root.cancel_scope)
            root.start_soon(_run_then_freeze, options, host)
            async for signum in signals:
                log.info(
                    "received %s: stopping the kubelet (pods keep running)",
                    signal.Signals(signum).name,
                )
                root.cancel_scope.cancel()
                break
    return 0


async def _run_then_freeze(options: Options, host: Host) -> None:
    """``run``, with what its start-up left alive frozen out of the cyclic collector's
    walks (``process.freeze_long_lived``) once it has started."""
    async with trio.open_nursery() as nursery:
        await nursery.start(run, options, host)
        process.freeze_long_lived()


def start(options: Options) -> int:
    """``kubelet`` command: serve until SIGTERM/SIGINT (exit 0), pods left running; exit
    255 on a fatal condition (five minutes without a valid client certificate).

    With ``--kubeconfig`` the kubelet joins that cluster; a bad kubeconfig stops it here,
    with a message naming the file and field.
    """
    process.prepare(options)
    connection = None
    try:
        if options.debug_console_socket:
            from kubelet.debug import claim_socket_path

            claim_socket_path(options.debug_console_socket)
        if options.kubeconfig and not options.bootstrap_kubeconfig:
            from kubelet.api import load_kubeconfig

            connection = load_kubeconfig(options.kubeconfig)  # else: after TLS bootstrap
    except ConfigError as exc:
        _print_problems(exc)
        return 1
    try:
        setup_data_dirs(options.root_dir, options.config.pod_logs_dir)
        contention = _take_lock(options)
    except (DataDirError, lockfile.LockError) as exc:
        print(f"kubelet: {exc}", file=sys.stderr)
        return 1
    code = 1
    try:
        code = trio.run(main, options, connection, contention)
    except* ConfigError as group:  # a setting found unusable only at start-up (a socket path)
        for error in _leaves(group):
            _print_problems(error)
    except* FatalError:  # logged where it was raised
        code = FATAL_EXIT_CODE
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
