"""Exec, attach and port-forward: the client's upgraded connection proxied to the runtime.

What upstream does (pkg/kubelet/server/server.go ``getExec``/``getAttach``/
``getPortForward``, apimachinery ``util/proxy/upgradeaware.go``): the kubelet asks the CRI
runtime for a streaming URL (``Exec``/``Attach``/``PortForward``), dials it, writes the
client's request to it with the request line rewritten to the URL's path and query (the
client's own query is dropped: the runtime keeps the options behind its one-time token),
every header kept (``Host`` too: the runtime sees the client's), and ``X-Forwarded-For``
extended with the client's address. It reads the runtime's response head: ``101`` is
written to the client byte for byte and the two connections are copied both ways until
one direction ends, then both are closed; ``>= 400`` is echoed to the client (10 s to do
it) and the connection closed; anything else is a ``500 invalid upgrade response: status
code N``. Errors before the upgrade (dial, write, a response that is not HTTP) are a
``500`` with the error's text (the kubelet's ``responder``). The kubelet never parses
SPDY or WebSocket frames on this path (a WebSocket v5 exec or attach takes another one:
``wstranslate``).

What we do differently, and why:

* A dial plus response head bound (``connect_timeout``, 30 s, the streaming protocols'
  stream-creation timeout); upstream has none, so a runtime that accepts and never
  answers would hold the request forever.
* ``streamingConnectionIdleTimeout`` (4 h by default, 0 = none) closes a stream with no
  byte in either direction for that long. Upstream passes it only to in-process
  streaming servers (dockershim); with a remote runtime its own idle timeout applies
  (containerd: ``stream_idle_timeout``, 4 h). Honouring it here makes the setting mean
  what its help text says whatever the runtime.
* Half-close: when the client is done sending (end-of-stream), the runtime is told so
  (``send_eof``) and its answer still flows back until it closes; a client whose
  connection cannot half-close (TLS, as on :10250) ends the stream, as upstream. When the
  runtime closes, the stream ends (what it sent is delivered first): a client is never
  trusted to close a stream the runtime has finished. Any error on either side ends both
  at once.
* Backpressure by construction: each direction holds at most one chunk (``CHUNK``); a
  client that never reads stops us reading the runtime, whose own buffers then fill.

Every stream runs in the task that serves its request (a task of the server nursery), with
its two copy directions in a nursery of its own: cancelling the server ends every stream
and nothing outlives the request.

Left to wire: the routes in app.py (paths, query parameters, authorization, the CRI
``Exec``/``Attach``/``PortForward`` call that yields the URL) call ``proxy_upgrade``.
"""

from __future__ import annotations

import contextlib
import math
import re
import ssl
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import urlsplit

import attrs
import trio

from kubelet.logs import get_logger

from .asgi import Response, Scope, http_error
from .wire import BROKEN

log = get_logger(__name__)

CHUNK = 256 << 10
"""Bytes read at once from either side; also what one direction holds at most."""
CONNECT_TIMEOUT = 30.0
"""Dialing the runtime and reading its response head (ours; upstream has no bound)."""
ERROR_ECHO_TIMEOUT = 10.0
"""A runtime's refusal (>= 400) is echoed to the client within this long (upstream's)."""
MAX_RESPONSE_HEAD = 1 << 20
"""The runtime's response head may not exceed this (Go's ``MaxHeaderBytes``)."""
MAX_ERROR_BODY = 1 << 20
"""At most this much of a refusal's body is echoed."""
DEFAULT_IDLE_TIMEOUT = 4 * 3600.0
"""``streamingConnectionIdleTimeout``'s default (4h0m0s)."""

Takeover = Callable[[], Awaitable[tuple[trio.abc.Stream, bytes]]]
"""``scope["extensions"]["kubelet.takeover"]`` of the HTTP/1.1 server (http1.py)."""
TAKEOVER = "kubelet.takeover"

_TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_HEAD_END = re.compile(rb"\r?\n\r?\n")


class ProxyError(Exception):
    """The upgrade could not be proxied; the message is what the client is told (500)."""


# -- the client's request -------------------------------------------------------------------


@attrs.frozen
class UpgradeRequest:
    """What of the client's request goes to the runtime: method, headers, its address."""

    method: str
    headers: tuple[tuple[bytes, bytes], ...]
    """As received, in order (names lower-case, as the HTTP/1.1 server gives them)."""
    client_address: str | None = None

    @classmethod
    def from_scope(cls, scope: Scope) -> UpgradeRequest:
        client = scope.get("client")
        return cls(
            method=str(scope["method"]),
            headers=tuple((bytes(k), bytes(v)) for k, v in scope.get("headers", [])),
            client_address=str(client[0]) if client else None,
        )

    def values(self, name: bytes) -> list[bytes]:
        return [v for k, v in self.headers if k.lower() == name]


