"""FakeApiServer: a real HTTP server with the Kubernetes API semantics a kubelet relies on.

It serves the real paths (``/api/v1/namespaces/{ns}/pods/{name}/status``,
``/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}``...) over
HTTP/1.1 (optionally TLS with client certificates), so the kubelet's real httpx client
talks to it exactly as to kube-apiserver. It exists for deterministic fault-injection
tests; it never replaces tests against a real cluster.

In-process (the usual way; ``autojump_clock`` stays exact because server and client
share the trio run and loopback I/O completes without real waiting)::

    api = FakeApiServer()
    async with api.serve():                      # 127.0.0.1, an ephemeral port
        async with api.client() as client:       # httpx.AsyncClient(base_url=api.url)
            r = await client.get("/api/v1/nodes")

``api.serve(uds=path)`` also listens on a unix socket (``api.client()`` then uses it),
``api.serve(tls_dir=path)`` serves HTTPS with a throwaway CA (``api.ssl_context(user=
"system:node:n1", groups=["system:nodes"])`` for an mTLS client, ``api.kubeconfig(path)``
for a kubelet). As a process (for running the ``kubelet`` binary against it)::

    python -m kubelet.testing.fakeapiserver --listen 127.0.0.1:0 --port-file PORT

which writes the chosen port to PORT once listening and exits 0 on SIGTERM/SIGINT.

What it models
--------------
Resources: core/v1 pods (+status, +ephemeralcontainers, +resize), nodes (+status), namespaces,
events, configmaps, secrets, persistentvolumeclaims and persistentvolumes (+status),
services, serviceaccounts (+token, a TokenRequest answered
with a fake JWT);
coordination.k8s.io/v1 leases; certificates.k8s.io/v1 certificatesigningrequests
(+approval, +status; ``csrapi.CsrController`` approves and signs them, and client
certificates are checked against the fake's clock); authentication.k8s.io/v1 tokenreviews and
authorization.k8s.io/v1 subjectaccessreviews (create only, answered from
``api.auth``); discovery (/api, /apis...), /version, /healthz|livez|readyz.
Semantics (see ``apistore``, ``apiregistry``, ``apiwatch``, ``patching``):
resourceVersion as one global counter; uid, creationTimestamp, generation on create;
a pod created without imagePullSecrets gets its service account's (ServiceAccount
admission's part a kubelet sees);
409 AlreadyExists / Conflict (stale resourceVersion, UID preconditions); status
subresources; strategic merge, JSON merge and JSON patch; graceful pod deletion;
404/410/422 with upstream's Status bodies; list paging (limit/continue, consistent),
label and field selectors; watches from a resourceVersion with bookmarks, timeouts and
410 for versions older than the history window. Namespaces default, kube-system,
kube-public and kube-node-lease exist from the start, each with a ``default`` service
account (``bootstrap=False`` to start empty); creating in a missing namespace is 404.

Fault injection
---------------
``api.faults`` is an ``ApiFaultPlan``: per (verb, resource) pattern an error status
with a Status body (409, 500, 429 with Retry-After, 403...), added latency, stall until
the client goes, cut the connection, fail the next N, expire the next watch (410).
``await api.drop_watches()`` ends every open watch now (``abort=True`` cuts their
connections instead). ``async with api.outage():`` — or ``await api.go_down()`` /
``await api.come_up()`` — closes the listener and every open connection (clients get
connection refused) and later listens again on the same port. ``api.compact()``
forgets history, so every older resourceVersion is 410 Gone.

Request log
-----------
``api.requests`` records every request in arrival order (``ApiRequest``: method,
path, query, content type, body, verb, resource, namespace, name, user, trio clock
time of arrival and finish, status, outcome); ``api.requests_of(verb, resource)`` and
``api.count(...)`` filter it. Same test, same result: uids and generated names are
counters, time is the trio clock (timestamps are ``epoch`` + clock).

Test helpers
------------
``create``, ``get``, ``list``, ``objects``, ``update``, ``patch``, ``update_status``,
``delete`` act on the store directly (no HTTP, no faults, nothing logged) with the same
semantics as the API (defaults, versions, watch events).
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import json
import logging
import os
import signal
import socket
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import trio
import yaml

from kubelet.goformat import rfc3339

from .apiauth import ApiAuth
from .apierrors import StatusError
from .apifaults import ApiFaultPlan
from .apihttp import ApiHandler, ApiRequest, ApiSettings
from .apiproxy import KubeletProxy
from .apiregistry import Registry
from .apiresources import ResourceType, by_kind
from .apistore import ApiStore, Obj, meta
from .apiwatch import WatchHandle
from .certs import CertPair, TestCA
from .csrsigner import CsrController, csrapproving_and_serving
from .httpserver import HttpServer
from .patching import STRATEGIC_MERGE_PATCH
from .selectors import field_selector, label_selector

__all__ = ["ApiRequest", "FakeApiServer"]

log = logging.getLogger(__name__)

BOOTSTRAP_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UDS_BASE_URL = "http://fakeapiserver"


class FakeApiServer:
    """An in-memory Kubernetes API server over real HTTP. See the module docstring."""

    def __init__(
        self,
        *,
        epoch: float | None = None,
        history: int = 1000,
        bookmark_interval: float = 60.0,
        watch_timeout: float | None = None,
        require_auth: bool = False,
        bootstrap: bool = True,
        version: str = "v1.36.0",
    ) -> None:
        self.faults = ApiFaultPlan()
        self.requests: list[ApiRequest] = []
        self.settings = ApiSettings(bookmark_interval, watch_timeout, require_auth, version)
        self.auth = ApiAuth()
        self._epoch = epoch
        self.store = ApiStore(lambda: rfc3339(self.now()), history=history)
        self.registry = Registry(self.store, self.auth, self.now)
        self._watches: set[WatchHandle] = set()
        self.kubelets = KubeletProxy(self.store, lambda: self.ca)
        """Reaching the nodes' kubelets for pods/exec, attach, portforward and log
        (``kubelets.hosts`` resolves node host names; ``kubelets.client_ca_file()`` is the
        CA to give a kubelet as ``--client-ca-file``)."""
        self._handler = ApiHandler(
            store=self.store,
            registry=self.registry,
            auth=self.auth,
            faults=self.faults,
            settings=self.settings,
            log=self.requests,
            watches=self._watches,
            now=self.now,
            address=lambda: f"{self.host}:{self._port}",
            proxy=self.kubelets,
        )
        self.host: str | None = None
        self.uds: Path | None = None
        self.ca: TestCA | None = None
        self._port = 0
        self._ssl: ssl.SSLContext | None = None
        self._nursery: trio.Nursery | None = None
        self._serving: tuple[trio.CancelScope, trio.Event] | None = None
        if bootstrap:
            for ns in BOOTSTRAP_NAMESPACES:
                self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
                self.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ServiceAccount",
                        "metadata": {"name": "default", "namespace": ns},
                    }
                )

    # -- time -------------------------------------------------------------------------

    def now(self) -> float:
        """The fake's wall clock: ``epoch`` + the trio clock (real time outside trio)."""
        try:
            clock = trio.current_time()
        except RuntimeError:
            return self._epoch if self._epoch is not None else time.time()
        if self._epoch is None:
            self._epoch = time.time() - clock
        return self._epoch + clock

    # -- serving ----------------------------------------------------------------------

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("FakeApiServer is not listening on TCP")
        return self._port

    @property
    def url(self) -> str:
        """The base URL (``http[s]://127.0.0.1:<port>``; a placeholder host for uds only)."""
        if self.host is None:
            if self.uds is None:
                raise RuntimeError("FakeApiServer is not serving")
            return UDS_BASE_URL
        scheme = "https" if self._ssl is not None else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    @property
    def serving(self) -> bool:
        return self._serving is not None

    @contextlib.asynccontextmanager
    async def serve(
        self,
        host: str | None = "127.0.0.1",
        port: int = 0,
        *,
        uds: str | os.PathLike[str] | None = None,
        tls_dir: str | os.PathLike[str] | None = None,
    ) -> AsyncIterator[FakeApiServer]:
        """Serve for the duration of the block (``host=None``: the unix socket only).

        Binding happens before any nursery opens, so a bad address raises plainly
        (OSError), not wrapped in an ExceptionGroup.
        """
        listeners = await self._setup(host, port, uds, tls_dir)
        async with trio.open_nursery() as nursery:
            await nursery.start(self._run, listeners)
            try:
                yield self
            finally:
                nursery.cancel_scope.cancel()

    async def run(
        self,
        host: str | None = "127.0.0.1",
        port: int = 0,
        *,
        uds: str | os.PathLike[str] | None = None,
        tls_dir: str | os.PathLike[str] | None = None,
        task_status: trio.TaskStatus[FakeApiServer] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled (for ``nursery.start``); reports started when listening."""
        listeners = await self._setup(host, port, uds, tls_dir)
        await self._run(listeners, task_status=task_status)

    async def _setup(
        self,
        host: str | None,
        port: int,
        uds: str | os.PathLike[str] | None,
        tls_dir: str | os.PathLike[str] | None,
    ) -> list[trio.SocketListener]:
        if host is None and uds is None:
            raise ValueError("FakeApiServer needs a host or a unix socket path")
        if self._nursery is not None:
            raise RuntimeError("FakeApiServer is already serving")
        self.host, self._port = host, port
        self.uds = Path(uds) if uds is not None else None
        self._ssl = None
        if tls_dir is not None:
            self.ca = TestCA(Path(tls_dir))
            hosts = sorted({host or "127.0.0.1", "127.0.0.1", "localhost", "::1"})
            server = self.ca.issue("apiserver", "kube-apiserver", hosts=hosts, server=True)
            self._ssl = self.ca.server_context(server)
        return await self._bind()

    async def _run(
        self,
        listeners: list[trio.SocketListener],
        *,
        task_status: trio.TaskStatus[FakeApiServer] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._start(listeners)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            for listener in listeners:
                listener.socket.close()
            self._nursery, self._serving = None, None
            self._remove_socket()

    async def _bind(self) -> list[trio.SocketListener]:
        """Listening sockets on the configured port (the same one again after an outage)."""
        socks: list[trio.socket.SocketType] = []
        try:
            if self.host is not None:
                family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
                sock = trio.socket.socket(family, socket.SOCK_STREAM)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                await sock.bind((self.host, self._port))
                sock.listen(128)
                self._port = sock.getsockname()[1]
            if self.uds is not None:
                self._remove_socket()
                usock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                socks.append(usock)
                await usock.bind(str(self.uds))
                usock.listen(128)
        except BaseException:
            for s in socks:
                s.close()
            raise
        return [trio.SocketListener(s) for s in socks]

    def _start(self, listeners: list[trio.SocketListener]) -> None:
        assert self._nursery is not None
        scope, done = trio.CancelScope(), trio.Event()
        self._serving = (scope, done)
        self._nursery.start_soon(self._serve_listeners, listeners, scope, done)

    async def _serve_listeners(
        self, listeners: list[trio.SocketListener], scope: trio.CancelScope, done: trio.Event
    ) -> None:
        try:
            with scope:
                server = HttpServer(
                    self._handler, ssl_context=self._ssl, upgrade=self._handler.upgrade_hook
                )
                await server.serve(listeners)
        finally:
            for listener in listeners:
                listener.socket.close()
            done.set()

    async def go_down(self) -> None:
        """Close the listener and every open connection: clients get connection refused."""
        serving, self._serving = self._serving, None
        if serving is None:
            return
        scope, done = serving
        scope.cancel()
        await done.wait()
        self._remove_socket()

    async def come_up(self) -> None:
        """Listen again, on the same port and socket path, with the same state."""
        if self._serving is None and self._nursery is not None:
            self._start(await self._bind())

    @contextlib.asynccontextmanager
    async def outage(self) -> AsyncIterator[None]:
        """Down for the duration of the block, up again after it."""
        await self.go_down()
        try:
            yield
        finally:
            await self.come_up()

    async def drop_watches(self, resource: str | None = None, *, abort: bool = False) -> int:
        """End open watches now (cleanly: the client sees EOF; ``abort``: cut connections)."""
        ended = 0
        for handle in list(self._watches):
            if resource is None or handle.resource == by_kind(resource).plural:
                handle.end(abort=abort)
                ended += 1
        await trio.lowlevel.checkpoint()
        return ended

    def open_watches(self, resource: str | None = None) -> int:
        """How many watch streams are open (of ``resource``, if given)."""
        if resource is None:
            return len(self._watches)
        plural = by_kind(resource).plural
        return sum(1 for h in self._watches if h.resource == plural)

    def compact(self) -> None:
        """Forget history: watches and list pages from any older version get 410."""
        self.store.compact()

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        return self.store.rv

    def _remove_socket(self) -> None:
        if self.uds is not None:
            with contextlib.suppress(FileNotFoundError):
                self.uds.unlink()

    # -- clients ----------------------------------------------------------------------

    def client_cert(self, user: str, groups: Sequence[str] = ()) -> CertPair:
        """A client certificate (CN=user, O=groups) signed by the fake's CA."""
        if self.ca is None:
            raise RuntimeError("FakeApiServer serves no TLS (pass tls_dir to serve)")
        stem = "client-" + "".join(ch if ch.isalnum() else "_" for ch in user)
        return self.ca.issue(stem, user, groups)

    def ssl_context(self, user: str | None = None, groups: Sequence[str] = ()) -> ssl.SSLContext:
        """An SSLContext for httpx ``verify=``: trusts the CA; presents a cert for ``user``."""
        if self.ca is None:
            raise RuntimeError("FakeApiServer serves no TLS (pass tls_dir to serve)")
        pair = self.client_cert(user, groups) if user is not None else None
        return self.ca.client_context(pair)

    def client(
        self,
        *,
        user: str | None = None,
        groups: Sequence[str] = (),
        token: str | None = None,
        **kwargs: Any,
    ) -> httpx.AsyncClient:
        """An httpx.AsyncClient for this server (tcp, or the unix socket if that is all)."""
        if self.host is None and self.uds is not None:
            kwargs.setdefault("transport", httpx.AsyncHTTPTransport(uds=str(self.uds)))
        if self._ssl is not None:
            kwargs.setdefault("verify", self.ssl_context(user, groups))
        if token is not None:
            kwargs.setdefault("headers", {})["Authorization"] = f"Bearer {token}"
        return httpx.AsyncClient(base_url=self.url, **kwargs)

    def kubeconfig(
        self,
        path: str | os.PathLike[str],
        *,
        user: str = "system:node:node1",
        groups: Sequence[str] = ("system:nodes",),
        token: str | None = None,
    ) -> Path:
        """Write a kubeconfig for this server: client certificate if TLS, else a token.

        A token (given, or made up when there is no TLS) is registered for ``user``.
        """
        target = Path(path)
        cluster: dict[str, Any] = {"server": self.url}
        credentials: dict[str, Any] = {}
        if self.ca is not None:
            cluster["certificate-authority"] = str(self.ca.cert_path)
            if token is None:
                pair = self.client_cert(user, groups)
                credentials = {"client-certificate": str(pair.cert), "client-key": str(pair.key)}
        if not credentials:
            token = token or f"fake-token-{user}"
            self.auth.add_token(token, user, groups)
            credentials = {"token": token}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": cluster}],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": user}}],
            "current-context": "fake",
        }
        target.write_text(yaml.safe_dump(config, sort_keys=False))
        return target

    # -- the request log --------------------------------------------------------------

    def requests_of(
        self,
        verb: str | None = None,
        resource: str | None = None,
        *,
        name: str | None = None,
        path: str | None = None,
    ) -> list[ApiRequest]:
        """Logged requests with this verb / resource ("pods/status") / name / path."""
        return [
            r
            for r in self.requests
            if (verb is None or r.verb == verb)
            and (resource is None or r.resource == resource)
            and (name is None or r.name == name)
            and (path is None or r.path == path)
        ]

    def count(self, verb: str | None = None, resource: str | None = None, **kw: Any) -> int:
        return len(self.requests_of(verb, resource, **kw))

    def clear_requests(self) -> None:
        self.requests.clear()

    # -- store helpers (no HTTP) ------------------------------------------------------

    def create(self, obj: Mapping[str, Any]) -> Obj:
        """Create as a POST would (defaults, namespace check, versions, watch event;
        a pod's status is reset to Pending: use ``update_status`` after). A given
        ``uid``/``creationTimestamp`` is kept and a ``resourceVersion`` ignored."""
        rt = by_kind(str(obj.get("kind", "")))
        namespace = str(meta(obj).get("namespace") or ("default" if rt.namespaced else ""))
        return self.registry.create(rt, namespace, dict(obj), keep_identity=True)

    def get(self, kind: str, namespace: str | None, name: str | None = None) -> Obj | None:
        """An object, or None. ``get("Node", "n1")`` works for cluster-scoped kinds."""
        rt, namespace, name = self._address(kind, namespace, name)
        return self.store.get(rt, namespace, name)

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]:
        """Objects in key order (every namespace if ``namespace`` is None), filtered."""
        rt = by_kind(kind)
        labels = _label_matcher(label_selector)
        fields = _field_matcher(field_selector, rt)
        return self.store.items(rt, namespace, lambda o: labels(o) and fields(o))

    def objects(self, kind: str) -> dict[str, Obj]:
        """Every object of a kind by ``namespace/name`` (``name`` if cluster-scoped)."""
        out: dict[str, Obj] = {}
        for obj in self.store.items(by_kind(kind)):
            m = meta(obj)
            key = f"{m['namespace']}/{m['name']}" if m.get("namespace") else str(m["name"])
            out[key] = obj
        return out

    def update(self, obj: Mapping[str, Any]) -> Obj:
        """Update as a PUT would (status kept; conflict if a stale resourceVersion is set)."""
        rt = by_kind(str(obj.get("kind", "")))
        m = meta(obj)
        namespace = str(m.get("namespace") or ("default" if rt.namespaced else ""))
        return self.registry.update(rt, namespace, str(m.get("name", "")), dict(obj))[1]

    def patch(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        content_type: str = STRATEGIC_MERGE_PATCH,
        subresource: str = "",
    ) -> Obj:
        """Patch as a PATCH would (strategic merge by default)."""
        rt, namespace, name = self._address(kind, namespace, name)
        body = json.dumps(patch).encode()
        return self.registry.patch(rt, namespace, name, content_type, body, subresource=subresource)

    def update_status(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any] | Callable[[dict[str, Any]], Any],
    ) -> Obj:
        """Replace ``status`` (a dict, or a function that edits the current one in place)."""
        rt, namespace, name = self._address(kind, namespace, name)
        obj = self.store.require(rt, namespace, name)
        if callable(status):
            current = obj.setdefault("status", {})
            status(current)
        else:
            obj["status"] = dict(status)
        return self.registry.update(rt, namespace, name, obj, subresource="status")[1]

    def delete(
        self,
        kind: str,
        namespace: str | None,
        name: str | None = None,
        *,
        grace: int | None = None,
        uid: str | None = None,
    ) -> Obj | None:
        """Delete as a DELETE would; pods on a node are graceful unless ``grace=0``.

        Returns the deleted object, or its pending state (deletionTimestamp set);
        None if it did not exist.
        """
        rt, namespace, name = self._address(kind, namespace, name)
        options: dict[str, Any] = {}
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        try:
            obj, _ = self.registry.delete(rt, namespace, name, options)
        except StatusError as err:
            if err.code == 404:
                return None
            raise
        return obj

    def load(self, docs: Iterable[Mapping[str, Any]]) -> builtins.list[Obj]:
        """Create every object (List kinds are unpacked)."""
        created: builtins.list[Obj] = []
        for doc in docs:
            if not doc:
                continue
            if str(doc.get("kind", "")).endswith("List") and "items" in doc:
                created += self.load(doc["items"])
            else:
                created.append(self.create(doc))
        return created

    def _address(
        self, kind: str, namespace: str | None, name: str | None
    ) -> tuple[ResourceType, str, str]:
        rt = by_kind(kind)
        if name is None:
            if rt.namespaced:
                raise TypeError(f"{rt.kind} is namespaced: pass namespace and name")
            return rt, "", str(namespace or "")
        return rt, (namespace or "") if rt.namespaced else "", name


