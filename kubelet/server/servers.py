"""The server nursery: the TLS port, the healthz port, the optional read-only port.

Each server is our own HTTP/1.1 + HTTP/2 server (h11 and h2; ``connection.py``) behind a
bounded accept loop (``accept.py``), serving an ASGI app. The servers share one view of
the process's free descriptors and leave a reserve of them to the rest of the kubelet
(``fdlimits.py``). Cancelling the nursery closes every server and connection.

Ports as configured (``port``, ``healthzPort`` on ``healthzBindAddress``,
``readOnlyPort``; 0 disables the latter two), or ephemeral ones for tests; the bound
addresses come back through ``task_status``.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import logging
import socket
import ssl
import time
from typing import TYPE_CHECKING

import attrs
import trio

from kubelet.boundedio import RunSync, in_thread
from kubelet.config import Options, features
from kubelet.metrics import KubeletMetrics
from kubelet.stats import HostStats, SummaryProvider
from kubelet.tracing import NO_TRACER, Tracer

from . import healthz
from .backend import KubeletBackend, ReviewClient
from .fdlimits import Descriptors
from .limits import Limits
from .looplag import LoopLag, watching_loop
from .memtrim import MemoryTrim
from .podresources import Assigned, Lister, serve_pod_resources
from .sdnotify import SystemdUnit, run_watchdog, send_ready

if TYPE_CHECKING:  # the HTTP servers' modules load when a port is served
    from kubelet.node.certificates import CertificateManager, CertKeyPair

    from .app import KubeletApp
    from .tlsreload import ServingTLS
    from .wire import ASGIApp

log = logging.getLogger(__name__)


@attrs.frozen
class Addresses:
    """Where the servers listen, as ``host:port`` ("" when that server is off)."""

    main: str = ""
    healthz: str = ""
    read_only: str = ""


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket (port 0: an ephemeral one)."""
    family = socket.AF_INET
    try:
        if ipaddress.ip_address(host).version == 6:
            family = socket.AF_INET6
    except ValueError:
        pass
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def serve_socket(
    app: ASGIApp,
    sock: socket.socket,
    ssl_context: ssl.SSLContext | None,
    limits: Limits | None = None,
    descriptors: Descriptors | None = None,
    name: str = "",
    memory: MemoryTrim | None = None,
) -> None:
    """Serve ``app`` on ``sock`` until cancelled (``name`` is how log lines call it)."""
    from .accept import AcceptLoop
    from .connection import ConnectionHandler

    descriptors = descriptors or Descriptors.for_process()
    limits = limits or Limits.for_descriptors(descriptors.limit())
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    handler = ConnectionHandler(app, ssl_context, limits)
    loop = AcceptLoop(
        listener,
        handler,
        name=name or _address(sock),
        max_connections=limits.max_connections,
        descriptors=descriptors,
        memory=memory,
        idle=handler.idle,
    )
    async with listener:
        await loop.run()


@attrs.frozen(kw_only=True)
class ServerParts:
    """What the kubelet's servers are made from (``agent`` builds it)."""

    backend: KubeletBackend
    options: Options
    reviews: ReviewClient | None = None
    """TokenReview/SubjectAccessReview through the API (webhook authn/authz need it)"""
    metrics: KubeletMetrics | None = None
    ephemeral_ports: bool = False
    """listen on ephemeral ports (tests), not the configured ones"""
    host: HostStats = attrs.field(factory=HostStats)
    stats: SummaryProvider | None = None
    limits: Limits | None = None
    """per listener; default: a share of the open-files limit"""
    descriptors: Descriptors | None = None
    """the process's descriptors; default: its own limit"""
    assigned: Assigned | None = None
    """what the resource managers gave and may give (pod-resources devices and
    ``cpu_ids``): the container manager; None: nothing"""
    serving: CertificateManager | None = None
    """serverTLSBootstrap's serving certificates, when on"""
    file_io: RunSync = in_thread
    """where the TLS files are read and parsed (a worker thread; fake-clock tests: inline)"""
    tracer: Tracer = NO_TRACER
    """server spans for the main and read-only ports"""
    unit: SystemdUnit = attrs.field(factory=SystemdUnit)
    """systemd's notification socket and watchdog: READY=1 once the servers listen, then
    watchdog pings while the health checks pass (not under systemd: nothing)"""


