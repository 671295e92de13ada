"""The API client: one httpx.AsyncClient, the real API paths, client-go's retry rules.

What it keeps from client-go (rest.Request):
* every request, retries and watch starts included, takes a token from the client-side
  rate limiter (kubeAPIQPS / kubeAPIBurst);
* a 429, or a 5xx with ``Retry-After``, is retried after the server's wait, up to
  ``max_retries`` (10) times; a GET whose connection was reset is retried after 1 s;
* errors become the kubelet.api.errors tree, built from the Status body.

Paths are built by ``api_path`` from (group/version, resource, namespace, name,
subresource), exactly as the API server routes them. Methods take and return raw JSON
dicts; ``into=`` decodes the answer into an attrs class with the one converter, and
bodies may be attrs objects (encoded with ``to_wire``).

Watches stream one JSON event per line. ``watch`` calls a callback per event and ends
at EOF, on an ERROR event (raised as its ApiError), when the callback returns True, or
by cancellation; it never breaks out of httpx's line iterator, which would leave its
nested async generators unfinalised (ResourceWarnings), but cancels its own scope so
the generators unwind through the exception instead.
"""

from __future__ import annotations

import json
import logging
import platform
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar, overload

import attrs
import httpx
import trio

from kubelet.boundedio import InputRefused, RunSync, in_thread, loads_json
from kubelet.tracing import NO_TRACER, Tracer
from kubelet.version import KUBERNETES_VERSION, go_arch

from .converter import WireError, from_wire, to_wire
from .errors import (
    ApiError,
    ApiUnavailable,
    InvalidResponse,
    error_from_response,
    error_from_status,
)
from .execauth import ExecPluginError
from .kubeconfig import ClusterConnection
from .ratelimit import Limiter, client_limiter
from .resources import (
    EVENTS,
    EVENTS_V1,
    LEASES,
    NODES,
    PODS,
    ListPage,
    OnEvent,
    PatchType,
    Resource,
    WatchEvent,
    api_path,
    random_watch_timeout,
)
from .wellformed import MAX_TOKEN_LENGTH, describe, object_problem, shorten

__all__ = [
    "DEFAULT_TIMEOUT",
    "EVENTS",
    "EVENTS_V1",
    "LEASES",
    "NODES",
    "PODS",
    "ApiClient",
    "ListPage",
    "OnEvent",
    "PatchType",
    "Resource",
    "WatchEvent",
    "api_path",
    "random_watch_timeout",
    "user_agent",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
Params = Mapping[str, str | int | bool] | None

DEFAULT_TIMEOUT = httpx.Timeout(connect=30.0, read=60.0, write=60.0, pool=30.0)
"""client-go dials with a 30 s timeout; the API server ends a non-watch request after
60 s (its default --request-timeout), so waiting longer for an answer is pointless."""
WATCH_READ_GRACE = 30.0
"""A watch with ``timeoutSeconds`` gets a read timeout that much longer: the server
closes it by then, so silence beyond that means a dead connection (client-go relies on
HTTP/2 pings for this, which httpx does not send)."""
RETRY_GET_AFTER = 1.0
"""client-go's artificial Retry-After for a GET whose connection was reset."""
DEFAULT_MAX_RETRIES = 10
"""client-go's rest.Request maxRetries."""
MAX_BODY_BYTES = 64 << 20
"""The largest answer (or watch event) decoded: an object is at most 1.5 MiB in etcd, so
this is a list of tens of thousands of objects."""
OFFLOAD_BYTES = 256 << 10
"""Answers and watch events larger than this are decoded in a worker thread."""


def user_agent(commit: str = "") -> str:
    """Upstream's kubelet User-Agent: ``kubelet/v1.36.0 (linux/amd64) kubernetes/<commit>``."""
    machine = platform.machine().lower()
    version = KUBERNETES_VERSION.split("-", 1)[0]
    return f"kubelet/{version} ({sys.platform}/{go_arch(machine)}) " + (
        f"kubernetes/{commit[:7] or 'unknown'}"
    )


# -- the client -----------------------------------------------------------------------


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from a ``Retry-After`` header; like client-go, integers only."""
    value = headers.get("retry-after", "").strip()
    if value.isdigit():
        return float(int(value))
    return None


def _describe(exc: httpx.TransportError) -> str:
    """The transport error's text; httpx often wraps the telling one (a TLS verify
    failure) in an exception with an empty message, so walk the chain."""
    text = ""
    cause: BaseException | None = exc
    while cause is not None and not text:
        text = str(cause)
        cause = cause.__cause__ or cause.__context__
    text = text or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__}): {text}"
    return text


def _encode(body: object) -> bytes:
    data = to_wire(body) if attrs.has(type(body)) else body
    return json.dumps(data, separators=(",", ":")).encode()


async def _decoded(size: int, decode: Callable[[], T], run_sync: RunSync) -> T:
    """``decode()`` of ``size`` bytes: at once when small, through ``run_sync`` when large."""
    return await run_sync(decode) if size > OFFLOAD_BYTES else decode()


async def _read_bounded(response: httpx.Response, where: str) -> bytes:
    """The whole body, at most ``MAX_BODY_BYTES``: a peer that sends more is refused
    before the rest is read (``response.content`` is set, as ``aread`` would)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise InvalidResponse(
            response.status_code, "", f"{where}: an answer of {declared} bytes is too large"
        )
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise InvalidResponse(
                response.status_code,
                "",
                f"{where}: an answer of more than {MAX_BODY_BYTES} bytes is too large",
            )
        parts.append(chunk)
    body = b"".join(parts)
    response._content = body  # what aread() keeps: httpx reads it as response.content
    return body


