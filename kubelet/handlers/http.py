"""HTTP GET for probes and lifecycle hooks: one request builder, one client path.

Building the request is pure (``build_request``): scheme, host (the pod IP unless the
action names one), a named port resolved from the container's ports, path and query,
the action's headers with upstream's defaults (``User-Agent: kube-<purpose>/<major>.<minor>``,
``Accept: */*`` unless given; an empty given Accept is dropped; a ``Host`` header sets
the request's host).

``HttpGetter.get`` sends it the way upstream's Go client does for probes: keep-alives
off (``Connection: close``), TLS not verified, redirects followed only to the same
host name and at most 10 times; a redirect elsewhere is returned as is (probes count
it as success with a warning). At most 10 KiB of the body is read (gzip undone when
we asked for it, as Go's transport does). Transport failures
raise ``HttpGetError`` with Go's wording (``Get "<url>": dial tcp <addr>: connect:
connection refused``), since that is what users see in events.

``probe`` judges a response: 2xx success, 3xx (a redirect not followed) warning,
anything else failure ``HTTP probe failed with statuscode: N``.
"""

from __future__ import annotations

import errno
import functools
import re
import socket
import ssl
import urllib.parse
import zlib
from collections.abc import Iterator

import attrs
import trio

from kubelet.api import Container, HTTPGetAction, Probe
from kubelet.version import KUBERNETES_VERSION

from .outcome import ProbeError, ProbeOutcome, ProbeResult, ProbeTarget

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
    "follow_redirect",
    "judge",
    "probe",
    "resolve_container_port",
    "user_agent",
]

MAX_BODY_BYTES = 10 * 1024
"""Bytes of response body read at most (``maxRespBodyLength``); more is not an error."""
MAX_REDIRECTS = 10
HTTP_RESPONSE_TO_HTTPS_CLIENT = "http: server gave HTTP response to HTTPS client"
RECEIVE_SIZE = 16 * 1024


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
    """What a GET came back with: status, the final URL, the first bytes of the body,
    and what went wrong reading the body, if anything (the status still stands)."""

    status_code: int
    url: str
    body: bytes = b""
    body_error: str | None = None


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


@functools.cache
def _insecure_tls() -> ssl.SSLContext:
    """One client context for every probe and hook: nothing is verified, so no CA
    bundle is loaded (that costs milliseconds per context)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
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
    """Sends probe and hook GETs: a fresh connection per request, nothing kept between
    requests (no connection pool, no cookie jar), so it needs no closing.

    Built on h11 over a Trio socket rather than httpx: a probe is one GET on a fresh
    connection, and httpx's client, pool and transport layers cost more CPU than the
    exchange itself (measured 1.5 vs 1.0 ms per probe, the wake-up included; probes
    run a few dozen times a second on a full node)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._tls = tls if tls is not None else _insecure_tls()

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
        sent = 0
        while True:
            reply = await self._round_trip(request, max_body)
            sent += 1
            follow = follow_redirect(request, reply.status, reply.location)
            if follow is None or follow.host_name != first_host:
                return HttpGetResponse(reply.status, request.url, reply.body, reply.body_error)
            if sent >= MAX_REDIRECTS:  # Go names the Location as it came
                raise HttpGetError(f"Get {_q(reply.location or '')}: stopped after 10 redirects")
            request = follow

    async def _round_trip(self, request: HttpGetRequest, max_body: int) -> _Reply:
        """One GET on a fresh connection."""
        import h11  # on the first HTTP probe or hook: most nodes' pods have none

        url = urllib.parse.urlsplit(request.url)
        if url.scheme not in ("http", "https"):
            raise HttpGetError(
                f"Get {_q(request.url)}: unsupported protocol scheme {_q(url.scheme)}"
            )
        host = url.hostname or ""
        try:
            port = url.port if url.port is not None else _default_port(url.scheme)
        except ValueError as exc:  # a redirect to a URL with a bad port
            raise HttpGetError(f"Get {_q(request.url)}: {exc}") from exc
        try:
            stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
        except (OSError, UnicodeError) as exc:  # UnicodeError: a name IDNA cannot encode
            raise HttpGetError(
                f"Get {_q(request.url)}: {dial_error_text(exc, host, port)}"
            ) from exc
        async with stream:
            if url.scheme == "https":
                # https_compatible: a server may close without TLS close_notify (Go accepts it)
                stream = trio.SSLStream(
                    stream, self._tls, server_hostname=host, https_compatible=True
                )
            decompress = request.header("Accept-Encoding") is None
            try:
                return await _converse(stream, request, url, decompress, max_body)
            except h11.LocalProtocolError as exc:  # a header the action gave is not valid
                raise HttpGetError(f"Get {_q(request.url)}: {exc}") from exc
            except (trio.BrokenResourceError, ssl.SSLError, h11.RemoteProtocolError) as exc:
                text = _tls_error_text(exc) or "EOF"
                raise HttpGetError(f"Get {_q(request.url)}: {text}") from exc