def _label_matcher(text: str | None) -> Callable[[Mapping[str, Any]], bool]:
    return label_selector(text)


def _field_matcher(text: str | None, rt: ResourceType) -> Callable[[Mapping[str, Any]], bool]:
    return field_selector(text, rt.field_labels)


# -- process mode ------------------------------------------------------------------------


def _split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port or 0)


def _read_docs(path: Path) -> list[Mapping[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def _write_port_file(path: Path, port: int) -> None:
    """Atomically, so a poller never reads a half-written number."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{port}\n")
    tmp.replace(path)


async def _serve_forever(args: argparse.Namespace) -> None:
    api = FakeApiServer(
        bookmark_interval=args.bookmark_interval,
        watch_timeout=args.watch_timeout,
        require_auth=args.require_auth,
    )
    # a leftover pod of an earlier server on the same runtime must not share a UID
    api.store.uid_seed = f"fakeapiserver-{uuid.uuid4().hex}"
    for path in args.load:
        api.load(_read_docs(Path(path)))
    for entry in args.host:
        name, _, address = entry.partition("=")
        api.kubelets.hosts[name] = address
    if args.kubelet_client_ca_dir:
        api.kubelets.client_ca_file(args.kubelet_client_ca_dir)
    host, port = _split_listen(args.listen) if args.listen else (None, 0)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with api.serve(host, port, uds=args.uds, tls_dir=args.tls_dir):
            if args.kubeconfig:
                api.kubeconfig(
                    args.kubeconfig, user=args.user, groups=args.group or ["system:nodes"]
                )
            for token in args.bootstrap_token:
                token_id = token.split(".", 1)[0]
                api.auth.add_token(token, f"system:bootstrap:{token_id}", ["system:bootstrappers"])
            async with trio.open_nursery() as nursery:
                if args.csr_signer and api.ca is not None:
                    await nursery.start(
                        CsrController(api, api.ca, policy=csrapproving_and_serving).run
                    )
                if args.port_file:
                    _write_port_file(Path(args.port_file), api.port if host else 0)
                log.info("fakeapiserver serving on %s", api.url if host else api.uds)
                async for _ in signals:
                    break
                nursery.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m kubelet.testing.fakeapiserver",
        description="Serve an in-memory Kubernetes API until SIGTERM/SIGINT.",
    )
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: ephemeral)")
    parser.add_argument("--port-file", help="write the chosen port here once listening")
    parser.add_argument("--uds", help="also listen on this unix socket")
    parser.add_argument("--tls-dir", help="serve HTTPS; write ca.crt and certificates here")
    parser.add_argument("--kubeconfig", help="write a kubeconfig for --user here")
    parser.add_argument("--user", default="system:node:node1", help="the kubeconfig's user")
    parser.add_argument("--group", action="append", help="the user's groups (repeatable)")
    parser.add_argument("--load", action="append", default=[], help="YAML/JSON objects to create")
    parser.add_argument("--bookmark-interval", type=float, default=60.0)
    parser.add_argument("--watch-timeout", type=float, default=None)
    parser.add_argument("--require-auth", action="store_true")
    parser.add_argument(
        "--bootstrap-token",
        action="append",
        default=[],
        help="accept this bootstrap token (<id>.<secret>) as system:bootstrap:<id>",
    )
    parser.add_argument(
        "--csr-signer",
        action="store_true",
        help="approve kubelet CSRs (client ones as kube-controller-manager, serving ones"
        " as an admin) and sign them with the TLS CA, as upstream (needs --tls-dir)",
    )
    parser.add_argument(
        "--host", action="append", default=[], help="NAME=ADDRESS: resolve a node host name"
    )
    parser.add_argument(
        "--kubelet-client-ca-dir",
        help="write the CA of the kubelet client certificate (ca.crt) here",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    trio.run(_serve_forever, args)


if __name__ == "__main__":
    main()
