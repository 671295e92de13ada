"""From an HTTP request to an API answer: faults, identity, verbs, the request log.

Every request is logged (``ApiRequest``) before anything else happens to it, then the
fault plan is consulted, then the caller is identified (bearer token, else client
certificate, else anonymous), then the verb runs against the registry (``apiroutes``
says which resource and verb a request is).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs

import attrs
import trio

from .apiauth import ApiAuth
from .apidiscovery import discovery, version_info
from .apierrors import StatusError
from .apifaults import ApiFaultPlan, RequestInfo
from .apiproxy import PROXIED, STREAMED, KubeletProxy
from .apiregistry import Registry
from .apiresources import ResourceType
from .apiroutes import Route, parse_route, verb_of
from .apistore import ApiStore, Obj, meta
from .apiwatch import WatchHandle, WatchParams, encode, run_watch
from .bootstraprbac import bootstrap_refusal
from .certs import client_identity, expired
from .csrapi import prepare_csr
from .httpserver import AbortConnection, Request, Response, Send, Upgraded
from .selectors import Matcher, field_selector, label_selector

__all__ = ["ApiHandler", "ApiRequest", "ApiSettings"]

log = logging.getLogger(__name__)

ANONYMOUS = "system:anonymous"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
_SUBRESOURCE_VERBS = {
    "status": frozenset({"get", "update", "patch"}),
    "token": frozenset({"create"}),
    "approval": frozenset({"get", "update", "patch"}),
    "ephemeralcontainers": frozenset({"get", "update", "patch"}),
    "resize": frozenset({"get", "update", "patch"}),
}


@attrs.define
class ApiRequest:
    """One request as the fake saw it, in arrival order.

    ``time``/``finished`` are trio clock times. ``status`` is the HTTP status sent
    (None if nothing was: the client left, or the connection was cut). ``outcome`` is
    "ok", "error", "streaming" then "ended"/"dropped"/"aborted" for watches, "reset"
    (cut by a fault) or "cancelled" (the client went away first).
    """

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    time: float
    body: bytes = b""
    verb: str = ""
    resource: str = ""
    namespace: str = ""
    name: str = ""
    user: str = ""
    groups: tuple[str, ...] = ()
    status: int | None = None
    finished: float | None = None
    outcome: str = "pending"

    def json(self) -> Any:
        """The request body decoded (None if empty)."""
        return json.loads(self.body) if self.body else None


@attrs.define
class ApiSettings:
    """Knobs a test may turn while the server runs."""

    bookmark_interval: float = 60.0
    watch_timeout: float | None = None
    require_auth: bool = False
    version: str = "v1.36.0"


def json_response(status: int, obj: Any, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(status, encode(obj), headers=headers)


def error_response(err: StatusError) -> Response:
    headers: tuple[tuple[str, str], ...] = ()
    if err.retry_after is not None:
        headers = (("retry-after", str(err.retry_after)),)
    return json_response(err.code, err.body(), headers)


def _int_param(query: Mapping[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise StatusError.bad_request(
            f'{name}: Invalid value: "{raw}": must be an integer'
        ) from exc


def _strip_type(obj: Obj) -> Obj:
    """List items carry no kind/apiVersion on the wire, as in a typed List."""
    obj.pop("kind", None)
    obj.pop("apiVersion", None)
    return obj


class ApiHandler:
    """The request handler the HttpServer calls; state lives in the objects it is given."""

    def __init__(
        self,
        *,
        store: ApiStore,
        registry: Registry,
        auth: ApiAuth,
        faults: ApiFaultPlan,
        settings: ApiSettings,
        log: list[ApiRequest],
        watches: set[WatchHandle],
        now: Callable[[], float],
        address: Callable[[], str],
        proxy: KubeletProxy | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.auth = auth
        self.faults = faults
        self.settings = settings
        self.log = log
        self.watches = watches
        self.now = now
        self.address = address
        self.proxy = proxy

    async def __call__(self, request: Request) -> Response:
        record = ApiRequest(
            request.method,
            request.path,
            dict(request.query),
            request.content_type,
            trio.current_time(),
            request.body,
        )
        self.log.append(record)
        try:
            response = await self._handle(request, record)
        except AbortConnection:
            record.outcome, record.finished = "reset", trio.current_time()
            raise
        except BaseException:
            # trio.Cancelled: the client went away (or the server went down) first.
            if record.outcome == "pending":
                record.outcome, record.finished = "cancelled", trio.current_time()
            raise
        record.status = response.status
        if response.stream is None:
            record.outcome = "ok" if response.status < 400 else "error"
            record.finished = trio.current_time()
        return response

    async def _handle(self, request: Request, record: ApiRequest) -> Response:
        route = parse_route(request.path)
        verb = verb_of(request.method, route, request.query)
        resource = ""
        if route.rt is not None:
            resource = route.rt.plural + (f"/{route.subresource}" if route.subresource else "")
        record.verb, record.resource = verb, resource
        record.namespace, record.name = route.namespace, route.name
        group = route.rt.group if route.rt is not None else ""
        info = RequestInfo(verb, resource, request.path, route.namespace, route.name, group)
        effect = self.faults.take(info)
        if effect.delay:
            await trio.sleep(effect.delay)
        if effect.stall:
            await trio.sleep_forever()
        if effect.reset:
            raise AbortConnection
        try:
            record.user, record.groups = self._identify(request)
            refusal = bootstrap_refusal(record.user, record.groups, verb, route, request.path)
            if refusal is not None:
                raise refusal
            if effect.error is not None:
                raise effect.error
            if effect.body is not None:
                return Response(200, effect.body)
            if route.rt is None:
                return self._non_resource(route, request)
            if route.rt.plural == "pods" and route.subresource in PROXIED:
                return await self._proxied(route, request)
            if route.rt.plural == "nodes" and route.subresource == "proxy":
                return await self._node_proxy(route, request)
            return self._resource(route, verb, request, record, effect.expire_watch)
        except StatusError as err:
            return error_response(err)
        except Exception as exc:
            # A bug in the fake: answer 500 so the test sees it, and log the traceback.
            log.exception("FakeApiServer failed on %s %s", request.method, request.path)
            return error_response(StatusError(500, f"Internal error occurred: {exc!r}"))

    async def _proxied(self, route: Route, request: Request) -> Response:
        """``pods/{name}/log`` (exec, attach and port-forward need an upgrade)."""
        if self.proxy is None:
            raise StatusError(404, "the server could not find the requested resource")
        if route.subresource != "log":
            raise StatusError(400, "Upgrade request required")
        if request.method != "GET":
            raise StatusError.method_not_allowed(request.method, request.path)
        query = parse_qs(request.query_string, keep_blank_values=True)
        url = self.proxy.location(route.namespace, route.name, route.subresource, query)
        return await self.proxy.log(url)

    async def _node_proxy(self, route: Route, request: Request) -> Response:
        """``nodes/{name}/proxy/<path>``: a GET passed to the node's kubelet as it came."""
        if self.proxy is None:
            raise StatusError(404, "the server could not find the requested resource")
        if request.method != "GET":
            raise StatusError.method_not_allowed(request.method, request.path)
        url = self.proxy.node_base(route.name) + route.proxy_path
        if request.query_string:
            url += "?" + request.query_string
        return await self.proxy.forward(url)

    def upgrade_hook(self, request: Request) -> Upgraded | None:
        """``pods/{name}/exec|attach|portforward`` upgrades, proxied to the kubelet."""
        route = parse_route(request.path)
        if route.rt is None or route.rt.plural != "pods" or route.subresource not in STREAMED:
            return None
        proxy = self.proxy
        if proxy is None:
            return None
        record = ApiRequest(
            request.method, request.path, dict(request.query), request.content_type,
            trio.current_time(), request.body,
        )  # fmt: skip
        record.verb = verb_of(request.method, route, request.query)
        record.resource = f"pods/{route.subresource}"
        record.namespace, record.name = route.namespace, route.name
        self.log.append(record)

        async def upgraded(stream: trio.abc.Stream, buffered: bytes) -> Response | None:
            try:
                record.user, record.groups = self._identify(request)
                query = parse_qs(request.query_string, keep_blank_values=True)
                url = proxy.location(route.namespace, route.name, route.subresource, query)
                pod = (route.namespace, route.name) if route.subresource == "portforward" else None
                answer = await proxy.upgrade(request, url, stream, buffered, pod)
            except StatusError as err:
                answer = error_response(err)
            response = answer if isinstance(answer, Response) else None
            record.status = answer.status if isinstance(answer, Response) else answer
            record.outcome = "ok" if record.status < 400 else "error"
            record.finished = trio.current_time()
            return response

        return upgraded

    def _identify(self, request: Request) -> tuple[str, tuple[str, ...]]:
        """(user, groups) of the request; authenticated users are in system:authenticated."""
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            info = self.auth.authenticate(auth[7:].strip(), self.now())
            if info is not None:
                return info.user, (*info.groups, AUTHENTICATED)
            if self.settings.require_auth:
                raise StatusError(401, "Unauthorized")
        identity = client_identity(request.peer_cert)
        if identity is not None:
            if expired(request.peer_cert, self.now()):
                # kube-apiserver verifies a client certificate on every request, with its
                # own clock: an expired one is refused even on an old connection
                raise StatusError(401, "Unauthorized")
            return identity[0], (*identity[1], AUTHENTICATED)
        if self.settings.require_auth:
            raise StatusError(401, "Unauthorized")
        return ANONYMOUS, (UNAUTHENTICATED,)

    # -- non-resource paths -----------------------------------------------------------

    def _non_resource(self, route: Route, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            raise StatusError.method_not_allowed(request.method, request.path)
        if route.special == "health":
            return Response(200, b"ok", content_type="text/plain; charset=utf-8")
        if route.special == "version":
            return json_response(200, version_info(self.settings.version))
        if route.special == "discovery":
            found = discovery(request.path, self.address())
            if found is not None:
                return json_response(200, found)
        raise StatusError(404, "the server could not find the requested resource")

    # -- resources --------------------------------------------------------------------

    def _resource(
        self, route: Route, verb: str, request: Request, record: ApiRequest, expire: bool
    ) -> Response:
        rt = route.rt
        assert rt is not None
        allowed = _SUBRESOURCE_VERBS.get(route.subresource, rt.verbs)
        if verb not in allowed:
            what = rt.plural + (f"/{route.subresource}" if route.subresource else "")
            raise StatusError.method_not_allowed(request.method, what)
        query = request.query
        if query.get("dryRun") and verb != "create":
            raise StatusError.bad_request("dryRun is supported only for create by FakeApiServer")
        if verb == "get":
            return json_response(200, self.store.require(rt, route.namespace, route.name))
        if verb == "list":
            return json_response(200, self._list(rt, route, query))
        if verb == "watch":
            return self._watch(rt, route, query, record, expire)
        body = self._json_body(request) if verb not in ("patch",) else None
        if verb == "create":
            return self._create(rt, route, body, bool(query.get("dryRun")), record)
        if verb == "update":
            code, obj = self.registry.update(
                rt, route.namespace, route.name, body, subresource=route.subresource
            )
            return json_response(code, obj)
        if verb == "patch":
            obj = self.registry.patch(
                rt,
                route.namespace,
                route.name,
                request.content_type,
                request.body,
                subresource=route.subresource,
            )
            return json_response(200, obj)
        if verb == "delete":
            return self._delete(rt, route, self._delete_options(body, query))
        if verb == "deletecollection":
            return self._delete_collection(rt, route, query, self._delete_options(body, query))
        raise StatusError.method_not_allowed(request.method, rt.plural)

    def _json_body(self, request: Request) -> Any:
        if not request.body:
            return None
        try:
            return json.loads(request.body)
        except ValueError as exc:
            raise StatusError.bad_request(
                f"the body of the request could not be decoded: {exc}"
            ) from exc

    def _create(
        self, rt: ResourceType, route: Route, body: Any, dry_run: bool, record: ApiRequest
    ) -> Response:
        if rt.kind in ("TokenReview", "SubjectAccessReview"):
            return json_response(201, self.registry.review(rt, body))
        if route.subresource == "token":
            return json_response(
                201, self.registry.token_request(route.namespace, route.name, body)
            )
        if route.name or route.subresource:
            raise StatusError.method_not_allowed("POST", f"{rt.plural}/{route.name}")
        if rt.kind == "CertificateSigningRequest":
            body = prepare_csr(body, record.user, record.groups)
        return json_response(201, self.registry.create(rt, route.namespace, body, dry_run=dry_run))

    def _delete_options(self, body: Any, query: Mapping[str, str]) -> dict[str, Any]:
        options = dict(body) if isinstance(body, dict) else {}
        grace = _int_param(query, "gracePeriodSeconds")
        if grace is not None and options.get("gracePeriodSeconds") is None:
            options["gracePeriodSeconds"] = grace
        return options

    def _delete(self, rt: ResourceType, route: Route, options: Mapping[str, Any]) -> Response:
        obj, gone = self.registry.delete(rt, route.namespace, route.name, options)
        if not gone or rt.graceful:
            return json_response(200, obj)
        details: dict[str, Any] = {
            "name": route.name,
            "kind": rt.plural,
            "uid": meta(obj).get("uid"),
        }
        if rt.group:
            details["group"] = rt.group
        return json_response(
            200,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            },
        )

    def _delete_collection(
        self, rt: ResourceType, route: Route, query: Mapping[str, str], options: Mapping[str, Any]
    ) -> Response:
        match = self._matcher(rt, query)
        deleted = []
        for obj in self.store.items(rt, route.namespace or None, match):
            m = meta(obj)
            result, _ = self.registry.delete(
                rt, str(m.get("namespace", "")), str(m["name"]), options
            )
            deleted.append(_strip_type(result))
        return json_response(
            200,
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": deleted,
            },
        )

    def _matcher(self, rt: ResourceType, query: Mapping[str, str]) -> Matcher:
        labels = label_selector(query.get("labelSelector"))
        fields = field_selector(query.get("fieldSelector"), rt.field_labels)
        return lambda o: labels(o) and fields(o)

    def _list(self, rt: ResourceType, route: Route, query: Mapping[str, str]) -> dict[str, Any]:
        match = self._matcher(rt, query)
        limit = _int_param(query, "limit") or 0
        version = _int_param(query, "resourceVersion")
        at = version if query.get("resourceVersionMatch") == "Exact" and version else None
        items, list_rv, token, remaining = self.store.list_page(
            rt, route.namespace or None, match, limit=limit, token=query.get("continue"), at=at
        )
        metadata: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if token:
            metadata["continue"] = token
            if (
                remaining is not None
                and not query.get("labelSelector")
                and not query.get("fieldSelector")
            ):
                metadata["remainingItemCount"] = remaining
        return {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": metadata,
            "items": [_strip_type(o) for o in items],
        }

    def _watch(
        self,
        rt: ResourceType,
        route: Route,
        query: Mapping[str, str],
        record: ApiRequest,
        expire: bool,
    ) -> Response:
        since = _int_param(query, "resourceVersion")
        timeout = _int_param(query, "timeoutSeconds")
        initial = query.get("sendInitialEvents") == "true"
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        if initial and not bookmarks:
            raise StatusError(
                422,
                "sendInitialEvents is forbidden for watch unless allowWatchBookmarks=true",
                reason="Invalid",
            )
        params = WatchParams(
            rt=rt,
            namespace=route.namespace or None,
            match=self._matcher(rt, query),
            since=since or None,
            bookmarks=bookmarks,
            bookmark_interval=self.settings.bookmark_interval,
            timeout=float(timeout) if timeout else self.settings.watch_timeout,
            initial_events=initial,
            expire=expire,
        )
        handle = WatchHandle(rt.plural)
        record.outcome = "streaming"

        async def stream(send: Send) -> None:
            self.watches.add(handle)
            try:
                await run_watch(send, self.store, params, handle)
                record.outcome = "dropped" if handle.ended else "ended"
            except AbortConnection:
                record.outcome = "aborted"
                raise
            finally:
                self.watches.discard(handle)
                record.finished = trio.current_time()
                if record.outcome == "streaming":
                    record.outcome = "cancelled"

        return Response(200, stream=stream)
