"""The kubelet's HTTP endpoints as ASGI apps: the main (TLS) and read-only servers, /healthz.

Routes, as upstream's server.go: ``/healthz`` (checks ping, log, syncloop), ``/pods``,
``/stats/summary``, ``/metrics``, ``/metrics/probes``, ``/metrics/resource``,
``/metrics/cadvisor``, ``/spec/``;
with ``enableDebuggingHandlers`` also ``/containerLogs/{ns}/{pod}/{container}``,
``/configz``, ``/runningpods/``, ``/logs/`` (``nodelogs.py``) and the streams
``/exec``, ``/attach``, ``/portForward`` and ``/run`` (``streams.py``). With debugging
handlers off (and always on the read-only server) the debug paths answer 405 "Debug
endpoints are disabled.". The main
server authenticates and authorizes every request first (``auth.KubeletAuth``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from prometheus_client.registry import CollectorRegistry

from kubelet.api import to_wire
from kubelet.boundedio import RunSync, in_thread
from kubelet.config import KubeletConfiguration, encode
from kubelet.cri import CriError, api, labels
from kubelet.lazyinit import imported
from kubelet.logs import get_logger
from kubelet.metrics import KubeletMetrics, scrape, text_content_type
from kubelet.stats import HostStats, SummaryProvider, cgroup_figures
from kubelet.tracing import NO_TRACER, Tracer

from . import healthz, zpages
from .asgi import (
    NOT_FOUND,
    Receive,
    Request,
    Response,
    Scope,
    Send,
    StreamResponse,
    http_error,
    json_response,
    send_response,
    text,
)
from .auth import KubeletAuth
from .backend import KubeletBackend
from .checkpoint import PREFIX as CHECKPOINT_PREFIX
from .checkpoint import checkpoint
from .nodelogs import NodeLogs
from .streaming import DEFAULT_IDLE_TIMEOUT
from .zpages import HealthSLIs

log = get_logger(__name__)

DEBUG_PATHS = (
    "/run/", "/exec/", "/attach/", "/portForward/", "/containerLogs/", "/runningpods/",
    "/debug/pprof/", "/logs/",
)  # fmt: skip
"""Paths of the debugging handlers (405 when they are disabled)."""

STREAM_PATHS = ("/run/", "/exec/", "/attach/", "/portForward/")
GET_ONLY = ("/pods", "/runningpods/", "/containerLogs/", "/logs/")
METHODS = frozenset({"OPTIONS", "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT"})
LONG_RUNNING = frozenset({"exec", "attach", "portforward", "debug"})


def pod_list(pods: Sequence[Any]) -> dict[str, Any]:
    """A v1 PodList as upstream encodes it."""
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": list(pods)}


def _bucket(path: str) -> str:
    """upstream's metrics path bucket: the first segment, or ``metrics/<x>``."""
    parts = path.lstrip("/").split("/", 2)
    if parts[0] == "metrics" and len(parts) > 1:
        return f"metrics/{parts[1]}"
    return parts[0]


SERVER_SPAN = "KubeletAPI"
"""The name of the kubelet server's spans (upstream's handler operation)."""


