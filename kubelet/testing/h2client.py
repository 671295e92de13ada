"""A raw HTTP/2 client (h2 over a trio stream) for tests that must see every frame's effect.

httpx hides what a server test has to check: that a response arrived before the request
body was sent, whether the stream was reset and with which code, that the connection's
flow-control credit came back, that the next request goes over the same connection.
``H2Client.request`` sends a request, its body as the windows allow, and returns the
response together with how much of the body went out.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Sequence

import attrs
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import trio


@attrs.define
class H2Response:
    stream_id: int
    status: int = 0
    headers: dict[str, str] = attrs.field(factory=dict)
    body: bytes = b""
    ended: bool = False
    reset_code: int | None = None
    """The error code of a RST_STREAM from the server (0 is NO_ERROR)."""
    body_sent: int = 0
    """Request body bytes sent before the stream closed."""


class H2Client:
    """One HTTP/2 connection; requests one at a time (enough for these tests)."""

    def __init__(self, stream: trio.abc.Stream, authority: str) -> None:
        self.stream = stream
        self.authority = authority
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.terminated: h2.events.ConnectionTerminated | None = None
        self.closed = False

    @classmethod
    async def connect(cls, host: str, port: int, *, tls: ssl.SSLContext | None = None) -> H2Client:
        """Connect (ALPN ``h2`` over TLS, prior knowledge without) and send the preface."""
        stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
        if tls is not None:
            stream = trio.SSLStream(stream, tls, server_hostname=host)
            await stream.do_handshake()
            assert stream.selected_alpn_protocol() == "h2", "server did not choose h2"
        client = cls(stream, f"{host}:{port}")
        client.conn.initiate_connection()
        await client._flush()
        return client

    @staticmethod
    def tls_context() -> ssl.SSLContext:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.set_alpn_protocols(["h2"])
        return context

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)

    async def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            await self.stream.send_all(data)

    async def _pump(self, responses: dict[int, H2Response]) -> None:
        """Read once and apply the events."""
        data = await self.stream.receive_some(65536)
        if not data:
            self.closed = True
            return
        for event in self.conn.receive_data(data):
            response = responses.get(getattr(event, "stream_id", None) or -1)
            if isinstance(event, h2.events.ResponseReceived) and response is not None:
                for name, value in event.headers or []:
                    key, text = bytes(name).decode(), bytes(value).decode()
                    if key == ":status":
                        response.status = int(text)
                    else:
                        response.headers[key] = text
            elif isinstance(event, h2.events.DataReceived):
                if response is not None:
                    response.body += event.data or b""
                if event.stream_id is not None:
                    self._ack(event.flow_controlled_length or 0, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded) and response is not None:
                response.ended = True
            elif isinstance(event, h2.events.StreamReset) and response is not None:
                response.reset_code = int(event.error_code or 0)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.terminated = event
        await self._flush()

    def _ack(self, size: int, stream_id: int) -> None:
        if size:
            with contextlib.suppress(h2.exceptions.StreamClosedError):
                self.conn.acknowledge_received_data(size, stream_id)

    def _stream_open(self, stream_id: int) -> bool:
        try:
            self.conn.local_flow_control_window(stream_id)
        except h2.exceptions.StreamClosedError:
            return False
        return True

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: Sequence[tuple[str, str]] = (),
    ) -> H2Response:
        """Send a request (body as flow control allows) and read its response to the end."""
        stream_id = self.conn.get_next_available_stream_id()
        response = H2Response(stream_id)
        responses = {stream_id: response}
        head = [
            (":method", method),
            (":path", path),
            (":scheme", "https" if isinstance(self.stream, trio.SSLStream) else "http"),
            (":authority", self.authority),
            *headers,
        ]
        if body:
            head.append(("content-length", str(len(body))))
        self.conn.send_headers(stream_id, head, end_stream=not body)
        await self._flush()
        view = memoryview(body)
        done = not body
        while not (response.ended or response.reset_code is not None) or not done:
            if self.closed or self.terminated is not None:
                break
            if not done:
                if response.reset_code is not None or not self._stream_open(stream_id):
                    done = True
                    continue
                window = min(
                    self.conn.local_flow_control_window(stream_id),
                    self.conn.max_outbound_frame_size,
                )
                if window > 0:
                    chunk, view = view[:window], view[window:]
                    try:
                        self.conn.send_data(stream_id, chunk.tobytes(), end_stream=not view)
                    except h2.exceptions.StreamClosedError:
                        done = True
                        continue
                    response.body_sent += len(chunk)
                    done = not view
                    await self._flush()
                    continue
            await self._pump(responses)
        return response
