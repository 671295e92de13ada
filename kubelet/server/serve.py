"""The server nursery: the TLS port, the healthz port, the optional read-only port.

Each server is hypercorn's HTTP/1.1 + HTTP/2 protocol on a trio listener we own, so the
connection handler can hand the verified TLS client certificate to the request (a
context variable every request task of the connection inherits); hypercorn's own worker
does not expose it. Cancelling the nursery closes every server and connection.

Ports as configured (``port``, ``healthzPort`` on ``healthzBindAddress``,
``readOnlyPort``; 0 disables the latter two), or ephemeral ones for tests; the bound
addresses come back through ``task_status``.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import wrap_app

from kubelet.config import Options
from kubelet.metrics import KubeletMetrics

from . import healthz
from .app import HealthzApp, KubeletApp
from .asgi import Receive, Scope, Send, peer_certificate
from .auth import build_auth
from .backend import KubeletBackend, ReviewClient
from .certs import serving_cert
from .hoststats import Host
from .stats import SummaryProvider

log = logging.getLogger(__name__)

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TLS_VERSIONS = {
    "VersionTLS10": ssl.TLSVersion.TLSv1,
    "VersionTLS11": ssl.TLSVersion.TLSv1_1,
    "VersionTLS12": ssl.TLSVersion.TLSv1_2,
    "VersionTLS13": ssl.TLSVersion.TLSv1_3,
}


@attrs.frozen
class Addresses:
    """Where the servers listen, as ``host:port`` ("" when that server is off)."""

    main: str = ""
    healthz: str = ""
    read_only: str = ""


def tls_context(
    cert_file: str, key_file: str, client_ca_file: str, min_version: str
) -> ssl.SSLContext:
    """Serving TLS; client certificates requested (not required) when a CA is configured."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = TLS_VERSIONS.get(min_version, ssl.TLSVersion.TLSv1_2)
    context.load_cert_chain(cert_file, key_file)
    context.set_alpn_protocols(["h2", "http/1.1"])
    if client_ca_file:
        context.load_verify_locations(client_ca_file)
        context.verify_mode = ssl.CERT_OPTIONAL
    else:
        context.verify_mode = ssl.CERT_NONE
    return context


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


def hypercorn_config() -> HypercornConfig:
    config = HypercornConfig()
    config.errorlog = logging.getLogger("kubelet.server.http")
    config.accesslog = None
    config.include_server_header = False
    config.keep_alive_timeout = 90.0  # upstream's IdleTimeout
    return config


async def serve_socket(
    app: ASGIApp,
    sock: socket.socket,
    ssl_context: ssl.SSLContext | None,
    config: HypercornConfig | None = None,
) -> None:
    """Serve ``app`` on ``sock`` until cancelled."""
    config = config or hypercorn_config()
    wrapped = wrap_app(app, config.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]
    context = WorkerContext(None)
    listener: trio.abc.Listener[Any] = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    if ssl_context is not None:
        listener = trio.SSLListener(listener, ssl_context, https_compatible=True)

    async def connection(stream: Any) -> None:
        if isinstance(stream, trio.SSLStream):
            try:
                with trio.fail_after(config.ssl_handshake_timeout):
                    await stream.do_handshake()
            except (trio.BrokenResourceError, trio.TooSlowError) as exc:
                log.debug("TLS handshake failed: %r", exc)
                await trio.aclose_forcefully(stream)
                return
            peer_certificate.set(stream.getpeercert(binary_form=True))
        await TCPServer(wrapped, config, context, ConnectionState({}), stream).run()

    await trio.serve_listeners(connection, [listener])


async def serve(
    backend: KubeletBackend,
    options: Options,
    *,
    reviews: ReviewClient | None = None,
    metrics: KubeletMetrics | None = None,
    ephemeral_ports: bool = False,
    host: Host | None = None,
    task_status: trio.TaskStatus[Addresses] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the kubelet's servers until cancelled.

    Raises ``auth.AuthConfigError`` at once when the configured webhook authentication
    or authorization has no ``reviews`` client, as upstream refuses to start.
    """
    config = options.config
    host = host or Host()
    sockets: list[socket.socket] = []

    def listen(address: str, port: int) -> socket.socket:
        try:
            sock = bind(address, 0 if ephemeral_ports else port)
        except OSError as exc:
            for s in sockets:
                s.close()
            if exc.errno == errno.EADDRINUSE:
                raise OSError(
                    exc.errno, f"listen tcp {address}:{port}: bind: address already in use"
                ) from exc
            raise
        sockets.append(sock)
        return sock

    log_check = healthz.LogFlushCheck()
    checks = [
        healthz.NamedCheck("ping", healthz.ping),
        healthz.NamedCheck("log", log_check),
        healthz.NamedCheck(
            "syncloop",
            healthz.sync_loop_check(backend.sync_loop_last_iteration, config.sync_frequency),
        ),
    ]
    stats = SummaryProvider(
        backend.runtime,
        backend.images,
        node_name=options.node_name,
        root_dir=options.root_dir,
        pod_logs_dir=config.pod_logs_dir,
        host=host,
    )

    def app(auth_required: bool) -> KubeletApp:
        return KubeletApp(
            backend,
            config,
            options.node_name,
            stats,
            checks,
            auth=build_auth(config, options.node_name, reviews) if auth_required else None,
            debugging=config.enable_debugging_handlers and auth_required,
            metrics=metrics,
            root_dir=options.root_dir,
            host=host,
        )

    addresses: dict[str, str] = {}
    async with trio.open_nursery() as nursery:
        await nursery.start(log_check.run)
        if config.enable_server:
            main_app = app(auth_required=True)
            cert = serving_cert(
                config.tls_cert_file,
                config.tls_private_key_file,
                options.cert_dir,
                options.node_name,
            )
            context = tls_context(
                cert.cert_file,
                cert.key_file,
                config.authentication.x509.client_ca_file,
                config.tls_min_version,
            )
            sock = listen(config.address, config.port)
            addresses["main"] = _address(sock)
            nursery.start_soon(serve_socket, main_app, sock, context)
            log.info("Starting to listen on %s (TLS)", addresses["main"])
        if config.healthz_port > 0:
            sock = listen(config.healthz_bind_address, config.healthz_port)
            addresses["healthz"] = _address(sock)
            nursery.start_soon(serve_socket, HealthzApp(), sock, None)
        if config.read_only_port > 0:
            sock = listen(config.address, config.read_only_port)
            addresses["read_only"] = _address(sock)
            nursery.start_soon(serve_socket, app(auth_required=False), sock, None)
            log.info("Starting to listen read-only on %s", addresses["read_only"])
        task_status.started(Addresses(**addresses))