def is_upgrade_request(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Upstream's ``IsUpgradeRequest``: some ``Connection`` header mentions "upgrade"."""
    return any(k.lower() == b"connection" and b"upgrade" in v.lower() for k, v in headers)


def canonical_header_key(name: bytes) -> bytes:
    """Go's ``CanonicalMIMEHeaderKey``: ``sec-websocket-key`` → ``Sec-Websocket-Key``.

    Names that are not HTTP tokens are left as they are (Go does the same).
    """
    if not _TOKEN.match(name):
        return name
    return b"-".join(part[:1].upper() + part[1:].lower() for part in name.split(b"-"))


# -- the runtime's URL ----------------------------------------------------------------------


@attrs.frozen
class StreamingURL:
    """A runtime streaming URL, ready to dial: ``http(s)://host:port/path?query``."""

    scheme: str
    host: str
    port: int
    target: bytes
    """Request target: the URL's path (``/`` if empty) and query."""

    @classmethod
    def parse(cls, url: str) -> StreamingURL:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise ProxyError(f"invalid streaming URL {url!r} from the runtime: {exc}") from None
        scheme = parts.scheme.lower() or "http"
        if scheme not in ("http", "https") or not parts.hostname:
            raise ProxyError(f"invalid streaming URL {url!r} from the runtime")
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        if any(c in target for c in " \r\n\t"):
            raise ProxyError(f"invalid streaming URL {url!r} from the runtime")
        return cls(
            scheme=scheme,
            host=parts.hostname,
            port=port if port is not None else (443 if scheme == "https" else 80),
            target=target.encode(),
        )


def upstream_request_head(request: UpgradeRequest, url: StreamingURL) -> bytes:
    """The request written to the runtime, as upstream's proxy writes it.

    The request line takes the URL's path and query; headers are the client's, in Go's
    canonical form and order (``Host`` first, then ``User-Agent``, ``Content-Length`` /
    ``Transfer-Encoding``, then the rest sorted), with the client's address appended to
    ``X-Forwarded-For``. ``Host`` stays the client's (upstream leaves ``UseLocationHost``
    off); a request without one gets the URL's.
    """
    grouped: dict[bytes, list[bytes]] = {}
    for name, value in request.headers:
        grouped.setdefault(canonical_header_key(name), []).append(value)
    host = grouped.pop(b"Host", [])
    if request.client_address:
        prior = grouped.pop(b"X-Forwarded-For", [])
        address = request.client_address.encode()
        grouped[b"X-Forwarded-For"] = [b", ".join([*prior, address])]
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), url.target)]
    default_host = url.host.encode()
    if b":" in default_host:
        default_host = b"[" + default_host + b"]"
    if url.port not in (80, 443):
        default_host += b":%d" % url.port
    lines.append(b"Host: " + (host[0] if host else default_host))
    for first in (b"User-Agent", b"Content-Length", b"Transfer-Encoding"):
        lines += [first + b": " + v for v in grouped.pop(first, [])]
    for name in sorted(grouped):
        lines += [name + b": " + v for v in grouped[name]]
    return b"\r\n".join(lines) + b"\r\n\r\n"


# -- the runtime's response -----------------------------------------------------------------


