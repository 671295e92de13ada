"""FakeApiServer's ``pods/{name}/exec|attach|portforward|log``: proxied to the node's kubelet.

As kube-apiserver (pkg/registry/core/pod/strategy.go ``ExecLocation``/``AttachLocation``/
``PortForwardLocation``/``LogLocation``, pkg/registry/core/node ``GetConnectionInfo``):

* the pod must exist (404 Status) and be bound (400 ``pod web does not have a host
  assigned``); the container, when named, must be one of its containers (400 ``container
  x is not valid for pod web``); unnamed, the pod must have exactly one;
* the kubelet is at the Node's first address of the preferred types (``Hostname``,
  ``InternalDNS``, ``InternalIP``, ``ExternalDNS``, ``ExternalIP``, as
  ``--kubelet-preferred-address-types`` by default), on ``status.daemonEndpoints.
  kubeletEndpoint.Port`` (10250 when unset), over HTTPS, the apiserver presenting its
  kubelet client certificate (``kube-apiserver-kubelet-client``, group ``system:masters``)
  and not verifying the kubelet's serving certificate (no
  ``--kubelet-certificate-authority``);
* the kubelet's path is ``/exec/{ns}/{pod}/{container}`` (``/attach``, ``/portForward/{ns}/
  {pod}``, ``/containerLogs/...``) with ``input``/``output``/``error``/``tty`` = ``1`` and
  ``command`` (``port`` for port-forward) from the API's options;
* ``nodes/{name}/proxy/<path>?<query>`` (``kubectl get --raw``) is a GET of
  ``https://<address>:<port>/<path>?<query>`` on the same address and port, the kubelet's
  status, content type and body passed back;
* an upgrade is proxied byte for byte (the kubelet's own proxy, ``kubelet.server.
  streaming``), the client's ``Authorization`` header dropped as the apiserver's
  authentication filter does.

kubectl's WebSocket port-forward tunnel (``SPDY/3.1+portforward.k8s.io``) goes to the
kubelet as it came when the Node declares ``ExtendWebSocketsToKubelet`` in
``status.declaredFeatures``; otherwise the apiserver unwraps it itself (its
``PortForwardWebsockets`` tunneling handler, the kubelet's own ``pftunnel``) and the
kubelet gets SPDY; ``tunnels_unwrapped`` counts those. What it does not model: the
apiserver's WebSocket v5 → SPDY translation for exec and attach
(``TranslateStreamCloseWebsocketRequests``): a v5 request goes to the kubelet as it came,
whatever the node declares.
``hosts`` maps node host names to addresses (the fake's own ``/etc/hosts``).
"""

from __future__ import annotations

import contextlib
import ssl
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import trio

from kubelet.server.pftunnel import is_tunnel_request, proxy_tunnel
from kubelet.server.streaming import DEFAULT_IDLE_TIMEOUT, UpgradeRequest, proxy_upgrade

from .apierrors import StatusError
from .apiresources import by_kind
from .apistore import ApiStore
from .certs import CertPair, TestCA
from .httpserver import Request, Response, Send

PREFERRED_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
DEFAULT_KUBELET_PORT = 10250
STREAMED = ("exec", "attach", "portforward")
PROXIED = (*STREAMED, "log")
_TRUE = ("1", "t", "T", "true", "TRUE", "True")


