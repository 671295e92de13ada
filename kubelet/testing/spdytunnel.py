"""A port-forward client through kubectl's WebSocket tunnel, for tests and the benchmark.

What client-go's ``NewSPDYOverWebsocketDialer`` does: a WebSocket with the subprotocol
``SPDY/3.1+portforward.k8s.io`` whose binary messages carry SPDY/3.1 (each write one
message), then port-forward's two streams per connection (``error`` and ``data``, with
``port`` and ``requestid`` headers; ``fakespdy`` has the framing).
"""

from __future__ import annotations

import collections

import trio
from wsproto.events import BytesMessage, CloseConnection, Ping

from kubelet.server.spdy import FLAG_FIN, SpdyConnection

from .wschannels import ChannelClient

TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"


class TunnelBytes(trio.abc.Stream):
    """A client's WebSocket as a byte stream (client-go's ``TunnelingConnection``)."""

    def __init__(self, client: ChannelClient) -> None:
        self.stream = client.stream
        self.ws = client.ws
        self._pending: collections.deque[bytes] = collections.deque()
        self._closed = False
        self._lock = trio.Lock()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        async with self._lock:
            await self.stream.send_all(self.ws.send(BytesMessage(data=bytes(data))))

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while not self._pending and not self._closed:
            data = bytes(await self.stream.receive_some(1 << 18))
            self.ws.receive_data(data or None)
            for event in self.ws.events():
                if isinstance(event, BytesMessage) and event.data:
                    self._pending.append(bytes(event.data))
                elif isinstance(event, Ping):
                    async with self._lock:
                        await self.stream.send_all(self.ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self._closed = True
            self._closed = self._closed or not data
        return self._pending.popleft() if self._pending else b""

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


class ForwardError(Exception):
    """What the error stream said (e.g. the runtime could not reach the port)."""


async def forward_once(
    spdy: SpdyConnection, port: int, payload: bytes, request_id: int, until: bytes | None = None
) -> bytes:
    """One forwarded connection: ``payload`` to ``port``; what came back until the data
    stream's end (or until ``until`` appears in it)."""
    error_id, data_id = 4 * request_id + 1, 4 * request_id + 3
    for stream_id, kind in ((error_id, "error"), (data_id, "data")):
        headers = {"streamtype": kind, "port": str(port), "requestid": str(request_id)}
        await spdy.syn_stream(stream_id, headers)
    await spdy.data(data_id, payload)
    received = b""
    async for frame in spdy.frames():
        if frame.control:
            continue
        if frame.kind == error_id and frame.payload:
            raise ForwardError(frame.payload.decode(errors="replace"))
        if frame.kind == data_id:
            received += frame.payload
            if frame.flags & FLAG_FIN or (until is not None and until in received):
                break
    return received


def tunnel_spdy(client: ChannelClient) -> SpdyConnection:
    """SPDY over the tunnel ``client`` opened (with ``TUNNEL_PROTOCOL``)."""
    return SpdyConnection(TunnelBytes(client), b"")