@attrs.frozen
class ResponseHead:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    length: int
    """Bytes of the head, terminating blank line included."""

    def header(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None


def parse_response_head(data: bytes, limit: int = MAX_RESPONSE_HEAD) -> ResponseHead | None:
    """The response head at the start of ``data``; None while it is incomplete.

    Lines may end in CRLF or LF alone (Go tolerates both). Raises ``ProxyError`` for what is
    not an HTTP/1.x response or a head longer than ``limit``.
    """
    end = _HEAD_END.search(data)
    if end is None:
        if len(data) > limit:
            raise ProxyError("malformed HTTP response: header too long")
        return None
    if end.end() > limit:
        raise ProxyError("malformed HTTP response: header too long")
    lines = data[: end.start()].replace(b"\r\n", b"\n").split(b"\n")
    status_line = lines[0]
    match = re.match(rb"^HTTP/1\.[01] (\d{3})(?: .*)?$", status_line)
    if match is None:
        shown = status_line[:64].decode("latin-1")
        raise ProxyError(f"malformed HTTP response {shown!r}")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.match(name):
            raise ProxyError(f"malformed MIME header line: {line[:64].decode('latin-1')}")
        headers.append((name.lower(), value.strip()))
    return ResponseHead(int(match.group(1)), tuple(headers), end.end())


# -- dialing --------------------------------------------------------------------------------


def default_ssl_context() -> ssl.SSLContext:
    """What upstream uses for an https streaming URL: the system roots, names verified."""
    return ssl.create_default_context()


async def dial(url: StreamingURL, ssl_context: ssl.SSLContext | None) -> trio.abc.Stream:
    """A connection to the runtime's streaming server (TLS handshake done for https)."""
    try:
        tcp = await trio.open_tcp_stream(url.host, url.port)
    except OSError as exc:
        raise ProxyError(f"error dialing backend: {exc}") from None
    if url.scheme != "https":
        return tcp
    tls = trio.SSLStream(tcp, ssl_context or default_ssl_context(), server_hostname=url.host)
    try:
        await tls.do_handshake()
    except BROKEN as exc:
        await trio.aclose_forcefully(tcp)
        raise ProxyError(f"error dialing backend: {exc}") from None
    return tls


async def _read_head(stream: trio.abc.Stream) -> tuple[ResponseHead, bytes]:
    """The runtime's response head and every byte read so far (head included)."""
    data = b""
    while True:
        try:
            chunk = await stream.receive_some(CHUNK)
        except BROKEN as exc:
            raise ProxyError(f"error reading the runtime's response: {exc}") from None
        if not chunk:
            raise ProxyError("the runtime closed the connection before answering (EOF)")
        data += chunk
        head = parse_response_head(data)
        if head is not None:
            return head, data


# -- the proxy ------------------------------------------------------------------------------


@attrs.frozen
class RelayResult:
    """How a stream ended: bytes each way and why (``eof``, ``closed``, ``idle``, an error)."""

    to_runtime: int
    to_client: int
    reason: str


async def proxy_upgrade(
    request: UpgradeRequest,
    takeover: Takeover | None,
    url: str,
    *,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ssl_context: ssl.SSLContext | None = None,
    connect_timeout: float = CONNECT_TIMEOUT,
) -> Response | None:
    """Proxy one upgrade request to the runtime's streaming ``url``.

    Returns the response to send when the connection was not taken over (a 500 when the
    upgrade cannot be proxied), None when the stream ran (or the runtime's refusal was
    echoed) on the taken-over connection, which the server closes once we return.
    """
    if takeover is None or not is_upgrade_request(request.headers):
        return http_error(500, "Upgrade request required")
    try:
        target = StreamingURL.parse(url)
        with trio.fail_after(connect_timeout):
            runtime = await dial(target, ssl_context)
            try:
                await runtime.send_all(upstream_request_head(request, target))
                head, received = await _read_head(runtime)
            except BaseException:
                await trio.aclose_forcefully(runtime)
                raise
    except trio.TooSlowError:
        log.info("streaming server did not answer in time", url=_redacted(url))
        return http_error(500, f"error dialing backend: no answer within {connect_timeout:g}s")
    except ProxyError as exc:
        log.info("error while proxying request", error=str(exc))
        return http_error(500, str(exc))
    except BROKEN as exc:
        log.info("error while proxying request", error=repr(exc))
        return http_error(500, f"error sending request: {exc}")
    try:
        if head.status != 101 and head.status < 400:
            message = f"invalid upgrade response: status code {head.status}"
            log.error("proxy upgrade error", error=message)
            return http_error(500, message)
        client, buffered = await takeover()
        if head.status != 101:
            await _echo_refusal(runtime, client, head, received)
            return None
        result = await _start_relay(client, runtime, received, buffered, idle_timeout)
        log.v(4).info(
            "stream ended", reason=result.reason,
            to_runtime=result.to_runtime, to_client=result.to_client,
        )  # fmt: skip
        return None
    finally:
        await trio.aclose_forcefully(runtime)


def _redacted(url: str) -> str:
    """A streaming URL without its one-time token (the last path segment)."""
    head, _, _ = url.rpartition("/")
    return head + "/…"


async def _echo_refusal(
    runtime: trio.abc.Stream, client: trio.abc.Stream, head: ResponseHead, received: bytes
) -> None:
    """The runtime said no (>= 400): its answer goes to the client, then both close."""
    length = head.header(b"content-length")
    want = head.length + min(int(length), MAX_ERROR_BODY) if length and length.isdigit() else None
    limit = head.length + MAX_ERROR_BODY
    data = received
    with trio.move_on_after(ERROR_ECHO_TIMEOUT):
        with contextlib.suppress(*BROKEN):
            while (want is None or len(data) < want) and len(data) < limit:
                chunk = await runtime.receive_some(CHUNK)
                if not chunk:
                    break
                data += chunk
        data = data[: want if want is not None else limit]
        with contextlib.suppress(*BROKEN):
            await client.send_all(data)
    log.v(3).info("runtime refused the upgrade", status=head.status)


async def _start_relay(
    client: trio.abc.Stream,
    runtime: trio.abc.Stream,
    received: bytes,
    buffered: bytes,
    idle_timeout: float,
) -> RelayResult:
    """Write the 101 (and what came with it) and the client's early bytes, then relay."""
    try:
        await client.send_all(received)
        if buffered:
            await runtime.send_all(buffered)
    except BROKEN as exc:
        return RelayResult(len(buffered), len(received), f"broken: {exc!r}")
    result = await relay(client, runtime, idle_timeout=idle_timeout)
    return RelayResult(
        result.to_runtime + len(buffered), result.to_client + len(received), result.reason
    )


async def relay(
    client: trio.abc.Stream,
    runtime: trio.abc.Stream,
    *,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    chunk: int = CHUNK,
) -> RelayResult:
    """Copy both ways until the runtime closes, either side fails, the client closes a
    connection that cannot half-close, or nothing moves for ``idle_timeout`` seconds (0: no
    limit). See the module docstring for half-close."""
    state = _Relay(idle_timeout)
    with state.scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(state.pump, client, runtime, "to_runtime", chunk, nursery)
            nursery.start_soon(state.pump, runtime, client, "to_client", chunk, nursery)
    if state.scope.cancelled_caught and state.reason == "eof":
        state.reason = "idle"
        log.v(3).info("streaming connection idle; closed it", idle_timeout=f"{idle_timeout:g}s")
    return RelayResult(state.moved["to_runtime"], state.moved["to_client"], state.reason)


def with_decrypted(stream: trio.abc.Stream, data: bytes | bytearray, limit: int) -> bytes:
    """``data`` and what more a TLS ``stream`` can decrypt at once, up to ``limit`` bytes.

    ``trio.SSLStream.receive_some`` returns one TLS record (16 KiB at most) per call, while
    its read from the socket (64 KiB) often holds several: relaying record by record cost
    twice the CPU per MiB of the other direction. The records already received are read
    from the stream's ``SSLObject`` here, without waiting and without a checkpoint (trio's
    own rule for touching it; anything it wants to send goes out with the next operation).
    Any other stream, or a trio whose internals moved, gets ``data`` back as it was.
    """
    ssl_object = getattr(stream, "_ssl_object", None)
    if not isinstance(stream, trio.SSLStream) or not isinstance(ssl_object, ssl.SSLObject):
        return bytes(data)
    parts = [bytes(data)]
    room = limit - len(data)
    while room > 0:
        try:
            more = ssl_object.read(room)
        except ssl.SSLError:  # nothing complete buffered, or a fault the next receive reports
            break
        if not more:  # the peer's close_notify: the next receive_some sees it too
            break
        parts.append(more)
        room -= len(more)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class _Relay:
    def __init__(self, idle_timeout: float) -> None:
        self.idle = idle_timeout if idle_timeout > 0 else math.inf
        self.scope = trio.CancelScope(deadline=trio.current_time() + self.idle)
        self.moved = {"to_runtime": 0, "to_client": 0}
        self.reason = "eof"

    def _end(self, nursery: trio.Nursery, reason: str) -> None:
        if self.reason == "eof":
            self.reason = reason
        nursery.cancel_scope.cancel()

    async def pump(
        self,
        source: trio.abc.Stream,
        sink: trio.abc.Stream,
        direction: str,
        chunk: int,
        nursery: trio.Nursery,
    ) -> None:
        try:
            while data := await source.receive_some(chunk):
                if len(data) < chunk:
                    data = with_decrypted(source, data, chunk)
                self.scope.deadline = trio.current_time() + self.idle
                await sink.send_all(data)
                self.moved[direction] += len(data)
                self.scope.deadline = trio.current_time() + self.idle
        except BROKEN as exc:
            self._end(nursery, f"{direction}: {type(exc).__name__}")
            return
        if (
            direction == "to_runtime"
            and isinstance(source, trio.abc.HalfCloseableStream)
            and isinstance(sink, trio.abc.HalfCloseableStream)
        ):
            try:
                await sink.send_eof()  # the client is done sending; the runtime may go on
            except BROKEN as exc:
                self._end(nursery, f"{direction}: {type(exc).__name__}")
            return
        self._end(nursery, "closed")