async def serve(
    parts: ServerParts,
    *,
    task_status: trio.TaskStatus[Addresses] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the kubelet's servers until cancelled.

    Raises ``auth.AuthConfigError`` at once when the configured webhook authentication
    or authorization has no ``reviews`` client, as upstream refuses to start.
    """
    backend, options, metrics = parts.backend, parts.options, parts.metrics
    config = options.config
    descriptors = parts.descriptors or Descriptors.for_process()
    limits = parts.limits or Limits.for_descriptors(descriptors.limit())
    memory = MemoryTrim()
    log_check = healthz.LogFlushCheck()
    checks = [
        healthz.NamedCheck("ping", healthz.ping),
        healthz.NamedCheck("log", log_check),
        healthz.NamedCheck(
            "syncloop",
            healthz.sync_loop_check(backend.sync_loop_last_iteration, config.sync_frequency),
        ),
    ]
    apps = _Apps(backend, options, checks, parts.reviews, metrics, parts.host, parts.stats)
    apps.tracer = parts.tracer
    listeners = _Listeners(parts.ephemeral_ports)
    lag = LoopLag(metrics.observe_loop_lag if metrics is not None else lambda seconds: None)
    async with watching_loop(lag), trio.open_nursery() as nursery:
        await nursery.start(log_check.run)
        lister = Lister(
            backend.desired_pods,
            backend.pod_by_name,
            get_enabled=options.features.enabled(features.KUBELET_POD_RESOURCES_GET),
            dynamic_enabled=options.features.enabled(
                features.KUBELET_POD_RESOURCES_DYNAMIC_RESOURCES
            ),
            assigned=parts.assigned,
            observer=metrics.observe_pod_resources if metrics is not None else None,
        )
        await nursery.start(serve_pod_resources, options.root_dir, lister)
        nursery.start_soon(memory.run)

        def serve_on(
            app: ASGIApp, sock: socket.socket, tls: ssl.SSLContext | None, name: str
        ) -> str:
            nursery.start_soon(serve_socket, app, sock, tls, limits, descriptors, name, memory)
            return _address(sock)

        addresses: dict[str, str] = {}
        if config.enable_server:
            main_app = apps.build(auth_required=True)
            context = await _main_tls(options, parts.serving, nursery, parts.file_io)
            sock = listeners.listen(config.address, config.port)
            addresses["main"] = serve_on(main_app, sock, context, "main")
            log.info("Starting to listen on %s (TLS)", addresses["main"])
        if config.healthz_port > 0:
            from .healthz import HealthzApp

            sock = listeners.listen(config.healthz_bind_address, config.healthz_port)
            addresses["healthz"] = serve_on(HealthzApp(), sock, None, "healthz")
        if config.read_only_port > 0:
            sock = listeners.listen(config.address, config.read_only_port)
            read_only = apps.build(auth_required=False)
            addresses["read_only"] = serve_on(read_only, sock, None, "read-only")
            log.info("Starting to listen read-only on %s", addresses["read_only"])
        await send_ready(parts.unit)
        if parts.unit.watchdog_interval > 0:
            nursery.start_soon(run_watchdog, parts.unit, checks)
        task_status.started(Addresses(**addresses))


class _Listeners:
    """The servers' listening sockets; when one cannot bind, those bound are closed."""

    def __init__(self, ephemeral_ports: bool) -> None:
        self._ephemeral = ephemeral_ports
        self._sockets: list[socket.socket] = []

    def listen(self, address: str, port: int) -> socket.socket:
        try:
            sock = bind(address, 0 if self._ephemeral else port)
        except OSError as exc:
            for s in self._sockets:
                s.close()
            if exc.errno == errno.EADDRINUSE:
                raise OSError(
                    exc.errno, f"listen tcp {address}:{port}: bind: address already in use"
                ) from exc
            raise
        self._sockets.append(sock)
        return sock


async def _main_tls(
    options: Options, serving: CertificateManager | None, nursery: trio.Nursery, io: RunSync
) -> ssl.SSLContext:
    """The main port's TLS, with its watchers in ``nursery``: the configured (or a
    self-signed) serving certificate, or the serving certificate manager's pairs; the
    client CA bundle. Raises when what is configured does not load, as upstream stops."""
    from .servingcert import serving_cert
    from .tlsprofile import tls_profile
    from .tlsreload import CA_BUNDLE_LIMIT, PAIR_FILE_LIMIT, ServingTLS, read_files, watch_files

    config = options.config
    ca_file = config.authentication.x509.client_ca_file
    try:
        profile = tls_profile(config)
    except ValueError as exc:
        raise OSError(str(exc)) from exc
    tls = ServingTLS(config.tls_min_version, ca_file, io, profile)
    if ca_file:
        try:
            ca = await io(lambda: read_files([ca_file], CA_BUNDLE_LIMIT))
            await tls.use_client_ca(ca[0])
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise OSError(f"unable to load client CA file {ca_file}: {exc}") from exc
        if options.features.enabled(features.RELOAD_KUBELET_CLIENT_CA_FILE):
            await nursery.start(
                functools.partial(watch_files, limit=CA_BUNDLE_LIMIT, run=io),
                f"client-ca-bundle::{ca_file}",
                [ca_file],
                lambda c: tls.use_client_ca(c[0]),
                ca,
            )
    if serving is not None:  # serverTLSBootstrap: new handshakes, new certificate
        updates = serving.subscribe()
        current = serving.current()
        if current is not None:
            await _serve_pair(tls, current)
        nursery.start_soon(_follow, tls, updates)
        return tls.front
    cert = await serving_cert(
        config.tls_cert_file, config.tls_private_key_file, options.cert_dir, options.node_name
    )
    files = [cert.cert_file, cert.key_file]
    try:
        loaded = await io(lambda: read_files(files, PAIR_FILE_LIMIT))
    except ValueError as exc:  # refused: too long, or not a regular file
        raise OSError(str(exc)) from exc
    await tls.use_pair(*loaded)
    configured = bool(config.tls_cert_file and config.tls_private_key_file)
    if configured and options.features.enabled(features.RELOAD_KUBELET_SERVER_CERTIFICATE_FILE):
        await nursery.start(
            functools.partial(watch_files, limit=PAIR_FILE_LIMIT, run=io),
            "kubelet-server-cert-files::{}::{}".format(*files),
            files,
            lambda c: tls.use_pair(*c),
            loaded,
        )
    return tls.front


async def _follow(tls: ServingTLS, updates: trio.MemoryReceiveChannel[CertKeyPair]) -> None:
    """Serve each pair the serving certificate manager obtains, from the next handshake."""
    async for pair in updates:
        await _serve_pair(tls, pair)


async def _serve_pair(tls: ServingTLS, pair: CertKeyPair) -> None:
    try:
        await tls.use_pair(pair.chain_pem, pair.key_pem)
    except (OSError, ssl.SSLError) as exc:
        log.error(
            "serving certificate %s not loaded, keeping the one before: %s", pair.cert_file, exc
        )
        return
    log.info("serving certificate loaded (serial %x)", pair.serial)


class _Apps:
    """The main and read-only servers' app: the same endpoints, with or without auth."""

    def __init__(
        self,
        backend: KubeletBackend,
        options: Options,
        checks: list[healthz.NamedCheck],
        reviews: ReviewClient | None,
        metrics: KubeletMetrics | None,
        host: HostStats,
        stats: SummaryProvider | None = None,
    ) -> None:
        self._backend = backend
        self._options = options
        self._checks = checks
        self._reviews = reviews
        self._metrics = metrics
        self._host = host
        from .zpages import HealthSLIs

        self._slis = HealthSLIs()
        self._started = time.time()
        self.tracer: Tracer = NO_TRACER
        config = options.config
        self._stats = stats or SummaryProvider(
            backend.runtime,
            backend.images,
            node_name=options.node_name,
            root_dir=options.root_dir,
            pod_logs_dir=config.pod_logs_dir,
            host=host,
        )

    def build(self, *, auth_required: bool) -> KubeletApp:
        from .app import KubeletApp
        from .auth import build_auth
        from .nodelogs import NodeLogs

        options = self._options
        config = options.config
        auth = None
        if auth_required:
            auth = build_auth(
                config,
                options.node_name,
                self._reviews,
                fine_grained=options.features.enabled(features.KUBELET_FINE_GRAINED_AUTHZ),
            )
        pages = {"flagz": features.COMPONENT_FLAGZ, "statusz": features.COMPONENT_STATUSZ}
        return KubeletApp(
            self._backend,
            config,
            options.node_name,
            self._stats,
            self._slis.wrap(self._checks),
            auth=auth,
            debugging=config.enable_debugging_handlers and auth_required,
            metrics=self._metrics,
            root_dir=options.root_dir,
            host=self._host,
            idle_timeout=config.streaming_connection_idle_timeout,
            extend_websockets=options.features.enabled(features.EXTEND_WEBSOCKETS_TO_KUBELET),
            checkpointing=auth_required and options.features.enabled(features.CONTAINER_CHECKPOINT),
            node_logs=NodeLogs(
                query_enabled=config.enable_system_log_query
                and options.features.enabled(features.NODE_LOG_QUERY)
            )
            if config.enable_system_log_handler
            else None,
            flags_given=options.flags_given,
            started=self._started,
            zpages=frozenset(
                page
                for page, gate in pages.items()
                if auth_required and options.features.enabled(gate)
            ),
            slis=self._slis,
            debug_flags=config.enable_debug_flags_handler,
            profiling=config.enable_profiling_handler,
            tracer=self.tracer,
        )
