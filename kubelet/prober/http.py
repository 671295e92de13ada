"""HTTP GET for probes and lifecycle hooks: one request builder, one client path.

Building the request is pure (``build_request``): scheme, host (the pod IP unless the
action names one), a named port resolved from the container's ports, path and query,
the action's headers with upstream's defaults (``User-Agent: kube-<purpose>/<major>.<minor>``,
``Accept: */*`` unless given; an empty given Accept is dropped; a ``Host`` header sets
the request's host).

``HttpGetter.get`` sends it the way upstream's Go client does for probes: keep-alives
off (``Connection: close``), TLS not verified, redirects followed only to the same
host name and at most 10 times; a redirect elsewhere is returned as is (probes count
it as success with a warning). At most 10 KiB of the body is read. Transport failures
raise ``HttpGetError`` with Go's wording (``Get "<url>": dial tcp <addr>: connect:
connection refused``), since that is what users see in events.

``probe`` judges a response: 2xx success, 3xx (a redirect not followed) warning,
anything else failure ``HTTP probe failed with statuscode: N``.
"""

from __future__ import annotations

import errno
import re
import socket
import ssl
import urllib.parse
from collections.abc import Iterator

import attrs
import httpx
import trio

from kubelet.api.pod import Container, HTTPGetAction, Probe
from kubelet.version import KUBERNETES_VERSION

from .probes import ProbeError, ProbeOutcome, ProbeResult, ProbeTarget

__all__ = [
    "HTTP_RESPONSE_TO_HTTPS_CLIENT",
    "MAX_BODY_BYTES",
    "MAX_REDIRECTS",
    "HttpGetError",
    "HttpGetRequest",
    "HttpGetResponse",
    "HttpGetter",
    "build_request",
    "dial_error_text",
    "judge",
    "probe",
    "resolve_container_port",
    "user_agent",
]

MAX_BODY_BYTES = 10 * 1024
"""Bytes of response body read at most (``maxRespBodyLength``); more is not an error."""
MAX_REDIRECTS = 10
HTTP_RESPONSE_TO_HTTPS_CLIENT = "http: server gave HTTP response to HTTPS client"


class HttpGetError(Exception):
    """The request got no usable response (connect, TLS, protocol, redirects, timeout)."""


@attrs.frozen
class HttpGetRequest:
    """A GET ready to send: absolute URL and the final header list (order kept)."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def host_name(self) -> str:
        return urllib.parse.urlsplit(self.url).hostname or ""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), None if absent."""
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return None

    def with_scheme(self, scheme: str) -> HttpGetRequest:
        parts = urllib.parse.urlsplit(self.url)
        return attrs.evolve(self, url=urllib.parse.urlunsplit(parts._replace(scheme=scheme)))

    def without_header(self, name: str) -> HttpGetRequest:
        wanted = name.lower()
        kept = tuple((k, v) for k, v in self.headers if k.lower() != wanted)
        return attrs.evolve(self, headers=kept)


@attrs.frozen
class HttpGetResponse:
    """What a GET came back with: status, the final URL, the first bytes of the body."""

    status_code: int
    url: str
    body: bytes = b""


# -- building the request (pure) ------------------------------------------------------------


def user_agent(purpose: str) -> str:
    """``kube-probe/1.36`` / ``kube-lifecycle/1.36`` from the Kubernetes version we follow."""
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    return f"kube-{purpose}/{major}.{minor}"


def resolve_container_port(port: int | str, container: Container) -> int:
    """A port number, or a name looked up in the container's ports (then parsed as a
    number, as a last resort). ``ProbeError`` with upstream's texts when it fails."""
    if isinstance(port, int):
        number = port
    else:
        found = next((p.container_port for p in container.ports if p.name == port), None)
        if found is not None:
            number = found
        else:
            if not re.fullmatch(r"[+-]?[0-9]+", port):
                raise ProbeError(f'strconv.Atoi: parsing "{port}": invalid syntax')
            number = int(port)
    if 0 < number < 65536:
        return number
    raise ProbeError(f"invalid port number: {number}")


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _canonical(name: str) -> str:
    """Go's canonical MIME header key (``content-type`` → ``Content-Type``)."""
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