class KubeletProxy:
    """Where a pod's kubelet is and how to reach it; see the module docstring."""

    def __init__(self, store: ApiStore, ca: Callable[[], TestCA | None]) -> None:
        self.store = store
        self._ca = ca
        self.hosts: dict[str, str] = {}
        self.address_types: Sequence[str] = PREFERRED_ADDRESS_TYPES
        self.tunnels_unwrapped = 0
        self._client: CertPair | None = None
        self._own_ca: TestCA | None = None

    # -- the apiserver's kubelet client certificate -------------------------------------------

    def client_ca_file(self, directory: str | Path | None = None) -> Path:
        """The CA that signs the apiserver's kubelet client certificate (the kubelet's
        ``--client-ca-file``): the fake's TLS CA, or one of its own in ``directory``,
        where the certificate is written too (``apiserver-kubelet-client.crt``/``.key``)."""
        authority = self._authority(directory)
        self._client_pair()
        return authority.cert_path

    def _authority(self, directory: str | Path | None = None) -> TestCA:
        ca = self._ca()
        if ca is not None and self._own_ca is None:
            return ca
        if self._own_ca is None:
            where = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="kubelet-ca-"))
            where.mkdir(parents=True, exist_ok=True)
            self._own_ca = TestCA(where, "fakeapiserver-kubelet-client-ca")
        return self._own_ca

    def _client_pair(self) -> CertPair:
        if self._client is None:
            self._client = self._authority().issue(
                "apiserver-kubelet-client", "kube-apiserver-kubelet-client", ["system:masters"]
            )
        return self._client

    def ssl_context(self) -> ssl.SSLContext:
        """What the apiserver dials a kubelet with (its client certificate, no verification)."""
        pair = self._client_pair()
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(pair.cert, pair.key)
        context.set_alpn_protocols(["http/1.1"])
        return context

    # -- locations ---------------------------------------------------------------------------

    def location(self, namespace: str, name: str, sub: str, query: Mapping[str, list[str]]) -> str:
        """The kubelet URL for ``pods/{name}/{sub}``; StatusError as the apiserver answers."""

        def first(key: str) -> str:
            return (query.get(key) or [""])[0]

        pod = self.store.require(by_kind("Pod"), namespace, name)
        spec = pod.get("spec") or {}
        container = "" if sub == "portforward" else _container(spec, name, first("container"))
        node_name = spec.get("nodeName") or ""
        if not node_name:
            raise StatusError(400, f"pod {name} does not have a host assigned")
        base = self.node_base(node_name)
        if sub == "portforward":
            ports = [p for v in query.get("ports", []) for p in v.split(",") if p]
            return f"{base}/portForward/{namespace}/{name}" + _query([("port", p) for p in ports])
        if sub == "log":
            return f"{base}/containerLogs/{namespace}/{name}/{container}" + _query(
                (k, first(k)) for k in query if k in _LOG_PARAMS
            )
        params = [
            (flag, "1")
            for option, flag in (
                ("stdin", "input"), ("stdout", "output"), ("stderr", "error"), ("tty", "tty")
            )
            if first(option) in _TRUE
        ]  # fmt: skip
        if sub == "exec":
            params += [("command", c) for c in query.get("command", [])]
        return f"{base}/{sub}/{namespace}/{name}/{container}" + _query(params)

    def node_base(self, node_name: str) -> str:
        """``https://<address>:<port>`` of the node's kubelet, from its Node object."""
        node = self.store.get(by_kind("Node"), "", node_name)
        if node is None:
            raise StatusError.not_found("nodes", node_name)
        status = node.get("status") or {}
        addresses = status.get("addresses") or []
        host = ""
        for kind in self.address_types:
            host = next((a["address"] for a in addresses if a.get("type") == kind), "")
            if host:
                break
        if not host:
            raise StatusError(500, f"no preferred addresses found; known addresses: {addresses}")
        host = self.hosts.get(host, host)
        endpoint = (status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}
        port = int(endpoint.get("Port") or endpoint.get("port") or DEFAULT_KUBELET_PORT)
        return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"

    # -- proxying ----------------------------------------------------------------------------

    def _declares(self, pod: tuple[str, str], feature: str = "ExtendWebSocketsToKubelet") -> bool:
        """Whether the node of ``pod`` declares ``feature`` (apiserver's NodeFeatures check)."""
        found = self.store.get(by_kind("Pod"), *pod) or {}
        node_name = (found.get("spec") or {}).get("nodeName") or ""
        node = self.store.get(by_kind("Node"), "", node_name) if node_name else None
        declared = ((node or {}).get("status") or {}).get("declaredFeatures") or []
        return feature in declared

    async def upgrade(
        self,
        request: Request,
        url: str,
        stream: trio.abc.Stream,
        buffered: bytes,
        pod: tuple[str, str] | None = None,
    ) -> Response | int:
        """Proxy an upgrade: a Response when it failed before the connection was used, else
        the status the kubelet answered (101, or its refusal passed on). ``pod`` (namespace,
        name) of a ``pods/portforward`` request: its node decides who unwraps a tunnel."""
        headers = tuple(
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in request.raw_headers
            if k.lower() != "authorization"
        )
        upgrade = UpgradeRequest(request.method, headers, "127.0.0.1")

        watched = _StatusWatch(stream)

        async def takeover() -> tuple[trio.abc.Stream, bytes]:
            return watched, buffered

        if pod is not None and is_tunnel_request(upgrade) and not self._declares(pod):
            self.tunnels_unwrapped += 1
            answer = await proxy_tunnel(
                upgrade, takeover, url,
                idle_timeout=DEFAULT_IDLE_TIMEOUT, ssl_context=self.ssl_context(),
            )  # fmt: skip
        else:
            answer = await proxy_upgrade(upgrade, takeover, url, ssl_context=self.ssl_context())
        if answer is None:
            return watched.status
        return Response(answer.status, answer.body, "text/plain; charset=utf-8")

    async def log(self, url: str) -> Response:
        """``pods/{name}/log``: the kubelet's answer, streamed."""
        client = httpx.AsyncClient(verify=self.ssl_context(), timeout=None)
        try:
            response = await client.send(client.build_request("GET", url), stream=True)
        except httpx.HTTPError as exc:
            await client.aclose()
            raise StatusError(500, f"error dialing backend: {exc}") from None
        if response.status_code != 200:
            body = await response.aread()
            await response.aclose()
            await client.aclose()
            raise StatusError(response.status_code, body.decode(errors="replace").strip())

        async def stream(send: Send) -> None:
            try:
                async for chunk in response.aiter_raw():
                    await send(chunk)
            finally:
                with trio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await response.aclose()
                    await client.aclose()

        return Response(200, content_type="text/plain", stream=stream)

    async def forward(self, url: str) -> Response:
        """``nodes/{name}/proxy/...``: the kubelet's answer (status, type, body) streamed."""
        client = httpx.AsyncClient(verify=self.ssl_context(), timeout=None)
        try:
            response = await client.send(client.build_request("GET", url), stream=True)
        except httpx.HTTPError as exc:
            await client.aclose()
            raise StatusError(503, f"error trying to reach service: {exc}") from None

        async def stream(send: Send) -> None:
            try:
                async for chunk in response.aiter_raw():
                    await send(chunk)
            finally:
                with trio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await response.aclose()
                    await client.aclose()

        content_type = response.headers.get("content-type", "text/plain")
        return Response(response.status_code, content_type=content_type, stream=stream)


