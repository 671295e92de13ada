"""A minimal ASGI layer: requests in, whole or streamed responses out.

Handlers are ``async def handler(request) -> Response | StreamResponse``. A streamed
response's producer writes chunks until it is done; when the client goes away, the
producer is cancelled (a ``follow`` log stream must not outlive its reader).
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qs

import attrs
import trio

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Write = Callable[[bytes], Awaitable[None]]

TEXT = "text/plain; charset=utf-8"
JSON = "application/json"

peer_certificate: contextvars.ContextVar[bytes | None] = contextvars.ContextVar(
    "kubelet_peer_certificate", default=None
)
"""The verified TLS client certificate (DER) of the connection being served.

Set by the server's connection handler before it serves the connection; every
request task of that connection inherits it (trio copies the context at spawn).
"""


@attrs.frozen
class Request:
    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    peer_certificate: bytes | None = None
    scope: Scope | None = attrs.field(default=None, eq=False, repr=False)
    """The ASGI scope it came from (exec/attach/port-forward take its connection over)."""
    receive: Receive | None = attrs.field(default=None, eq=False, repr=False)
    """The ASGI ``receive`` of the exchange (``/run`` watches it for the client leaving)."""

    def param(self, name: str) -> str | None:
        """The first value of query parameter ``name`` (None when absent)."""
        values = self.query.get(name)
        return values[0] if values else None

    @classmethod
    def from_scope(cls, scope: Scope, receive: Receive | None = None) -> Request:
        headers: dict[str, str] = {}
        for key, value in scope.get("headers", []):
            headers[key.decode("latin-1").lower()] = value.decode("latin-1")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        return cls(
            method=scope["method"],
            path=scope["path"],
            query=query,
            headers=headers,
            peer_certificate=peer_certificate.get(),
            scope=scope,
            receive=receive,
        )


@attrs.frozen
class Response:
    status: int
    body: bytes = b""
    content_type: str = TEXT
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class StreamResponse:
    """A response written by ``produce(write)``, chunk by chunk, until it returns."""

    status: int
    produce: Callable[[Write], Awaitable[None]]
    content_type: str = TEXT


Handler = Callable[[Request], Awaitable[Response | StreamResponse]]


def text(status: int, body: str, *headers: tuple[str, str]) -> Response:
    return Response(status, body.encode(), TEXT, tuple(headers))


NOT_FOUND = "404 page not found"
"""Go's ``http.NotFound`` text."""


def http_error(status: int, message: str) -> Response:
    """Go's ``http.Error``: the message and a newline, plain text, no sniffing."""
    return text(status, message + "\n", ("X-Content-Type-Options", "nosniff"))


def json_response(obj: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(obj, separators=(",", ":")).encode(), JSON)


def _start(status: int, content_type: str, extra: tuple[tuple[str, str], ...] = ()) -> Message:
    headers = [(b"content-type", content_type.encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in extra]
    return {"type": "http.response.start", "status": status, "headers": headers}


async def send_response(response: Response | StreamResponse, receive: Receive, send: Send) -> None:
    """Send a response; a stream stops when the client disconnects."""
    if isinstance(response, Response):
        headers = (*response.headers, ("content-length", str(len(response.body))))
        await send(_start(response.status, response.content_type, headers))
        await send({"type": "http.response.body", "body": response.body})
        return
    await send(_start(response.status, response.content_type))
    gone = False

    async def write(chunk: bytes) -> None:
        if chunk:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def produce(scope: trio.CancelScope) -> None:
        await response.produce(write)
        scope.cancel()

    async def watch(scope: trio.CancelScope) -> None:
        nonlocal gone
        while (await receive())["type"] != "http.disconnect":
            pass
        gone = True
        scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce, nursery.cancel_scope)
        nursery.start_soon(watch, nursery.cancel_scope)
    if not gone:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
