"""The root of the kubelet: one nursery, and one entry per component started in it.

    trio.run(main)
    └─ root nursery ─────────── SIGTERM/SIGINT cancel it; pods keep running
       ├─ trio-asyncio loop     grpclib's bridge, opened once (in ``main``)
       └─ agent.run             the kubelet: its components, in the order started
          ├─ run_event_recorder    events: folding, spam limit, their own QPS
          ├─ run_pleg              relist every second, the pod cache, lifecycle events
          ├─ run_prober            one task per (container, probe kind)
          ├─ run_services          (cluster) Services, for containers' variables
          ├─ run_runtime           the pod driver: runtime features, RuntimeClasses, logs
          ├─ run_status_manager    (cluster) pod status → API
          ├─ run_node              (cluster) lease, registration, node status
          ├─ open_sources          PodConfig merge; file, URL and API sources
          ├─ run_pod_lifecycle     pod workers, housekeeping, the syncLoop
          ├─ serve                 healthz, main (TLS) and read-only servers
          └─ serve_console         (--debug-console-socket) the debug console

The whole live tree, task by task, is in the README ("The task tree"), and a test
compares it with a running kubelet. ``run`` assumes a running trio-asyncio loop, so
tests run the whole agent in-process against FakeRuntime on a fake clock.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable

import attrs
import httpx
import trio
import trio_asyncio

from kubelet import process
from kubelet.api.client import ApiClient
from kubelet.api.kubeconfig import ClusterConnection, load_kubeconfig
from kubelet.config import ConfigError, Options
from kubelet.cri import ImageClient, RuntimeClient, connect
from kubelet.cri.runtime import wait_until_answering
from kubelet.debug.console import claim_socket_path, serve_console
from kubelet.env.services import ServiceStore, run_services
from kubelet.events.recorder import NORMAL, EventRecorder, node_ref, run_event_recorder
from kubelet.events.sink import ApiEvents
from kubelet.metrics import KubeletMetrics, PodGauges
from kubelet.node.identity import NodeIdentity
from kubelet.node.machine import MachineInfo, read_machine_info
from kubelet.node.run import run_node
from kubelet.pleg import PlegHandle, run_pleg
from kubelet.pleg.cache import PodCache
from kubelet.pleg.view import RuntimeView
from kubelet.pods.manager import PodManager
from kubelet.pods.run import PodLifecycle, node_admission, run_pod_lifecycle
from kubelet.pods.runonce import run_pods_once
from kubelet.pods.syncer import KubeletPodSyncer
from kubelet.pods.workers import PodWorkers
from kubelet.prober.manager import ProberManager, run_prober
from kubelet.runtime.podruntime import PodRuntime
from kubelet.runtime.run import run_runtime
from kubelet.server.backend import RunningKubelet
from kubelet.server.reviews import ApiReviews
from kubelet.server.serve import serve
from kubelet.sources.offloop import RunSync, in_thread
from kubelet.sources.podconfig import PodConfig
from kubelet.sources.run import open_sources, read_static_pods
from kubelet.status.manager import run_status_manager
from kubelet.version import version_line
from kubelet.volumes.dirs import DataDirError, setup_data_dirs

log = logging.getLogger("kubelet")


@attrs.frozen
class Host:
    """What the kubelet takes from the machine it runs on; tests replace each part."""

    wall_clock: Callable[[], float] = time.time
    watch_files: bool = True
    """inotify on the manifest directory (tests poll instead)"""
    source_io: RunSync = in_thread
    """where the sources' blocking reads run (``sources.offloop``)"""
    connection: ClusterConnection | None = None
    """the API server (``--kubeconfig``, loaded); None: standalone"""
    api_transport: httpx.AsyncBaseTransport | None = None
    machine: MachineInfo | None = None
    """None: read from /proc and /sys"""
    node_ips: tuple[str, ...] | None = None
    """None: ``--node-ip``, else found from the hostname"""
    ephemeral_ports: bool = False
    """the servers listen on ports the kernel picks (tests)"""