_LOG_PARAMS = frozenset(
    {"follow", "previous", "timestamps", "sinceSeconds", "sinceTime", "tailLines", "limitBytes"}
)


def _query(params: Any) -> str:
    pairs = list(params)
    return "?" + urlencode(pairs) if pairs else ""


def _container(spec: Mapping[str, Any], pod: str, name: str) -> str:
    containers = [str(c["name"]) for c in spec.get("containers") or []]
    others = [c["name"] for c in spec.get("initContainers") or []] + [
        c["name"] for c in spec.get("ephemeralContainers") or []
    ]
    if not name:
        if len(containers) == 1:
            return containers[0]
        if not containers:
            raise StatusError(400, f"a container name must be specified for pod {pod}")
        raise StatusError(
            400,
            f"a container name must be specified for pod {pod}, "
            f"choose one of: [{' '.join(containers)}]",
        )
    if name not in containers and name not in others:
        raise StatusError(400, f"container {name} is not valid for pod {pod}")
    return name


class _StatusWatch(trio.abc.Stream):
    """The client's connection, noting the status line of the first thing written to it."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.status = 0

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if not self.status and bytes(data[:9]).startswith(b"HTTP/1."):
            with contextlib.suppress(ValueError):
                self.status = int(bytes(data[9:12]))
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.stream.aclose()