@attrs.frozen
class _Reply:
    status: int
    location: str | None
    body: bytes
    body_error: str | None


MAX_HEADER_BYTES = 10 << 20
"""Response headers read at most (Go's client default)."""


async def _converse(
    stream: trio.abc.Stream,
    request: HttpGetRequest,
    url: urllib.parse.SplitResult,
    decompress: bool,
    max_body: int,
) -> _Reply:
    import h11

    connection = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEADER_BYTES)
    headers = list(request.headers)
    if request.header("Host") is None:
        headers.insert(0, ("Host", url.netloc.rpartition("@")[2]))  # never the userinfo
    headers.append(("Connection", "close"))
    if decompress:
        headers.append(("Accept-Encoding", "gzip"))  # as Go's transport adds (and undoes) it
    target = url.path or "/"
    if url.query:
        target += "?" + url.query
    head = connection.send(h11.Request(method="GET", target=target, headers=headers))
    await stream.send_all(head + (connection.send(h11.EndOfMessage()) or b""))

    status, location, gzipped = 0, None, False
    chunks: list[bytes] = []
    size = 0
    body_error = None
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    while True:
        try:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                connection.receive_data(bytes(await stream.receive_some(RECEIVE_SIZE)))
                continue
        except (trio.BrokenResourceError, ssl.SSLError, h11.RemoteProtocolError):
            if not status:
                raise  # no response at all
            body_error = "unexpected EOF"  # the body was cut short; the status stands
            break
        if isinstance(event, h11.Response):
            status = event.status_code
            for name, value in event.headers:
                if name == b"location" and location is None:
                    location = value.decode("latin-1")
                elif name == b"content-encoding":
                    gzipped = decompress and value.strip().lower() == b"gzip"
        elif isinstance(event, h11.Data):
            data = bytes(event.data)
            if gzipped:
                try:
                    data = inflate.decompress(data, max_body - size)
                except zlib.error:
                    body_error = "gzip: invalid data"
                    break
            chunks.append(data)
            size += len(data)
            if size >= max_body:
                break  # the rest is left unread; the connection closes
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            break
    return _Reply(status, location, b"".join(chunks)[:max_body], body_error)


REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})


def follow_redirect(
    request: HttpGetRequest, status: int, location: str | None
) -> HttpGetRequest | None:
    """The GET a redirect response asks for (None: not a redirect). As Go's client: the
    headers go along (Authorization too: only same-host redirects are followed), but a
    custom Host header only when the Location is relative."""
    if status not in REDIRECT_CODES or not location:
        return None
    follow = HttpGetRequest(urllib.parse.urljoin(request.url, location), request.headers)
    if urllib.parse.urlsplit(location).scheme:
        follow = follow.without_header("Host")
    return follow


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _q(url: str) -> str:
    return f'"{url}"'


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
    """GET within ``timeoutSeconds``; a transport failure or timeout is a failure. A body
    that cannot be read to its end (or to 10 KiB) is an error, as upstream's: the
    probe's result is unknown, retried, and then thrown away."""
    assert spec.http_get is not None
    request = build_request(spec.http_get, target.container, target.pod_ip, "probe")
    try:
        response = await getter.get(request, spec.timeout_seconds)
    except HttpGetError as exc:
        return ProbeOutcome(ProbeResult.FAILURE, str(exc))
    if response.body_error is not None:
        raise ProbeError(response.body_error)
    return judge(response)