@attrs.define
class KubeletApp:
    """One server's routes; ``auth`` None means no authentication (read-only server)."""

    backend: KubeletBackend
    config: KubeletConfiguration
    node_name: str
    stats: SummaryProvider
    checks: Sequence[healthz.NamedCheck]
    auth: KubeletAuth | None = None
    debugging: bool = False
    metrics: KubeletMetrics | None = None
    root_dir: str = "/var/lib/kubelet"
    host: HostStats = attrs.field(factory=HostStats)
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    """``streamingConnectionIdleTimeout`` for exec, attach and port-forward streams."""
    extend_websockets: bool = False
    """The ``ExtendWebSocketsToKubelet`` gate (streams.py)."""
    checkpointing: bool = False
    """``POST /checkpoint/…`` is served (ContainerCheckpoint; the main port only)."""
    node_logs: NodeLogs | None = None
    """``/logs/`` (enableSystemLogHandler); None: 405 "logs endpoint is disabled."."""
    flags_given: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    """The command line's flags, for ``/flagz``."""
    started: float = attrs.field(factory=time.time)
    zpages: frozenset[str] = frozenset()
    """Of "flagz", "statusz" (ComponentFlagz, ComponentStatusz; the main port only)."""
    slis: HealthSLIs | None = None
    debug_flags: bool = False
    """``PUT /debug/flags/v`` (enableDebugFlagsHandler, with the debugging handlers)."""
    profiling: bool = False
    """``/debug/pprof/`` (enableProfilingHandler, with the debugging handlers)."""
    tracer: Tracer = NO_TRACER
    """A server span per request ("KubeletAPI"; on the read-only port a new trace)."""
    metrics_io: RunSync = in_thread
    """Where a scrape's text is written (a worker thread; fake-clock tests: inline)."""

    @property
    def server_type(self) -> str:
        return "readonly" if self.auth is None else "readwrite"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan or websocket handling
        request = Request.from_scope(scope, receive)
        if self.tracer.enabled:
            with self.tracer.server_span(
                SERVER_SPAN,
                request.headers,
                {"http.request.method": request.method, "url.path": request.path},
                public=self.auth is None,
            ) as span:
                status = await self._serve(scope, request, receive, send)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_error(f"HTTP {status}")
        else:
            await self._serve(scope, request, receive, send)

    async def _serve(self, scope: Scope, request: Request, receive: Receive, send: Send) -> int:
        """Answer ``request``; its status (101: the connection carried a stream)."""
        started = time.monotonic()
        labels_ = self._metric_labels(request)
        if self.metrics is not None:
            self.metrics.http_requests.labels(*labels_).inc()
            self.metrics.http_inflight_requests.labels(*labels_).inc()
        try:
            response = await self._authorized(request)
            if response is not None:  # None: the connection carried a stream
                await send_response(response, receive, send)
        finally:
            if self.metrics is not None:
                self.metrics.http_inflight_requests.labels(*labels_).dec()
                self.metrics.http_requests_duration.labels(*labels_).observe(
                    time.monotonic() - started
                )
        log.v(3).info(
            "HTTP",
            verb=request.method,
            URI=request.path,
            latency=f"{time.monotonic() - started:.6f}s",
            userAgent=request.headers.get("user-agent", ""),
            srcIP=scope.get("client", ("", 0))[0] if scope.get("client") else "",
            resp=getattr(response, "status", 101),
        )
        return int(getattr(response, "status", 101))

    def _metric_labels(self, request: Request) -> tuple[str, str, str, str]:
        method = request.method if request.method in METHODS else "other"
        bucket = _bucket(request.path)
        return method, bucket, self.server_type, str(bucket in LONG_RUNNING).lower()

    async def _authorized(self, request: Request) -> Response | StreamResponse | None:
        if self.auth is not None:
            _, denial = await self.auth.check(
                request.method,
                request.path,
                request.peer_certificate,
                request.headers.get("authorization", ""),
            )
            if denial is not None:
                return text(denial.status, denial.body)
        return await self.route(request)

    async def route(self, request: Request) -> Response | StreamResponse | None:
        path = request.path
        if path == "/healthz":
            return healthz.healthz(self.checks, request)
        if path.startswith("/healthz/"):
            named = {c.name: c for c in self.checks}
            check = named.get(path.removeprefix("/healthz/"))
            return healthz.single(check) if check else http_error(404, NOT_FOUND)
        for prefix in GET_ONLY:
            if (path == prefix or path.startswith(prefix)) and request.method != "GET":
                return text(405, "Method Not Allowed", ("Allow", "GET"))
        if path == "/pods":
            return json_response(pod_list([to_wire(p) for p in self.backend.desired_pods()]))
        if path == "/stats/summary":
            only = request.param("only_cpu_and_memory") == "true"
            try:
                return json_response(await self.stats.summary(only))
            except CriError as exc:
                return http_error(500, f"Internal Error: failed to get summary stats: {exc}")
        if path == "/flagz" and "flagz" in self.zpages:
            return zpages.flagz(request, self.flags_given)
        if path == "/statusz" and "statusz" in self.zpages:
            return zpages.statusz(request, self.started)
        if path == "/metrics/slis" and self.slis is not None:
            sli_text = await scrape(self.slis.registry, self.metrics_io)
            return Response(200, sli_text, text_content_type())
        if path == "/debug/flags/v" and self.debugging and self.debug_flags:
            return zpages.set_verbosity_handler(request, await _body(request))
        if path.startswith("/metrics"):
            return await self._metrics(path)
        if path in ("/spec", "/spec/"):
            await imported("kubelet.server.machine")
            from .machine import machine_info

            return json_response(machine_info(self.host, self.root_dir))
        if path.startswith(CHECKPOINT_PREFIX) and self.checkpointing:
            return await checkpoint(self.backend, request, self.root_dir)
        if any(path.startswith(p) for p in DEBUG_PATHS) or path == "/configz":
            return await self._debug(request)
        return http_error(404, NOT_FOUND)

    async def _metrics(self, path: str) -> Response:
        registry: CollectorRegistry | None
        if path == "/metrics":
            registry = self.backend.registry
        elif path == "/metrics/probes":
            registry = self.backend.probe_registry or CollectorRegistry()
        elif path == "/metrics/resource":
            try:
                summary = await self.stats.summary(only_cpu_and_memory=True)
            except CriError as exc:
                log.error("resource metrics: cannot read stats", exc_info=exc)
                summary = None
            await imported("kubelet.server.resource")
            await imported("prometheus_client.exposition")
            from .resource import resource_metrics

            return Response(200, resource_metrics(summary), text_content_type())
        elif path == "/metrics/cadvisor":
            return await self._cadvisor()
        else:
            return http_error(404, NOT_FOUND)
        text = await scrape(registry, self.metrics_io)
        if path == "/metrics":
            await imported("kubelet.server.volumemetrics")
            from .volumemetrics import volume_stats_text

            text += volume_stats_text(await self.stats.claim_volume_rows())
        return Response(200, text, text_content_type())

    async def _cadvisor(self) -> Response:
        await imported("kubelet.server.cadvisor")
        await imported("prometheus_client.exposition")
        from .cadvisor import cadvisor_metrics

        try:
            summary: dict[str, Any] | None = await self.stats.summary()
        except CriError as exc:
            log.error("cadvisor metrics: cannot read stats", exc_info=exc)
            summary = None
        cores = os.cpu_count() or 0
        memory = self.host.memory_capacity() or 0
        try:
            figures = await cgroup_figures(
                self.stats.runtime, self.stats.host, self.stats.pods_root, self.stats.psi
            )
        except CriError as exc:
            log.error("cadvisor metrics: cannot list containers", exc_info=exc)
            figures = {}
        body = cadvisor_metrics(
            summary, cores, memory, self.root_dir, figures, self.stats.wall_clock()
        )
        return Response(200, body, text_content_type())

    async def _debug(self, request: Request) -> Response | StreamResponse | None:
        path = request.path
        if not self.debugging:
            if path == "/configz":
                return http_error(404, NOT_FOUND)
            return http_error(405, "Debug endpoints are disabled.")
        if path == "/configz":
            return json_response({"kubeletconfig": encode(self.config)})
        if path == "/runningpods/":
            return await self._running_pods()
        if path.startswith("/containerLogs/"):
            parts = path.removeprefix("/containerLogs/").split("/")
            if len(parts) != 3:
                return http_error(404, NOT_FOUND)
            await imported("kubelet.server.logs")
            from .logs import container_logs

            return await container_logs(self.backend, request, *parts)
        if any(path.startswith(p) for p in STREAM_PATHS):
            await imported("kubelet.server.streams")  # the stream ends, with the first stream
            from .streams import StreamRoutes

            routes = StreamRoutes(self.backend, self.idle_timeout, self.extend_websockets)
            return await routes.handle(request, request.scope or {"headers": []})
        if path.startswith("/logs/"):
            if self.node_logs is None:
                return text(405, "logs endpoint is disabled.")
            return await self.node_logs.handle(request)
        if path.startswith("/debug/pprof/") and self.profiling:
            await imported("kubelet.server.pprof")
            from .pprof import pprof

            return await pprof(request)
        return http_error(404, NOT_FOUND)

    async def _running_pods(self) -> Response:
        """Pods as the runtime runs them: ready sandboxes and running containers."""
        runtime = self.backend.runtime
        try:
            sandboxes = await runtime.list_pod_sandbox(state=api.SANDBOX_READY)
            containers = await runtime.list_containers(state=api.CONTAINER_RUNNING)
        except CriError as exc:
            return http_error(500, str(exc))
        pods: dict[str, dict[str, Any]] = {}
        for s in sandboxes:
            uid = s.labels.get(labels.POD_UID)
            if uid:
                pods[uid] = _runtime_pod(uid, s.labels, s.metadata.name, s.metadata.namespace)
        for c in containers:
            uid = c.labels.get(labels.POD_UID)
            if not uid:
                continue
            pod = pods.setdefault(uid, _runtime_pod(uid, c.labels, "", ""))
            pod["spec"]["containers"].append({"name": c.metadata.name, "image": c.image.image})
        return json_response(pod_list(list(pods.values())))


MAX_BODY = 64 * 1024


async def _body(request: Request) -> bytes:
    """A small request body (a PUT's value), at most :data:`MAX_BODY` bytes kept."""
    if request.receive is None:
        return b""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await request.receive()
        if message.get("type") != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= MAX_BODY:
            chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _runtime_pod(uid: str, item_labels: Any, name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": item_labels.get(labels.POD_NAME, name),
            "namespace": item_labels.get(labels.POD_NAMESPACE, namespace),
            "uid": uid,
            "creationTimestamp": None,
        },
        "spec": {"containers": []},
        "status": {},
    }