def _split_lines(pending: bytearray, added: int) -> list[bytes]:
    """The complete lines at the start of ``pending``, taken out of it; the part after
    the last newline stays. Only the last ``added`` bytes are searched for a newline (the
    rest was searched as it came), and a long line is copied once: a 10 MiB event read in
    64 KiB chunks costs no more than reading it. Refuses a partial line past
    ``MAX_BODY_BYTES``."""
    end = pending.rfind(b"\n", max(0, len(pending) - added))
    if end < 0:
        if len(pending) > MAX_BODY_BYTES:
            raise InvalidResponse(0, "", f"watch: an event of more than {MAX_BODY_BYTES} bytes")
        return []
    with memoryview(pending) as view:
        head = bytes(view[:end])
    del pending[: end + 1]
    if len(pending) > MAX_BODY_BYTES:
        raise InvalidResponse(0, "", f"watch: an event of more than {MAX_BODY_BYTES} bytes")
    return head.split(b"\n")


def _decode_object(response: httpx.Response) -> dict[str, Any]:
    """The answer's JSON object; ``InvalidResponse`` for anything else (too large or too
    deep included). Blocking for a large answer: see ``_decoded``."""
    try:
        data = loads_json(response.content, max_bytes=MAX_BODY_BYTES) if response.content else {}
    except InputRefused as exc:
        where = f"{response.request.method} {shorten(response.request.url.path)}"
        raise InvalidResponse(
            response.status_code, "", f"{where}: the answer is not JSON ({exc})"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidResponse(
            response.status_code,
            "",
            f"{response.request.method} {response.request.url.path}: expected a JSON object",
        )
    return data


def _parse_event(line: str) -> WatchEvent:
    try:
        data = loads_json(line, max_bytes=MAX_BODY_BYTES)
    except InputRefused as exc:
        raise InvalidResponse(0, "", f"watch: not a JSON event ({exc}): {line[:200]!r}") from exc
    if not isinstance(data, dict):
        raise InvalidResponse(0, "", f"watch: not a JSON event: {line[:200]!r}")
    kind, obj = data.get("type"), data.get("object")
    if not isinstance(kind, str) or not isinstance(obj, dict):
        raise InvalidResponse(0, "", f"watch: an event needs a type and an object: {line[:200]!r}")
    return WatchEvent(kind, obj)


def _query(
    params: Mapping[str, str | int | bool],
) -> list[tuple[str, str | int | float | bool | None]]:
    """Sorted, as Go's url.Values.Encode writes them; empty values left out."""
    out: list[tuple[str, str | int | float | bool | None]] = []
    for key in sorted(params):
        value = params[key]
        if value is None or value == "":
            continue
        out.append((key, ("true" if value else "false") if isinstance(value, bool) else str(value)))
    return out


def make_http_client(
    connection: ClusterConnection,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    agent: str | None = None,
) -> httpx.AsyncClient:
    """The one httpx client for a cluster: HTTP/2 where the server offers it (ALPN),
    the kubeconfig's TLS context as ``verify=``, connections kept 90 s like client-go."""
    headers = {"Accept": "application/json", "User-Agent": agent or user_agent()}
    if connection.disable_compression:
        headers["Accept-Encoding"] = "identity"
    # Impersonate-Group may repeat: headers as a list of pairs
    all_headers = httpx.Headers([*headers.items(), *connection.impersonate])
    return httpx.AsyncClient(
        base_url=connection.server,
        verify=connection.ssl_context if connection.ssl_context is not None else True,
        http2=True,
        # a given transport makes its own connections (a proxy mount would bypass it)
        proxy=None if transport is not None else connection.proxy_url or None,
        timeout=timeout,
        limits=httpx.Limits(
            max_connections=100, max_keepalive_connections=20, keepalive_expiry=90.0
        ),
        headers=all_headers,
        transport=transport,
        follow_redirects=False,
    )


RequestObserver = Callable[[str, str, str, float], None]


class ApiClient:
    """Calls to one API server. Build it with ``ApiClient.open`` (or the agent's ``open_client``);
    ``with_limits`` makes a sibling sharing the connections with another rate limit."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        connection: ClusterConnection,
        *,
        limiter: Limiter,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        run_sync: RunSync = in_thread,
    ) -> None:
        self.http = http
        self.connection = connection
        self.limiter = limiter
        self.max_retries = max_retries
        self.timeout = timeout
        self.run_sync = run_sync
        """Where large answers are decoded (see :mod:`kubelet.boundedio`)."""
        self.observer: RequestObserver | None = None
        """Told of every request sent: (method, host, status code or ``<error>``,
        seconds) — the kubelet's rest_client_* metrics."""
        self.tracer: Tracer = NO_TRACER
        """A client span per request sent, its ``traceparent`` in the request's headers."""

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        connection: ClusterConnection,
        *,
        qps: float = 50,
        burst: int = 100,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        run_sync: RunSync = in_thread,
    ) -> AsyncIterator[ApiClient]:
        """A client for ``connection``, its connections closed on exit. ``qps`` < 0
        means no client-side limit; 0 means client-go's default (5 / burst 10)."""
        async with make_http_client(connection, transport=transport, timeout=timeout) as http:
            yield cls(
                http,
                connection,
                limiter=client_limiter(qps, burst),
                max_retries=max_retries,
                timeout=timeout,
                run_sync=run_sync,
            )

    def with_limits(
        self, qps: float, burst: int, *, timeout: httpx.Timeout | None = None
    ) -> ApiClient:
        """A client sharing this one's connections with its own rate limit and timeout
        (upstream's kubelet uses an unthrottled heartbeat client, QPS -1, with a timeout
        of nodeStatusUpdateFrequency, for leases and node status). Valid while this
        client is open."""
        sibling = ApiClient(
            self.http,
            self.connection,
            limiter=client_limiter(qps, burst),
            max_retries=self.max_retries,
            timeout=timeout or self.timeout,
            run_sync=self.run_sync,
        )
        sibling.observer = self.observer
        sibling.tracer = self.tracer
        return sibling

    # -- sending --

    def _build(
        self,
        method: str,
        path: str,
        params: Params,
        content: bytes | None,
        content_type: str | None,
        timeout: httpx.Timeout,
    ) -> httpx.Request:
        headers = {}
        auth = self.connection.authorization()
        if auth:
            headers["Authorization"] = auth
        if content_type:
            headers["Content-Type"] = content_type
        extensions = {}
        if self.connection.tls_server_name:
            extensions["sni_hostname"] = self.connection.tls_server_name
        return self.http.build_request(
            method,
            path,
            params=_query(params or {}),
            content=content,
            headers=headers,
            timeout=timeout,
            extensions=extensions,
        )

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Params = None,
        content: bytes | None = None,
        content_type: str | None = None,
        stream: bool = False,
        timeout: httpx.Timeout | None = None,
    ) -> httpx.Response:
        """Send with rate limiting and client-go's retries; a 2xx response or an ApiError.
        With ``stream`` the caller must close the response."""
        retries = 0
        while True:
            await self.limiter.acquire()
            try:
                await self.connection.prepare()
            except ExecPluginError as exc:
                raise ApiUnavailable(
                    0, "", f"{method} {shorten(path)}: getting credentials: {exc}"
                ) from exc
            try:
                request = self._build(
                    method, path, params, content, content_type, timeout or self.timeout
                )
            except httpx.InvalidURL as exc:  # a name or token of megabytes
                raise ApiError(0, "", f"{method} {shorten(path)}: {exc}") from exc
            where = f"{method} {request.url}"
            sent = trio.current_time()
            try:
                try:
                    response = await self._round_trip(request)
                except httpx.TransportError:
                    self._observe(request, "<error>", sent)
                    raise
                self._observe(request, str(response.status_code), sent)
                if response.is_success and stream:
                    return response
                try:
                    body = await _read_bounded(response, where)
                finally:
                    await response.aclose()
                if response.is_success:
                    return response
            except httpx.TransportError as exc:
                reset = isinstance(exc, httpx.ReadError | httpx.RemoteProtocolError)
                if method == "GET" and reset and retries < self.max_retries:
                    retries += 1
                    log.debug("%s: %s; retry %d in %gs", where, exc, retries, RETRY_GET_AFTER)
                    await trio.sleep(RETRY_GET_AFTER)
                    continue
                raise ApiUnavailable(0, "", f"{where}: {_describe(exc)}") from exc
            code = response.status_code
            if code == httpx.codes.UNAUTHORIZED:
                self.connection.unauthorized(request.headers.get("Authorization"))
            wait = _retry_after(response.headers)
            retryable = code == httpx.codes.TOO_MANY_REQUESTS or code >= 500
            if retryable and wait is not None and retries < self.max_retries:
                retries += 1
                log.debug("%s: %d, Retry-After %gs; retry %d", where, code, wait, retries)
                await trio.sleep(wait)
                continue
            raise error_from_response(code, body, wait)

    async def _round_trip(self, request: httpx.Request) -> httpx.Response:
        """One request sent, in a client span when tracing (otelhttp's transport)."""
        if not self.tracer.enabled:
            return await self.http.send(request, stream=True)
        attributes = {
            "http.request.method": request.method,
            "url.full": str(request.url.copy_with(query=None)),
            "server.address": request.url.host,
        }
        with self.tracer.client_span(f"HTTP {request.method}", attributes) as span:
            request.headers.update(span.headers)
            response = await self.http.send(request, stream=True)
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 400:
                span.set_error(f"HTTP {response.status_code}")
            return response

    def _observe(self, request: httpx.Request, code: str, sent: float) -> None:
        if self.observer is not None:
            host = request.url.netloc.decode("ascii", "replace")
            self.observer(request.method, host, code, trio.current_time() - sent)

    async def _object(
        self,
        method: str,
        path: str,
        into: type[T] | None,
        *,
        params: Params = None,
        body: object = None,
        content_type: str = "application/json",
    ) -> Any:
        content = _encode(body) if body is not None else None
        response = await self._send(
            method,
            path,
            params=params,
            content=content,
            content_type=content_type if content is not None else None,
        )
        data = await _decoded(
            len(response.content), lambda: _decode_object(response), self.run_sync
        )
        if into is None:
            return data
        try:
            return from_wire(into, data)
        except WireError as exc:
            where = f"{method} {shorten(path)}"
            raise InvalidResponse(response.status_code, "", f"{where}: {exc}") from exc

    # -- verbs --

    @overload
    async def get(self, path: str, *, params: Params = None) -> dict[str, Any]: ...
    @overload
    async def get(self, path: str, *, into: type[T], params: Params = None) -> T: ...
    async def get(self, path: str, *, into: type[T] | None = None, params: Params = None) -> Any:
        """GET an object (``api_path(..., name=...)``)."""
        return await self._object("GET", path, into, params=params)

    @overload
    async def create(self, path: str, body: object, *, params: Params = None) -> dict[str, Any]: ...
    @overload
    async def create(
        self, path: str, body: object, *, into: type[T], params: Params = None
    ) -> T: ...
    async def create(
        self, path: str, body: object, *, into: type[T] | None = None, params: Params = None
    ) -> Any:
        """POST ``body`` to a collection path (no name); the created object comes back."""
        return await self._object("POST", path, into, params=params, body=body)

    @overload
    async def update(self, path: str, body: object, *, params: Params = None) -> dict[str, Any]: ...
    @overload
    async def update(
        self, path: str, body: object, *, into: type[T], params: Params = None
    ) -> T: ...
    async def update(
        self, path: str, body: object, *, into: type[T] | None = None, params: Params = None
    ) -> Any:
        """PUT ``body`` (with its resourceVersion: a stale one gives Conflict)."""
        return await self._object("PUT", path, into, params=params, body=body)

    @overload
    async def patch(
        self,
        path: str,
        patch: object,
        patch_type: PatchType = PatchType.STRATEGIC,
        *,
        params: Params = None,
    ) -> dict[str, Any]: ...
    @overload
    async def patch(
        self,
        path: str,
        patch: object,
        patch_type: PatchType = PatchType.STRATEGIC,
        *,
        into: type[T],
        params: Params = None,
    ) -> T: ...
    async def patch(
        self,
        path: str,
        patch: object,
        patch_type: PatchType = PatchType.STRATEGIC,
        *,
        into: type[T] | None = None,
        params: Params = None,
    ) -> Any:
        """PATCH with ``patch`` (a dict, or a list for JSON patch; see kubelet.api.patch)."""
        return await self._object(
            "PATCH", path, into, params=params, body=patch, content_type=str(patch_type)
        )

    async def delete(
        self,
        path: str,
        *,
        grace_period_seconds: int | None = None,
        uid: str = "",
        resource_version: str = "",
        propagation_policy: str = "",
    ) -> dict[str, Any]:
        """DELETE with DeleteOptions; ``uid`` / ``resource_version`` are preconditions
        (the kubelet deletes a pod only if it is still the one it knows)."""
        options: dict[str, Any] = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        if preconditions:
            options["preconditions"] = preconditions
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        data: dict[str, Any] = await self._object("DELETE", path, None, body=options or None)
        return data

    async def delete_collection(
        self, path: str, *, label_selector: str = "", field_selector: str = ""
    ) -> dict[str, Any]:
        """DELETE on a collection: every object the selectors match."""
        params: dict[str, str | int | bool] = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
        }
        data: dict[str, Any] = await self._object("DELETE", path, None, params=params)
        return data

    async def list(
        self,
        path: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_: str = "",
        resource_version: str = "",
        resource_version_match: str = "",
    ) -> ListPage:
        """One page of a list (``limit`` / ``continue_`` for paging)."""
        params: dict[str, str | int | bool] = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "resourceVersion": resource_version,
            "resourceVersionMatch": resource_version_match,
            "continue": continue_,
        }
        if limit > 0:
            params["limit"] = limit
        data = await self._object("GET", path, None, params=params)
        items = data.get("items") or []
        meta = data.get("metadata") or {}
        if not isinstance(items, list) or not isinstance(meta, dict):
            raise InvalidResponse(200, "", f"GET {path}: not a list")
        rv, token = str(meta.get("resourceVersion") or ""), str(meta.get("continue") or "")
        if len(rv) > MAX_TOKEN_LENGTH or len(token) > MAX_TOKEN_LENGTH:
            raise InvalidResponse(
                200,
                "",
                f"GET {path}: a resourceVersion or continue token "
                f"of more than {MAX_TOKEN_LENGTH} characters",
            )
        remaining = meta.get("remainingItemCount")
        return ListPage(
            items=[item for item in items if _usable(item, f"GET {path}")],
            resource_version=rv,
            continue_=token,
            remaining_item_count=remaining if isinstance(remaining, int) else None,
        )

    async def list_all(
        self,
        path: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        resource_version: str = "",
        page_size: int = 500,
    ) -> ListPage:
        """Every page of a list, as client-go's pager: later pages carry only the continue
        token, and a token that expired mid-way (410) falls back to one full list."""
        items: list[dict[str, Any]] = []
        continue_ = ""
        rv = resource_version
        while True:
            try:
                page = await self.list(
                    path,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    limit=page_size,
                    continue_=continue_,
                    resource_version="" if continue_ else rv,
                )
            except ApiError as exc:
                if exc.code != httpx.codes.GONE or not continue_:
                    raise
                log.info("GET %s: continue token expired; listing everything at once", path)
                return await self.list(
                    path,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    resource_version=rv,
                )
            items.extend(page.items)
            if not page.continue_:
                return ListPage(items=items, resource_version=page.resource_version)
            continue_ = page.continue_

    async def watch(
        self,
        path: str,
        on_event: OnEvent,
        *,
        resource_version: str = "",
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> None:
        """Watch a collection, calling ``on_event`` for each event in order.

        Returns at EOF (the server's ``timeoutSeconds`` passed) or when ``on_event``
        returns True; raises the ERROR event's Status as an ApiError (``Gone`` for an
        expired resourceVersion), ``ApiUnavailable`` if the connection breaks, and
        whatever ``on_event`` raised. Starting it is rate limited and retried like any
        request.
        """
        params: dict[str, str | int | bool] = {
            "watch": True,
            "allowWatchBookmarks": allow_bookmarks,
            "resourceVersion": resource_version,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
        }
        read = None
        if timeout_seconds is not None:
            params["timeoutSeconds"] = timeout_seconds
            read = timeout_seconds + WATCH_READ_GRACE
        if not allow_bookmarks:
            del params["allowWatchBookmarks"]
        timeout = httpx.Timeout(
            connect=self.timeout.connect,
            read=read,
            write=self.timeout.write,
            pool=self.timeout.pool,
        )
        response = await self._send("GET", path, params=params, stream=True, timeout=timeout)
        try:
            await _dispatch_lines(response, on_event, self.run_sync, f"watch {path}")
        except httpx.TransportError as exc:
            raise ApiUnavailable(0, "", f"watch {path}: {_describe(exc)}") from exc
        finally:
            await response.aclose()


def _usable(obj: Any, where: str) -> bool:
    """Whether an item or event object can be handed on; the reason is logged when not
    (as upstream's decoder: the object is skipped, the list or watch goes on)."""
    problem = object_problem(obj)
    if problem is not None:
        log.error("%s: skipping %s: %s", where, describe(obj), problem)
    return problem is None


async def _next_event(line: bytes, run_sync: RunSync, where: str) -> WatchEvent | None:
    """The line's event; None when its object is unusable (logged) and skipped. A long
    line is decoded, text and JSON alike, off the event loop."""
    event = await _decoded(
        len(line), lambda: _parse_event(line.decode("utf-8", "replace")), run_sync
    )
    if event.type == "ERROR":
        raise error_from_status(event.object)
    return event if _usable(event.object, where) else None


async def _dispatch_lines(
    response: httpx.Response, on_event: OnEvent, run_sync: RunSync, where: str
) -> None:
    """Feed each line's event to ``on_event`` until EOF or a stop.

    To stop early we cancel our own scope and let the next read raise Cancelled inside
    httpx's generators, never leaving the ``async for`` by break or exception. A failure
    in between (a bad line, an ERROR event, the callback raising, even an outer
    Cancelled) is kept and raised after the loop.
    """
    failure: BaseException | None = None
    pending = bytearray()
    with trio.CancelScope() as scope:
        async for chunk in response.aiter_bytes():
            if scope.cancel_called:
                continue
            pending += chunk
            try:
                lines = _split_lines(pending, len(chunk))
                await _dispatch(lines, on_event, run_sync, where, scope)
            except BaseException as exc:
                failure = exc
                scope.cancel()
        if failure is None and not scope.cancel_called and pending:
            try:  # the last event, without its newline
                await _dispatch([bytes(pending)], on_event, run_sync, where, scope)
            except BaseException as exc:
                failure = exc
    if failure is not None:
        raise failure


async def _dispatch(
    lines: list[bytes], on_event: OnEvent, run_sync: RunSync, where: str, scope: trio.CancelScope
) -> None:
    """Each line's event to ``on_event``; a true answer cancels ``scope`` (no more)."""
    for line in lines:
        if scope.cancel_called:
            return
        if not line or line.isspace():
            continue
        event = await _next_event(line, run_sync, where)
        if event is not None and await on_event(event):
            scope.cancel()