def build_request(
    action: HTTPGetAction, container: Container, pod_ip: str, purpose: str = "probe"
) -> HttpGetRequest:
    """The GET an httpGet action means (``NewRequestForHTTPGetAction``)."""
    scheme = (action.scheme or "HTTP").lower()
    host = action.host or pod_ip
    if not host:
        raise ProbeError("no host to probe: the pod has no IP yet")
    port = resolve_container_port(action.port, container)
    path = action.path
    parts = urllib.parse.urlsplit(path)
    if parts.scheme or parts.netloc:  # an absolute "path": keep only its path and query
        path = urllib.parse.urlunsplit(("", "", parts.path, parts.query, parts.fragment))
    if path and not path.startswith("/"):
        path = "/" + path
    url = f"{scheme}://{_join_host_port(host, port)}{path}"

    headers = [(_canonical(h.name), h.value) for h in action.http_headers]
    names = {name for name, _ in headers}
    if "User-Agent" not in names:
        headers.append(("User-Agent", user_agent(purpose)))
    if "Accept" not in names:
        headers.append(("Accept", "*/*"))
    elif next(v for n, v in headers if n == "Accept") == "":
        headers = [(n, v) for n, v in headers if n != "Accept"]
    host_header = next((v for n, v in headers if n == "Host"), "")
    headers = [(n, v) for n, v in headers if n != "Host"]
    if host_header:
        headers.insert(0, ("Host", host_header))
    return HttpGetRequest(url, tuple(headers))


# -- sending it ---------------------------------------------------------------------------


def _insecure_tls() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """Every exception behind ``exc``: causes, contexts, group members, wrapped args."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        todo.extend(a for a in current.args if isinstance(a, BaseException))
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)


_ERRNO_TEXT = {
    errno.ECONNREFUSED: "connect: connection refused",
    errno.EHOSTUNREACH: "connect: no route to host",
    errno.ENETUNREACH: "connect: network is unreachable",
    errno.ECONNRESET: "connect: connection reset by peer",
    errno.ETIMEDOUT: "i/o timeout",
}


def dial_error_text(exc: BaseException, host: str, port: int) -> str:
    """A connect failure as Go's dialer words it (``dial tcp 10.0.0.1:80: connect: ...``)."""
    address = _join_host_port(host, port)
    for cause in _causes(exc):
        if isinstance(cause, socket.gaierror):
            return f"dial tcp: lookup {host}: no such host"
        if isinstance(cause, OSError) and cause.errno in _ERRNO_TEXT:
            return f"dial tcp {address}: {_ERRNO_TEXT[cause.errno]}"
        if isinstance(cause, OSError) and cause.errno and cause.strerror:
            return f"dial tcp {address}: connect: {cause.strerror.lower()}"
    return f"dial tcp {address}: {exc}"