@attrs.frozen
class Components:
    """What the running kubelet is made of, as each entry handed it back (the debug
    console's ``components()`` and the tests read it)."""

    node: NodeIdentity
    runtime: RuntimeClient
    images: ImageClient
    metrics: KubeletMetrics
    recorder: EventRecorder
    pleg: PlegHandle
    prober: ProberManager
    pod_runtime: PodRuntime
    config: PodConfig
    lifecycle: PodLifecycle
    services: ServiceStore | None = None

    @property
    def pods(self) -> PodManager:
        return self.lifecycle.pods

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
    cfg, clock = options.config, host.wall_clock
    metrics = KubeletMetrics(node.name)
    desired = PodManager()
    async with (
        open_cri(options, metrics) as (runtime, images, runtime_name),
        open_api(options, host) as api,
        trio.open_nursery() as root,
    ):
        sink = ApiEvents(api.with_limits(cfg.event_record_qps, cfg.event_burst)) if api else None
        recorder = await root.start(run_event_recorder, node.name, sink, clock)
        pleg = await root.start(run_pleg, runtime, metrics.observe_relist)
        prober = await root.start(run_prober, runtime, recorder, node.host_ip, clock)
        services = await root.start(run_services, api) if api else None
        pod_runtime = await root.start(
            run_runtime, options, runtime, images, api, recorder, metrics, prober.http, node.name,
            node.ips, machine.memory_bytes, machine.num_cores, services and services.env_for, clock,
        )  # fmt: skip
        status = (
            await root.start(run_status_manager, api, desired.mirror_for, desired.get)
            if api
            else None
        )
        if api is not None:
            await root.start(
                run_node, options, node, api, runtime, images, machine, pleg.healthy, recorder,
                clock,
            )  # fmt: skip
        config = await root.start(open_sources, options, api, host.watch_files, host.source_io)
        lifecycle = await root.start(
            run_pod_lifecycle, options, node, desired, config, pleg, prober, pod_runtime, api,
            status, recorder, metrics, runtime_name, clock,
        )  # fmt: skip
        metrics.registry.register(PodGauges(pleg.cache.statuses, desired.pods))
        parts = Components(
            node, runtime, images, metrics, recorder, pleg, prober, pod_runtime, config,
            lifecycle, services,
        )  # fmt: skip
        registries = metrics.registry, prober.metrics.registry
        backend = RunningKubelet(runtime, images, *registries, lifecycle)
        if cfg.enable_server or cfg.healthz_port or cfg.read_only_port:
            reviews = ApiReviews(api) if api is not None else None
            await root.start(serve, backend, options, reviews, metrics, host.ephemeral_ports)
        if options.debug_console_socket:
            await root.start(serve_console, options.debug_console_socket, parts, api)
        recorder.record(node_ref(node.name), NORMAL, "Starting", "Starting kubelet.")
        log.info("kubelet %s started: node %s", version_line(), node.name)
        task_status.started(parts)


async def run_once(options: Options, host: Host = Host()) -> int:
    """``--runonce``: sync the static pods until running or finished, print, return."""
    machine = host.machine or read_machine_info()
    node = NodeIdentity.detect(
        options.node_name, options.hostname_override, options.node_ip, machine, host.node_ips
    )
    clock, metrics = host.wall_clock, KubeletMetrics(node.name)
    async with open_cri(options, metrics) as (runtime, images, name), trio.open_nursery() as root:
        recorder = EventRecorder(node.name, wall_clock=clock)  # no API: events are logged
        prober = await root.start(run_prober, runtime, recorder, node.host_ip, clock)
        pod_runtime = await root.start(
            run_runtime, options, runtime, images, None, recorder, metrics, prober.http,
            node.name, node.ips, machine.memory_bytes, machine.num_cores, None, clock,
        )  # fmt: skip
        view = RuntimeView(runtime)
        syncer = KubeletPodSyncer(
            PodCache(view.pod_status), pod_runtime, host_ips=node.ips, runtime_name=name,
            wall_clock=clock, prober=prober, metrics=metrics,
        )  # fmt: skip
        pods = await read_static_pods(options, host.source_io)
        if not pods:
            print("no static pods found", file=sys.stderr)
        info = pod_runtime.isolation.runtime_info
        admission = node_admission(options, info, runtime_classes=False)
        code = await run_pods_once(syncer, pods, admission=admission)
        root.cancel_scope.cancel()
    return code


@contextlib.asynccontextmanager
async def open_cri(
    options: Options, metrics: KubeletMetrics
) -> AsyncIterator[tuple[RuntimeClient, ImageClient, str]]:
    """CRI clients for the configured endpoints, once the runtime answers (and its name)."""
    cfg = options.config
    async with connect(
        cfg.container_runtime_endpoint,
        cfg.image_service_endpoint,
        request_timeout=cfg.runtime_request_timeout,
        observer=metrics.observe_runtime_operation,
    ) as (runtime, images):
        version = await wait_until_answering(runtime)
        yield runtime, images, version.runtime_name or "containerd"


@contextlib.asynccontextmanager
async def open_api(options: Options, host: Host) -> AsyncIterator[ApiClient | None]:
    """The API client in cluster mode (a kubeconfig was given), else None."""
    if host.connection is None:
        yield None
        return
    async with open_client(
        options, connection=host.connection, transport=host.api_transport
    ) as client:
        yield client


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
    conn = connection or load_kubeconfig(options.kubeconfig)
    async with ApiClient.open(
        conn,
        qps=options.config.kube_api_qps,
        burst=options.config.kube_api_burst,
        transport=transport,
    ) as client:
        yield client


async def main(options: Options, connection: ClusterConnection | None = None) -> int:
    """Process entry point: signals, the trio-asyncio loop, the kubelet."""
    if options.run_once:
        async with trio_asyncio.open_loop():
            return await run_once(options)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio_asyncio.open_loop(), trio.open_nursery() as root:
            root.start_soon(run, options, Host(connection=connection))
            async for signum in signals:
                log.info(
                    "received %s: stopping the kubelet (pods keep running)",
                    signal.Signals(signum).name,
                )
                root.cancel_scope.cancel()
                break
    return 0


def start(options: Options) -> int:
    """``kubelet`` command: serve until SIGTERM/SIGINT (exit 0), pods left running.

    With ``--kubeconfig`` the kubelet joins that cluster; a bad kubeconfig stops it here,
    with a message naming the file and field.
    """
    process.prepare(options)
    connection = None
    try:
        if options.debug_console_socket:
            claim_socket_path(options.debug_console_socket)
        if options.kubeconfig and not options.run_once:
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