def _tls_error_text(exc: BaseException) -> str | None:
    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLError):
            reason = (cause.reason or "").upper()
            if reason in {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"}:
                return HTTP_RESPONSE_TO_HTTPS_CLIENT
            return f"tls: {cause.reason or cause}".lower()
    return None


class HttpGetter:
    """Sends probe and hook GETs over one httpx client without connection reuse."""

    def __init__(self, client: httpx.AsyncClient | None = None) -> None:
        self._client = client or httpx.AsyncClient(
            verify=_insecure_tls(),
            follow_redirects=False,
            timeout=httpx.Timeout(None),
            limits=httpx.Limits(max_keepalive_connections=0),
            trust_env=False,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def get(
        self, request: HttpGetRequest, timeout: float | None, *, max_body: int = MAX_BODY_BYTES
    ) -> HttpGetResponse:
        """Send ``request`` within ``timeout`` seconds (None: until cancelled)."""
        if timeout is None:
            return await self._exchange(request, max_body)
        with trio.move_on_after(timeout):
            return await self._exchange(request, max_body)
        raise HttpGetError(
            f"Get {_q(request.url)}: context deadline exceeded "
            "(Client.Timeout exceeded while awaiting headers)"
        )

    async def _exchange(self, request: HttpGetRequest, max_body: int) -> HttpGetResponse:
        first_host = request.host_name
        extra = [("Connection", "close")]
        if request.header("Accept-Encoding") is None:
            extra.append(("Accept-Encoding", "gzip"))  # as Go's transport adds it
        # a bare Request: the client's default headers (Accept, User-Agent) must not
        # come back after the action removed or replaced them
        outgoing = httpx.Request("GET", request.url, headers=[*request.headers, *extra])
        redirects = 0
        while True:
            response = await self._send(outgoing)
            try:
                follow = response.next_request
                if follow is None or follow.url.host != first_host:
                    body = await _read_at_most(response, max_body)
                    return HttpGetResponse(response.status_code, str(outgoing.url), body)
                if redirects >= MAX_REDIRECTS:
                    raise HttpGetError(f"Get {_q(str(follow.url))}: stopped after 10 redirects")
            finally:
                await response.aclose()
            redirects += 1
            outgoing = follow

    async def _send(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        try:
            return await self._client.send(request, stream=True)
        except httpx.ConnectError as exc:
            text = _tls_error_text(exc) or dial_error_text(
                exc, request.url.host, request.url.port or _default_port(request.url.scheme)
            )
            raise HttpGetError(f"Get {_q(url)}: {text}") from exc
        except httpx.RemoteProtocolError as exc:
            raise HttpGetError(f"Get {_q(url)}: EOF") from exc
        except httpx.HTTPError as exc:
            text = _tls_error_text(exc) or str(exc) or type(exc).__name__
            raise HttpGetError(f"Get {_q(url)}: {text}") from exc


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _q(url: str) -> str:
    return f'"{url}"'


async def _read_at_most(response: httpx.Response, limit: int) -> bytes:
    """The first ``limit`` bytes of the body; the rest is left unread (not an error).

    Reading stops by cancelling the read in flight: the exception unwinds httpx's and
    httpcore's nested body generators, which breaking out of the loop would leave to
    the garbage collector (ResourceWarnings), and the connection is closed.
    """
    chunks: list[bytes] = []
    size = 0
    with trio.CancelScope() as enough:
        try:
            async for chunk in response.aiter_bytes():
                if size < limit:
                    chunks.append(chunk)
                    size += len(chunk)
                if size >= limit:
                    enough.cancel()
        except httpx.HTTPError:
            pass  # a body cut short does not change the status code's verdict
    return b"".join(chunks)[:limit]


# -- the probe ----------------------------------------------------------------------------


def judge(response: HttpGetResponse) -> ProbeOutcome:
    """Upstream's verdict on a response (pure)."""
    code = response.status_code
    body = response.body.decode("utf-8", "replace")
    if 200 <= code < 300:
        return ProbeOutcome(ProbeResult.SUCCESS, body)
    if 300 <= code < 400:
        return ProbeOutcome(
            ProbeResult.WARNING, f"Probe terminated redirects, Response body: {body}"
        )
    return ProbeOutcome(ProbeResult.FAILURE, f"HTTP probe failed with statuscode: {code}")


async def probe(getter: HttpGetter, spec: Probe, target: ProbeTarget) -> ProbeOutcome:
    """GET within ``timeoutSeconds``; a transport failure or timeout is a failure."""
    assert spec.http_get is not None
    request = build_request(spec.http_get, target.container, target.pod_ip, "probe")
    try:
        response = await getter.get(request, spec.timeout_seconds)
    except HttpGetError as exc:
        return ProbeOutcome(ProbeResult.FAILURE, str(exc))
    return judge(response)
